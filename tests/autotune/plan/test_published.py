"""torch.compile and float8 planned at their published effect: estimates, marked, only where they apply."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torch import nn

from autotune.plan.plan import plan
from autotune.plan.published import EAGER, ratios
from autotune.report.plan_cells import HEADERS, config_cells
from profilers.contract.json_checks import record_json
from profilers.contract.plan_doc import PlanDocument
from tests.autotune.plan.workloads import adamw
from tests.autotune.report.conftest import autotune

WIDTH = 1024


def _stack() -> nn.Module:
    return nn.Sequential(*(nn.Linear(WIDTH, WIDTH) for _ in range(8)))


def _batch(m: int) -> tuple[tuple[torch.Tensor], torch.Tensor]:
    return (torch.randn(m, WIDTH),), torch.randn(m, WIDTH)


def _loss(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return (out.float() - target).square().mean()


def test_the_ratios_are_torchtitans_published_tables():
    # Llama 3.1 8B, FSDP, selective checkpointing: 8 GPUs (Table 1) and 128 (Table 3)
    compile_time = (5_762 / 6_667 + 5_605 / 6_514) / 2
    float8_time = (6_667 / 8_532 + 6_514 / 8_380) / 2
    assert ratios("compile") == pytest.approx((compile_time, (77.0 / 82.4 + 62.0 / 67.0) / 2))
    assert ratios("compile+float8")[0] == pytest.approx(compile_time * float8_time)
    assert ratios(EAGER) == (1.0, 1.0)
    with pytest.raises(ValueError, match="unknown optimization 'jit'"):
        plan(_stack, _batch, _loss, adamw, global_batch=8, gpus=("H100-SXM",), optimizations=("jit",))


def test_gpu_bound_rows_get_the_published_effect_and_float8_only_where_it_runs():
    everything = (EAGER, "compile", "compile+float8")
    result = plan(
        _stack, _batch, _loss, adamw, global_batch=65536, gpus=("H100-SXM", "A100-80GB"),
        precisions=("fp32", "bf16"), optimizations=everything,
    )  # fmt: skip
    by_key = {
        (
            c.gpu,
            c.params.layout,
            c.params.micro_batch,
            c.params.precision,
            c.params.optimizations,
        ): c
        for c in result.configs
    }
    estimated = [c for c in result.configs if c.params.optimizations != EAGER]
    assert estimated, "a stack of 1024² layers at 65,536 rows is bound by its GPU"
    for c in estimated:
        p = c.params
        eager = by_key[(c.gpu, p.layout, p.micro_batch, p.precision, EAGER)]
        time_ratio, memory_ratio = ratios(p.optimizations)
        assert eager.step_bound == "device"
        assert c.step_time_s == pytest.approx(eager.step_time_s * time_ratio)
        assert c.step_time_s_interval == pytest.approx(
            tuple(t * time_ratio for t in eager.step_time_s_interval)
        )
        assert c.samples_per_s == pytest.approx(eager.samples_per_s / time_ratio)
        assert c.usd_per_million_samples == pytest.approx(eager.usd_per_million_samples * time_ratio)
        assert c.peak_memory_bytes == round(eager.peak_memory_bytes * memory_ratio)
        assert c.memory_by_category["published_effect"] == c.peak_memory_bytes - eager.peak_memory_bytes < 0
        if "float8" in p.optimizations:  # fp8 tensor cores (Hopper, not Ampere) and bf16 rows only
            assert c.gpu == "H100-SXM" and p.precision == "bf16"
    assert {c.params.optimizations for c in estimated} == {"compile", "compile+float8"}
    # every GPU-bound eager row has its compile row; a host-bound one has none
    for c in result.configs:
        if c.params.optimizations == EAGER:
            p = c.params
            twin = (c.gpu, p.layout, p.micro_batch, p.precision, "compile")
            assert (twin in by_key) == (c.step_bound == "device"), twin
    note = next(n for n in result.notes if n.startswith("ESTIMATES, not traces"))
    assert "compile: step time × 0.862" in note and "llama3_h100_202412_torchtitan.md" in note
    assert "2024-12-23" in note
    doc = PlanDocument.parse(json.loads(json.dumps(record_json(result))))
    layout_col = HEADERS.index("layout")
    cells = {config_cells(c)[layout_col] for c in doc.configs}
    assert "single compile+float8" in cells and "single" in cells


def test_a_host_bound_plan_says_no_row_was_estimated():
    result = plan(
        _stack, _batch, _loss, adamw, global_batch=4, gpus=("H100-SXM",), precisions=("bf16",),
        optimizations=(EAGER, "compile"),
    )  # fmt: skip
    assert {c.params.optimizations for c in result.configs} == {EAGER}
    assert all(c.step_bound == "host" for c in result.configs)
    assert any(n.startswith("compile: no row estimated") for n in result.notes)


def test_the_command_line_plans_a_script_with_compile_and_float8_as_estimates():
    script = Path(__file__).resolve().parents[2] / "scripts" / "plan_lm.py"
    out = autotune(
        "plan", "--gpu", "H100-SXM", "--gpu", "A100-80GB", "--precision", "bf16", "--compile", "--float8",
        "--format", "json", str(script), "--width", "1024", "--layers", "4", "--seq", "1024", "--batch", "8",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    doc = PlanDocument.parse(json.loads(out.stdout))
    kinds = {(c.gpu, c.params.optimizations) for c in doc.configs}
    # a 1024-wide GPT at 8 × 1024 tokens keeps an H100 or an A100 busy longer than its host
    assert kinds == {
        ("H100-SXM", EAGER), ("H100-SXM", "compile"), ("H100-SXM", "compile+float8"),
        ("A100-80GB", EAGER), ("A100-80GB", "compile"),  # no fp8 tensor cores on an A100
    }  # fmt: skip
    assert doc.suggestion_text is not None and "(estimate)" in doc.suggestion_text
    assert any(n.startswith("ESTIMATES, not traces") for n in doc.notes)
