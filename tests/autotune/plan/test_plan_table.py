"""``autotune plan``'s table in an 80-column terminal: every row on one line, nothing cut."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def _plan_at(columns: int, *args: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-m", "autotune", "plan", *args], capture_output=True, text=True, timeout=300,
        cwd=ROOT, env={**os.environ, "COLUMNS": str(columns), "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def _table(lines: list[str]) -> list[str]:
    """The table's lines: from below its title to the first line after it."""
    start = next(i for i, line in enumerate(lines) if line.startswith("Plan: "))
    after = ("In every row", "Left out", "Note", "Suggestion")
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith(after)), len(lines))
    return lines[start + 1 : end]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "kept"),
    [
        (["examples/train.py"], ["GPU", "micro-batch", "step", "samples/s"]),
        # 8 GPUs, a run to pay for: layouts tell the rows apart; the predictions give way first (the
        # 20 cheapest are fp32: the demo GPT is host-bound there, and autocast's casts are more ops)
        (["--demo", "gpt", "--gpus", "8", "--samples", "1000000", "--checkpointing"],
         ["GPU", "micro-batch", "ckpt", "layout", "samples/s", "$ for"]),
    ],
)  # fmt: skip
def test_the_plan_table_is_read_at_80_columns(args, kept):
    lines = _plan_at(80, *args)
    assert all(len(line) <= 80 for line in lines)
    table = _table(lines)
    assert not any("…" in line for line in table), "\n".join(table)
    rule = next(i for i, line in enumerate(table) if set(line.strip()) == {"─"})
    header, rows = "\n".join(table[:rule]), table[rule + 1 :]
    assert all(name in header for name in kept), header
    # --top's 20 configurations, each on one line: none is a wrapped cell's second line
    assert len(rows) == 20 and all(row[:1].isalnum() for row in rows), "\n".join(rows)
    # a column with one value in every row is said once; those left out are named
    assert any(line.startswith(("In every row:", "Left out at 80 columns:")) for line in lines), lines[-12:]
    wide = _plan_at(200, *args)
    assert not any(line.startswith("Left out") for line in wide)
    assert "interval" in "\n".join(_table(wide))
