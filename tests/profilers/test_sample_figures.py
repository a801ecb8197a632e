"""The figures of a run's samples come from the summarizer once, whichever version wrote the summary.

A finished run's report reads GPU utilisation quantiles, throttling shares and the memory lines
from summary.json, and loads only the samples it draws (every host reading, the GPU readings
thinned to its charts' points); a summary from before those figures is completed from run.db's
samples by the same summarizer. Both must give the advice the same figures.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math

import pytest

from autotune.advice import facts
from profilers.contract import rundir
from profilers.contract.reader import Snapshot
from profilers.contract.records import StepRecord
from profilers.contract.rundir import RunData, load_run
from profilers.contract.schema import STORE_NAME, SUMMARY_NAME
from profilers.contract.summarize import memory_envelope, steady_span_ns
from profilers.runtime.store import RunStore
from tests.autotune.advice.gpu_runs import GIB, HW_THERMAL, SW_POWER_CAP, h200_run

#: Figures the summarizer added to a GPU entry and the host entry, which older summaries lack.
NEW_GPU_KEYS = ("throttle", "mem_used_envelope")
NEW_UTIL_KEYS = ("p5", "readings")


def _leaky_throttled_run() -> RunData:
    """400 steps (48 s at 10 Hz): memory growing 0.2 GiB/s, power-capped a fifth of the time."""
    return h200_run(
        steps=400,
        util_pct=lambda t: 70.0 + 25.0 * math.sin(t / 3),
        mem_used_bytes=lambda t: 60 * GIB + t * 0.2 * GIB,
        throttle_mask=lambda t: SW_POWER_CAP if int(t * 10) % 5 == 0 else HW_THERMAL * (int(t * 10) % 7 == 0),
    )


def _write(run: RunData, path, summary) -> None:  # type: ignore[no-untyped-def]
    """``run`` as the profiler leaves it on disk: run.db (steps, samples, devices) and summary.json."""
    path.mkdir(parents=True)
    store = RunStore(path / STORE_NAME)
    store.set_meta({"name": "train"})
    store.set_devices([d.info for d in run.devices])
    store.add_steps(list(run.steps))
    store.add_samples(run.samples)
    store.close()
    (path / SUMMARY_NAME).write_text(json.dumps(summary))


def _older(summary: dict) -> dict:  # type: ignore[type-arg]
    """``summary`` as the profiler wrote it before the sample figures were added."""
    gpus = []
    for g in summary["gpu"]:
        g = {k: v for k, v in g.items() if k not in NEW_GPU_KEYS}
        g["util_pct"] = {k: v for k, v in g["util_pct"].items() if k not in NEW_UTIL_KEYS}
        gpus.append(g)
    host = {k: v for k, v in summary["host"].items() if k != "rss_envelope"}
    return {**summary, "gpu": gpus, "host": host}


def _figures(run: RunData) -> tuple:  # type: ignore[type-arg]
    return facts.gpu_utilization(run), facts.throttling(run), facts.memory_trend(run)


def test_a_finished_run_reads_the_same_figures_from_its_summary_as_from_every_sample(tmp_path, monkeypatch):
    monkeypatch.setattr(rundir, "THINNED_POINTS", 50)
    made = _leaky_throttled_run()
    _write(made, tmp_path / "new", made.summary)
    _write(made, tmp_path / "old", _older(made.summary))

    fast, full = load_run(tmp_path / "new"), load_run(tmp_path / "old")
    gpu_readings = sum(1 for s in made.samples if s.kind == "gpu")
    assert gpu_readings > 400
    # the new summary's run loads its host readings and 50 GPU readings (one per slice), not all
    assert sum(1 for s in fast.samples if s.kind == "gpu") == 50
    assert [s for s in fast.samples if s.kind == "host"] == [s for s in made.samples if s.kind == "host"]
    assert sum(1 for s in full.samples if s.kind == "gpu") == gpu_readings

    util, throttled, trend = _figures(fast)
    assert _figures(full) == _figures(made) == (util, throttled, trend)
    # and they are the injected ones: a fifth of the readings power-capped, 0.2 GiB/s of growth
    (t,) = throttled
    assert t.reasons["sw_power_cap"] == pytest.approx(0.2, abs=0.02)
    assert t.share == pytest.approx(t.reasons["sw_power_cap"] + t.reasons["hw_thermal_slowdown"], abs=0.01)
    assert trend is not None and trend.bytes_per_step == pytest.approx(0.2 * GIB * 0.12, rel=0.1)
    (u,) = util
    assert u.p5_pct == pytest.approx(45, abs=2) and u.p95_pct == pytest.approx(95, abs=1)


def test_the_summarys_figures_win_over_the_samples_a_run_was_given():
    """A RunData completes a summary only where it lacks a figure: what the profiler wrote stays."""
    made = _leaky_throttled_run()
    summary = json.loads(json.dumps(made.summary))
    summary["gpu"][0]["util_pct"]["p5"] = 12.5
    (util,) = facts.gpu_utilization(dataclasses.replace(made, summary=summary))
    assert util.p5_pct == 12.5
    older = _older(made.summary)
    completed = dataclasses.replace(made, summary=older).summary
    assert completed["gpu"][0]["util_pct"]["p5"] == made.summary["gpu"][0]["util_pct"]["p5"]
    assert "p5" not in older["gpu"][0]["util_pct"]  # the given dict is not changed


def test_thinned_readings_are_real_rows_spread_over_the_run(tmp_path):
    made = _leaky_throttled_run()
    _write(made, tmp_path / "run", made.summary)
    with Snapshot(tmp_path / "run" / STORE_NAME) as snap:
        _, _, every = snap.samples()
        ranks, thinned = snap.thinned_samples("gpu", 20)
        host_ranks, host = snap.host_samples()
    gpu = [s for s in every if s.kind == "gpu"]
    assert len(thinned) == 20 and set(ranks) == {0}
    assert set(thinned) <= set(gpu)  # whole readings, not averages
    assert thinned[0] == gpu[0] and [s.t_ns for s in thinned] == sorted(s.t_ns for s in thinned)
    gaps = [b.t_ns - a.t_ns for a, b in itertools.pairwise(thinned)]
    span = gpu[-1].t_ns - gpu[0].t_ns
    assert max(gaps) <= span / 20 + 2e8  # one per twentieth of the run (readings every 100 ms)
    assert host == [s for s in every if s.kind == "host"] and set(host_ranks) == {0}


def test_the_memory_line_leaves_out_readings_before_the_instruments_finished():
    """Steps found from backward passes are measured before the FLOP count and trace ran: the
    memory those leave must not read as growth, so readings before the last of them are left out
    (they went into slices before the span's start, at negative times, before)."""
    t0, ms = 10**18, 1_000_000

    def step(n: int, kind: str) -> StepRecord:
        return StepRecord(n, 0, t0 + n * 100 * ms, 100 * ms, 0, 40 * ms, 50 * ms, 10 * ms, 0, 8, None, kind)

    steps = [step(n, "measured") for n in range(1, 11)] + [step(11, "flops"), step(12, "trace")]
    steps += [step(n, "measured") for n in range(13, 41)]
    steady = steady_span_ns(steps)
    assert steady == (t0 + 13 * 100 * ms, t0 + 41 * 100 * ms)
    before = [(t0 + k * 50 * ms, 9e9) for k in range(2, 26)]  # high before the instruments finished
    after = [(t0 + k * 50 * ms, 1e9) for k in range(26, 82)]  # flat after
    envelope = memory_envelope(before + after, steady)
    assert envelope is not None and envelope.readings == len(after)
    assert {v for _, v in envelope.peaks} == {1e9}
    assert all(0 <= t <= 2.8 for t, _ in envelope.peaks)
