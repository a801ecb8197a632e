"""A profile's summary.json is written as its record and read back as the same record.

Real runs, not built dicts: a finished loop, a crashed one, one that closed no step and a job of
two gloo ranks under torchrun. What the profiler writes must parse into ``ProfileSummary`` and
write back to the very same JSON (no key lost, none added, nothing renamed), and the record's keys
are the reference table's, in its order.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

import autotune
from profilers.contract.fields import means, reference_rows
from profilers.contract.json_checks import record_json, written_keys
from profilers.contract.profile_summary import ProfileSummary
from profilers.contract.study.summary import TuningSummary


def _train(steps: int, fail_at: int | None = None) -> None:
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for i in range(steps):
        loss = model(torch.randn(4, 8)).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if i + 1 == fail_at:
            raise RuntimeError("boom")


def _summary(run_dir: Path) -> dict:
    return json.loads((run_dir / "summary.json").read_text())


def _round_trips(data: dict, where: str) -> ProfileSummary:
    record = ProfileSummary.parse(data, where)
    assert record_json(record) == data
    assert list(record_json(record)) == list(data)  # the same key order too
    return record


def test_every_written_field_of_a_summary_says_what_it_means():
    for record in (ProfileSummary, TuningSummary):
        documented = [key for keys, _, _ in reference_rows(record) for key in keys]
        assert documented == list(written_keys(record))  # every key written has its row, in order

    @dataclasses.dataclass
    class Undocumented:
        written: int = dataclasses.field(default=0, metadata=means("a documented key"))
        forgotten: int = 0

    with pytest.raises(ValueError, match=r"Undocumented.forgotten is written but says no meaning"):
        reference_rows(Undocumented)


def test_a_finished_and_a_crashed_run_write_back_exactly_what_they_read(tmp_path):
    with autotune.profile(run_dir=tmp_path / "ok", quiet=True, profile_steps=2) as prof:
        _train(10)
    written = _summary(tmp_path / "ok")
    assert prof.summary == written  # the API gives what the file holds
    record = _round_trips(written, "ok")
    assert record.outcome == "finished" and record.steps == 10 and record.window is not None
    assert record.model.parameters == 8 * 16 + 16 + 16 + 1 and record.model.class_name == "Sequential"
    assert record.samples_from is not None and record.samples_from.shape == (4, 8)
    assert "seen" not in written and written["error"] is None  # written only when they hold something

    with pytest.raises(RuntimeError), autotune.profile(run_dir=tmp_path / "crash", quiet=True) as prof:
        _train(6, fail_at=5)
    crashed = _round_trips(_summary(tmp_path / "crash"), "crash")
    assert crashed.outcome == "crashed" and crashed.error is not None
    assert "exit_code" not in _summary(tmp_path / "crash")["error"]  # SystemExit's only
    assert (crashed.error.type, crashed.error.message, crashed.error.step) == ("RuntimeError", "boom", 5)


def test_a_run_that_closed_no_step_says_what_it_saw(tmp_path):
    model = nn.Linear(8, 1)
    with autotune.profile(run_dir=tmp_path / "none", quiet=True):
        model(torch.randn(4, 8))  # a forward, never an optimizer step
    written = _summary(tmp_path / "none")
    record = _round_trips(written, "none")
    assert record.outcome == "no_steps" and written["seen"] == {"optimizer_steps": 0, "model_forward": True}
    assert written["step_time_s"] is None and written["loss"] is None and written["gpu"] is None


SCRIPT = """
import torch, torch.distributed as dist
from torch import nn
dist.init_process_group("gloo")
model = nn.parallel.DistributedDataParallel(nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(10):
    loss = model(torch.randn(4, 8)).sum()
    opt.zero_grad(); loss.backward(); opt.step()
dist.destroy_process_group()
"""


def test_a_two_rank_jobs_summary_writes_back_what_it_read(tmp_path):
    script = tmp_path / "ddp.py"
    script.write_text(SCRIPT)
    run_dir = tmp_path / "job"
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2"]
    command = [*torchrun, "-m", "autotune", "profile", "--run-dir", str(run_dir), "--quiet", str(script)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    record = _round_trips(_summary(run_dir), "job")
    assert [r.rank for r in record.ranks] == [0, 1] and record.ranks[1].steps == 10
    throughput = record.throughput
    assert throughput.per_rank_samples_per_s is not None and len(throughput.per_rank_samples_per_s) == 2
    assert throughput.samples_per_s == pytest.approx(sum(throughput.per_rank_samples_per_s))
    assert record.load_figures is None or record.load_figures.ranks in (None, 2)
