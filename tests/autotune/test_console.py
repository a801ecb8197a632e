"""The display-row builder of the terminal summary, checked on hand-made summaries."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

from autotune.console import (
    BAR_WIDTH,
    NA,
    bar,
    build_summary_view,
    format_bytes,
    format_seconds,
    format_si,
    render_summary,
)
from profilers.contract.json_checks import SummaryError

SUMMARY = {
    "schema": 1,
    "name": "demo-gpt",
    "steps": 30,
    "measured_steps": 23,
    "step_time_s": {"median": 0.0324, "p10": 0.0301, "p90": 0.0352},
    "throughput": {"samples_per_s": 493.8, "tokens_per_s": 31603.2},
    "phases": {"data": 0.05, "forward": 0.30, "backward": 0.45, "optimizer": 0.15, "other": 0.05},
    "peak_memory_bytes": 3 * 1024**3 // 2,  # 1.5 GiB
    "memory": {},
    "flops_per_step": 2.5e9,
    "mfu": 0.123,
    "precision": "bf16",
    "device": {"kind": "cuda", "name": "NVIDIA H100", "count": 1},
    "gpu": [
        {
            "index": 0,
            "name": "NVIDIA H100",
            "util_pct": {"mean": 87.4, "p50": 90.0},
            "power_w_mean": 450.0,
            "energy_j": 1234.0,
            "mem_used_bytes_max": 2 * 1024**3,
            "temperature_c_max": None,
            "throttle_reasons": [],
        },
        {
            "index": 1,
            "name": None,
            "util_pct": None,
            "power_w_mean": None,
            "energy_j": None,
            "temperature_c_max": 71.0,
            "throttle_reasons": ["sw_power_cap"],
        },
    ],
    "host": {"cpu_util_pct_mean": 55.2, "rss_peak_bytes": 512 * 1024**2},
    "ranks": None,
    "top_ops": [
        {
            "name": "aten::addmm",
            "device": "cuda",
            "calls": 10,
            "self_time_us": 1500.0,
            "total_time_us": 2000.0,
            "flops": 1,
        },
        {
            "name": "aten::mm",
            "device": "cuda",
            "calls": 10,
            "self_time_us": 4000.0,
            "total_time_us": 4000.0,
            "flops": 1,
        },
        {
            "name": "aten::[weird]",
            "device": "cpu",
            "calls": 1,
            "self_time_us": 20.0,
            "total_time_us": 20.0,
            "flops": None,
        },
        {
            "name": "aten::gelu",
            "device": "cuda",
            "calls": 2,
            "self_time_us": 900.0,
            "total_time_us": 900.0,
            "flops": None,
        },
    ],
    "trace_files": ["traces/rank0.json"],
    "wall_time_s": 12.345,
    "warnings": ["no NVML: GPU metrics unavailable"],
}


def metrics(view):
    return dict(view.metrics)


def test_full_summary_rows():
    view = build_summary_view(SUMMARY, run_dir="/tmp/runs/demo-gpt")
    m = metrics(view)
    assert view.title == "autotune profile: demo-gpt"
    assert m["Steps"] == "30 (23 measured)"
    assert m["Step time (median)"] == "32.4 ms (p10–p90 30.1 ms – 35.2 ms)"
    assert m["Throughput"] == "494 samples/s · 31,603 tokens/s"
    assert m["Peak memory"] == "1.5 GiB"
    assert m["FLOPs / step"] == "2.50 GFLOP"
    assert m["MFU"] == "12.3%"
    assert m["Precision"] == "bf16"
    assert m["Device"] == "cuda (NVIDIA H100)"
    assert m["Host"] == "CPU util 55% mean · RSS peak 512.0 MiB"
    assert m["Wall time"] == "12.35 s"
    assert view.run_dir == "/tmp/runs/demo-gpt"
    assert view.warnings == ("no NVML: GPU metrics unavailable",)


def test_phases_percentages_and_bars():
    view = build_summary_view(SUMMARY)
    phases = {p.name: p for p in view.phases}
    assert [p.name for p in view.phases] == ["data", "forward", "backward", "optimizer", "other"]
    assert phases["backward"].pct == "45.0%"
    assert phases["data"].pct == "5.0%"
    assert len(phases["backward"].bar) == 9  # 0.45 * 20 = 9 cells
    assert phases["backward"].bar == "█" * 9
    assert "Most of the step is backward (45.0%)" in view.where


def test_top_ops_sorted_by_self_time_top3():
    view = build_summary_view(SUMMARY)
    assert [op.name for op in view.top_ops] == ["aten::mm", "aten::addmm", "aten::gelu"]
    assert view.top_ops[0].self_time == "4.0 ms"
    assert "aten::mm 4.0 ms (cuda)" in view.where


def test_peak_memory_says_what_was_measured():
    cuda = dict(SUMMARY, memory={"cuda_peak_allocated_bytes": 1, "cuda_peak_reserved_bytes": 2 * 1024**3})
    assert metrics(build_summary_view(cuda))["Peak memory"] == "1.5 GiB CUDA allocated (2.0 GiB reserved)"
    cpu = dict(SUMMARY, memory={"rss_peak_growth_bytes": 5, "cuda_peak_allocated_bytes": None})
    assert metrics(build_summary_view(cpu))["Peak memory"] == "1.5 GiB host RSS growth"
    assert metrics(build_summary_view(dict(SUMMARY, peak_memory_bytes=None)))["Peak memory"] == NA


def test_gpu_row_units():
    first, second = build_summary_view(SUMMARY).gpus
    assert first.label == "GPU 0 NVIDIA H100"
    assert first.value == "util 87% · power 450 W · energy 1.23 kJ · mem peak 2.0 GiB"
    assert second.label == "GPU 1"
    assert second.value == "util n/a · power n/a · energy n/a · 71 °C max · throttled: sw_power_cap"


@pytest.mark.parametrize(
    "summary",
    [
        {},
        {k: None for k in SUMMARY},
        {"step_time_s": {"median": None}, "throughput": {}, "phases": {"data": None}, "gpu": []},
        {"top_ops": None, "warnings": None, "device": None, "host": None},
    ],
)
def test_missing_and_none_values_show_na(summary):
    view = build_summary_view(summary)
    m = metrics(view)
    assert m["Step time (median)"] == NA
    assert m["Throughput"] == NA
    assert m["Peak memory"] == NA
    assert m["FLOPs / step"] == NA
    assert m["MFU"] == "n/a — device peak unknown"
    assert m["Steps"] == NA
    assert all(p.pct == NA and p.bar == "" for p in view.phases)
    assert view.top_ops == ()
    assert view.gpus == ()
    assert view.run_dir == NA
    assert "n/a" in view.where


@pytest.mark.parametrize(
    ("summary", "named"),
    [
        ({"top_ops": "garbage"}, "top_ops must be a list or null"),
        ({"device": "cpu"}, "device must be an object or null"),
        ({"host": 3}, "host must be an object"),
        ({"gpu": [None]}, "a GPU entry must be an object"),
        ({"loss": {"first": "low"}}, "loss: 'first' must be a number"),
    ],
)
def test_a_figure_of_the_wrong_type_is_one_error_naming_it(summary, named):
    with pytest.raises(SummaryError, match=re.escape(named)):
        build_summary_view(summary)


def test_cpu_summary_without_tokens_or_mfu():
    summary = dict(
        SUMMARY,
        mfu=None,
        gpu=None,
        device={"kind": "cpu", "name": "x86_64", "count": 1},
        throughput={"samples_per_s": 3.14159, "tokens_per_s": None},
    )
    m = metrics(build_summary_view(summary))
    assert m["Throughput"] == "3.14 samples/s"
    assert m["MFU"] == "n/a — device peak unknown"
    assert m["Device"] == "cpu (x86_64)"


@pytest.mark.parametrize(
    ("value", "text"),
    [(0, "0 B"), (1023, "1023 B"), (1536, "1.5 KiB"), (5 * 1024**2, "5.0 MiB"), (None, NA), ("7", NA)],
)
def test_format_bytes(value, text):
    assert format_bytes(value) == text


def test_format_si_and_seconds():
    assert format_si(999, "FLOP") == "999 FLOP"
    assert format_si(1.5e12, "FLOP") == "1.50 TFLOP"
    assert format_seconds(2.5e-4) == "250 µs"
    assert format_seconds(0.5) == "500.0 ms"
    assert format_seconds(None) == NA


def test_bar_clamps_and_uses_eighths():
    assert bar(None) == ""
    assert bar(0.0) == ""
    assert bar(1.5) == "█" * BAR_WIDTH
    assert bar(-1.0) == ""
    assert bar(1 / 160) == "▏"  # one eighth of one cell at width 20


def test_render_draws_without_error_and_escapes_markup():
    out = io.StringIO()
    render_summary(SUMMARY, Console(file=out, width=120, color_system=None), run_dir="/tmp/r")
    text = out.getvalue()
    assert "autotune profile: demo-gpt" in text
    assert "aten::[weird]" not in text  # not in the top 3
    out = io.StringIO()
    ops = [{"name": "[bold]op[/bold]", "device": "cpu", "self_time_us": 5.0}]
    render_summary({"top_ops": ops}, Console(file=out, width=200, color_system=None))
    assert "[bold]op[/bold]" in out.getvalue()  # names are text, not rich markup
    assert "Run directory: /tmp/r" in text
    assert "warning: no NVML" in text
    render_summary({}, Console(file=io.StringIO()))


def test_loss_and_why_the_run_stopped():
    loss = {"first": 2.3026, "last": 1.125, "non_finite_steps": 0, "first_non_finite_step": None}
    rows = metrics(build_summary_view(dict(SUMMARY, loss=loss, stop_reason="stable")))
    assert rows["Loss"] == "2.303 → 1.125"
    assert rows["Steps"].endswith(", stopped once the step time was stable")
    nan = {"first": 2.3026, "last": None, "non_finite_steps": 4, "first_non_finite_step": 7}
    rows = metrics(build_summary_view(dict(SUMMARY, loss=nan, stop_reason="non_finite_loss")))
    assert rows["Loss"] == "n/a · 4 NaN/inf steps from step 7"
    assert rows["Steps"].endswith(", stopped at a NaN/inf loss")
    assert metrics(build_summary_view(dict(SUMMARY, loss=None)))["Loss"] == NA


def test_the_machines_load_is_one_line_everywhere():
    """The terminal's row and the report's overview say the same line (the dashboard's: tests/tui)."""
    from pathlib import Path

    from autotune.report.build import overview_section
    from profilers.contract.load import load_line, load_of
    from profilers.contract.rundir import RunData

    load = {"machine_cores": 2, "busy_cores": 2.0, "own_cores": 0.4, "other_cores": 1.6}
    loaded = {**SUMMARY, "load": load}
    line = load_line(load_of(loaded))
    assert line == (
        "other processes busy on 1.6 of 2 cores during the measured steps: "
        "its figures are slower than this machine gives when quiet"
    )
    assert metrics(build_summary_view(loaded))["Machine load"] == line
    assert overview_section(RunData(Path("run"), "profile", loaded), ()).load == line
    assert metrics(build_summary_view(SUMMARY))["Machine load"] == "n/a (not recorded)"
    assert overview_section(RunData(Path("run"), "profile", SUMMARY), ()).load is None


def test_a_summary_it_cannot_read_is_one_line_at_the_end_of_a_run():
    out = io.StringIO()
    render_summary({"throughput": {"samples_per_s": "fast"}}, Console(file=out, width=200))
    assert out.getvalue().strip().splitlines() == [
        "autotune: cannot show this run's summary (summary.json: throughput: 'samples_per_s' must be a "
        "number or null, not 'fast')"
    ]


def test_a_throughput_interval_open_at_the_top_is_read():
    """summarize.rate_interval leaves the upper end None when the mean step's interval reaches 0 (seen
    at the end of a crashed run's few steps)."""
    throughput = {"samples_per_s": 2280.7, "samples_per_s_ci95": [2280.7, None]}
    view = build_summary_view(dict(SUMMARY, throughput=throughput))
    assert metrics(view)["Throughput"] == "2,281 samples/s"
