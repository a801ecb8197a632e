"""A profiling session end to end, in process, on real CPU training loops."""

import gzip
import json
import sqlite3
import time

import pytest
import torch
from torch import nn

import autotune
from profilers.contract.reader import read_steps
from profilers.runtime.backends.replay import ReplayBackend

RECORDING = "tests/data/host_recording.jsonl.gz"


class KwargModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(50, 16)
        self.out = nn.Linear(16, 50)

    def forward(self, *, input_ids):
        return self.out(self.emb(input_ids))


def train(steps, batch=16, probe=None):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for i in range(steps):
        x, y = torch.randn(batch, 32), torch.randint(0, 4, (batch,))
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if probe is not None:
            probe(i)


def test_store_is_readable_while_the_run_is_written(tmp_path):
    seen = {}

    def probe(i):
        if i == 9:  # poll until the recorder's flushes (every second) show the steps so far
            end = time.monotonic() + 30
            while time.monotonic() < end:
                conn = sqlite3.connect(f"file:{tmp_path / 'run' / 'run.db'}?mode=ro", uri=True)
                try:
                    seen["steps"] = conn.execute("SELECT COUNT(*) FROM steps").fetchone()[0]
                    seen["samples"] = conn.execute("SELECT COUNT(*) FROM samples").fetchone()[0]
                except sqlite3.OperationalError:
                    pass  # the tables are not there yet
                finally:
                    conn.close()
                if seen.get("steps", 0) >= 8 and seen.get("samples", 0) >= 1:
                    break
                time.sleep(0.1)

    with autotune.profile(run_dir=tmp_path / "run", quiet=True, deep_profile=False):
        train(15, probe=probe)
    assert seen["steps"] >= 8  # steps 1..9 closed by then, minus the one still pending
    assert seen["samples"] >= 1
    assert len(read_steps(tmp_path / "run" / "run.db")) == 15


def test_deep_profile_window_writes_a_trace_and_top_ops(tmp_path):
    enabled = []
    with autotune.profile(run_dir=tmp_path / "run", quiet=True) as prof:
        train(12, probe=lambda i: enabled.append(torch.autograd.profiler._is_profiler_enabled))
    s = prof.summary
    assert s["trace_files"] == ["traces/rank0-steps5-7.json.gz"]
    with gzip.open(tmp_path / "run" / s["trace_files"][0]) as f:
        trace = json.load(f)
    names = {e.get("name") for e in trace["traceEvents"]}
    assert "aten::addmm" in names
    assert any(op["name"] == "aten::addmm" and op["flops"] for op in s["top_ops"])
    # on only inside steps 5-7 (indexes 4-6 here; the probe runs after each step's optimizer)
    assert enabled[:4] == [False] * 4
    assert enabled[4:6] == [True, True]
    assert enabled[8:] == [False] * 4
    kinds = [r.kind for r in read_steps(tmp_path / "run" / "run.db")]
    assert kinds == ["warmup"] * 3 + ["flops"] + ["trace"] * 3 + ["settle"] + ["measured"] * 4
    assert s["measured_steps"] == 4


def test_trace_over_the_cap_is_dropped_with_a_warning(tmp_path):
    with autotune.profile(run_dir=tmp_path / "run", quiet=True, trace_cap_bytes=100) as prof:
        train(10)
    assert prof.summary["trace_files"] == []
    assert any("cap" in w for w in prof.summary["warnings"])
    assert not list((tmp_path / "run" / "traces").glob("*.gz"))


def test_flops_of_a_known_model(tmp_path):
    with autotune.profile(run_dir=tmp_path / "run", quiet=True, deep_profile=False) as prof:
        train(6, batch=16)
    # forward 2*B*(32*64 + 64*4); backward: weight grads of both + input grad of the second
    fwd = 2 * 16 * (32 * 64 + 64 * 4)
    assert prof.summary["flops_per_step"] == fwd + fwd + 2 * 16 * 64 * 4
    assert prof.summary["mfu"] is None  # CPU peak unknown
    with autotune.profile(run_dir=tmp_path / "run2", quiet=True, deep_profile=False, peak_tflops=1.0) as prof:
        train(12, batch=16)
    s = prof.summary
    assert s["mfu"] == pytest.approx(s["flops_per_step"] / s["step_time_s"]["median"] / 1e12)


def test_keyword_only_inputs_count_samples_and_tokens_after_warmup(tmp_path):
    torch.manual_seed(0)
    model = KwargModel()
    opt = torch.optim.Adam(model.parameters())
    with autotune.profile(run_dir=tmp_path / "run", quiet=True, deep_profile=False) as prof:
        for _ in range(10):
            ids = torch.randint(0, 50, (8, 12))
            loss = nn.functional.cross_entropy(model(input_ids=ids).flatten(0, 1), ids.flatten())
            opt.zero_grad()
            loss.backward()
            opt.step()
    steps = read_steps(tmp_path / "run" / "run.db")
    # step 4's first forward was seen by the warm-up's global hooks, which get no keyword arguments
    assert [s.samples for s in steps[4:]] == [8] * 6
    assert [s.tokens for s in steps[4:]] == [96] * 6
    st = prof.summary
    assert st["throughput"]["tokens_per_s"] == pytest.approx(12 * st["throughput"]["samples_per_s"])


def test_replay_backend_feeds_the_host_figures(tmp_path):
    recorded = ReplayBackend(RECORDING)
    rss = [s.rss_bytes for s in (recorded.sample()[0] for _ in range(30))]
    with autotune.profile(
        run_dir=tmp_path / "run", quiet=True, backend=f"replay:{RECORDING}", sample_hz=50
    ) as prof:
        train(10)
    host = prof.summary["host"]
    assert host["samples"] >= 2
    assert min(rss) <= host["rss_peak_bytes"] <= max(rss)
    conn = sqlite3.connect(tmp_path / "run" / "run.db")
    assert json.loads(conn.execute("SELECT value FROM meta WHERE key='backends'").fetchone()[0]) == ["replay"]


def test_default_run_directories_do_not_collide(tmp_path):
    dirs = []
    for _ in range(2):
        with autotune.profile(runs_root=tmp_path, name="same name", quiet=True, deep_profile=False) as prof:
            train(4)
        dirs.append(prof.run_dir)
    assert dirs[0] != dirs[1]
    assert dirs[0].parent == tmp_path
    assert dirs[0].name.endswith("-same-name")
    assert (dirs[1] / "summary.json").is_file()


def test_bad_options_are_one_clear_error():
    with pytest.raises(ValueError, match="profile_steps must be >= 1"):
        autotune.profile(profile_steps=0)
    with pytest.raises(TypeError, match="unexpected keyword argument 'warmup'"):
        autotune.profile(warmup=3)
