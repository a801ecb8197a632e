"""Why the GPU waits: the idle breakdown against HTA's own figures, its causes, and the rule on them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autotune.advice.rules_trace import advise_trace, idle_sync
from profilers.traces.analysis import analyse_traces
from tests.profilers.test_gpu_time import kernel, launch, step, write_trace

TRACES = Path(__file__).resolve().parent.parent / "data" / "gpu_traces"
REFERENCE = json.loads((TRACES / "hta_idle_reference.json").read_text())["traces"]
FIELD = {"host_wait": "host_wait_us", "kernel_wait": "kernel_wait_us", "other": "other_us"}


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_every_streams_idle_split_is_htas_to_the_microsecond(name):
    ranks = {r.rank: r for r in analyse_traces(TRACES / name, hta_rounding=True).ranks}
    for row in REFERENCE[name]:
        b = ranks[row["rank"]].idle_breakdown
        assert b is not None
        stream = next(s for s in b.streams if s.stream == row["stream"])
        assert getattr(stream, FIELD[row["idle_category"]]) == pytest.approx(row["idle_time_us"], abs=0.5)
        if row["idle_time_ratio"] is not None:  # HTA rounds its ratio to 0.01
            share = getattr(stream, FIELD[row["idle_category"]].replace("_us", "_pct")) or 0.0
            assert share == pytest.approx(100 * row["idle_time_ratio"], abs=0.5 + 1e-9)


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_without_htas_rounding_the_shares_stay_within_two_points(name):
    exact = {r.rank: r.idle_breakdown for r in analyse_traces(TRACES / name, hta_rounding=True).ranks}
    raw = {r.rank: r.idle_breakdown for r in analyse_traces(TRACES / name).ranks}
    for rank, b in raw.items():
        ref = exact[rank]
        assert b is not None and ref is not None and b.stream == ref.stream
        for field in ("host_wait_pct", "kernel_wait_pct", "other_pct"):
            assert (getattr(b, field) or 0.0) == pytest.approx(getattr(ref, field) or 0.0, abs=2.0)


def test_the_headline_is_the_busiest_compute_stream_and_the_ddp_trace_waits_on_its_host():
    (r,) = analyse_traces(TRACES / "a100_ddp2", hta_rounding=True).ranks
    b = r.idle_breakdown
    assert b is not None and b.stream == 7  # compute on 7; NCCL's all-reduces on 40
    assert b.host_wait_pct == pytest.approx(99.4, abs=0.1)
    assert b.causes[0].cause == "launch" and b.causes[0].category == "host_wait"


def test_an_item_call_is_named_with_its_operators():
    (r,) = analyse_traces(TRACES / "a100_stream_sync").ranks
    b = r.idle_breakdown
    assert b is not None
    sync = next(c for c in b.causes if c.cause == "sync")
    assert "aten::_local_scalar_dense" in sync.evidence and sync.idle_pct > 10


def test_the_compute_stream_of_the_two_rank_job_waits_on_its_collectives():
    for r in analyse_traces(TRACES / "two_ranks_sampled").ranks:
        b = r.idle_breakdown
        assert b is not None and b.other_pct is not None and b.other_pct > 50
        comm = next(c for c in b.causes if c.cause == "communication")
        assert comm.category == "other" and comm.idle_pct > 20 and "nccl" in comm.evidence


def test_a_constructed_wait_on_another_stream_and_a_sync_are_told_apart(tmp_path):
    """Stream 7 runs 0-10, waits for stream 9's all-reduce (10-40) though queued at 2, runs 40-50;
    then the host sits in cudaStreamSynchronize (52-80) inside aten::item, and launches at 81."""
    events = [
        step(1, 0, 200), step(2, 200, 10),
        launch(1, 1), kernel("gemm_kernel", 5, 10, 1),
        launch(2, 2), kernel("ncclKernel_AllReduce_RING", 15, 30, 2, stream=9),
        launch(3, 3), kernel("gemm_kernel", 45, 10, 3),
        {"ph": "X", "cat": "cpu_op", "name": "aten::item", "ts": 50, "dur": 32, "pid": 1, "tid": 1},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "ts": 52, "dur": 28, "pid": 1,
         "tid": 1, "args": {"correlation": 99}},
        launch(81, 4), kernel("gemm_kernel", 90, 10, 4),
    ]  # fmt: skip
    (r,) = analyse_traces(write_trace(tmp_path / "t.json", events)).ranks
    b = r.idle_breakdown
    assert b is not None and b.stream == 7
    s7 = next(s for s in b.streams if s.stream == 7)
    assert (s7.other_us, s7.host_wait_us, s7.kernel_wait_us) == (30.0, 35.0, 0.0)
    causes = {c.cause: c for c in b.causes}
    assert causes["communication"].idle_us == 30.0 and "ncclKernel_AllReduce_RING on stream 9" in causes[
        "communication"
    ].evidence
    assert causes["sync"].idle_us == 35.0 and causes["sync"].evidence == "cudaStreamSynchronize in aten::item"


def test_the_sync_rule_fires_on_the_trace_that_shows_it_and_on_no_other():
    fired = {}
    for name in sorted(REFERENCE):
        advice = advise_trace(analyse_traces(TRACES / name))
        fired[name] = any(rec.rule == "idle_sync" for rec in advice.recommendations)
    assert fired == {name: name == "a100_stream_sync" for name in fired}
    rec = idle_sync(analyse_traces(TRACES / "a100_stream_sync"))
    assert rec is not None
    assert rec.figures["sync_share_of_span_pct"] > 2 and "aten::_local_scalar_dense" in rec.figures["call"]
    assert "remove the sync in aten::_local_scalar_dense" in rec.actions[0]
