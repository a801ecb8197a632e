"""The published runs the plan is judged on (``benchmarks/plan_published.py``): the transcription of
llm-foundry's tables, which of them are judged, and the model traced for each."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

from autotune.demo.models import GPTConfig, TinyGPT

BENCHMARKS = Path(__file__).resolve().parents[3] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

from gpu_anchors import ANCHORS, FOUNDRY_RUNS, LLM_FOUNDRY, MPT, SCALING  # noqa: E402
from plan_published import judged_runs  # noqa: E402

ROWS = json.loads(FOUNDRY_RUNS.read_text())


def _rows() -> list[dict[str, object]]:
    return [dict(zip(ROWS["columns"], values, strict=True)) for values in ROWS["rows"]]


def test_every_transcribed_row_is_the_gpt_traced_for_it_to_the_parameter():
    """The GPT traced at each MPT shape (learned positions up to the run's sequence) has the
    parameter count the table prints, for all 216 rows: the shapes and the transcription agree."""
    rows = _rows()
    assert len(rows) == 216
    printed: dict[tuple[str, int], set[object]] = {}
    for row in rows:
        printed.setdefault((str(row["model"]), int(row["seq_len"])), set()).add(row["parameters"])
    for (shape, seq_len), counts in printed.items():
        d_model, layers, heads = MPT[shape]
        cfg = GPTConfig(vocab_size=50368, seq_len=seq_len, d_model=d_model, n_layers=layers, n_heads=heads)
        with torch.device("meta"):
            model = TinyGPT(cfg)
        assert counts == {sum(p.numel() for p in model.parameters())}, (shape, seq_len)


def test_the_judged_runs_are_every_row_on_the_planned_stack_but_the_fitted_ones():
    rows = _rows()

    def on_the_planned_stack(r: dict[str, object]) -> bool:
        bf16 = r["precision"] in ("amp_bf16", "bf16")
        return r["sharding"] == "FULL_SHARD" and bf16 and not r["activation_cpu_offload"]

    planned = [r for r in rows if on_the_planned_stack(r)]
    fitted = [a for a in (*ANCHORS, *SCALING) if a.source == LLM_FOUNDRY]
    judged = judged_runs()
    assert len(judged) == len(planned) - len(fitted) == 184
    keys = {(a.gpu, a.gpus, a.shape, a.seq_len, a.micro_batch, a.accumulation) for a in judged}
    for a in fitted:  # each fitted anchor is a row of the table, and is not judged
        assert (a.gpu, a.gpus, a.shape, a.seq_len, a.micro_batch, a.accumulation) not in keys
        published = (a.gpus, a.shape, a.seq_len, a.micro_batch, a.accumulation, a.tokens_per_s_per_gpu)
        columns = ("gpus", "model", "seq_len", "micro_batch", "accumulation", "tokens_per_s_per_gpu")
        assert any(tuple(r[c] for c in columns) == published for r in planned), a.name
    # A100 runs across nodes move data at the tables' 1600 Gbps per node of 8
    across = next(r for r in judged if r.gpu.startswith("A100") and r.nodes > 1)
    assert across.inter_node_gb_s == pytest.approx(25.0)
