"""Kineto's ``USDT:`` markers stay off what ``autotune profile`` and ``autotune demo`` print.

torch.profiler's engine prints one at each start and stop of a window, to the process's stderr;
a trial's log leaves them out of the error it quotes, and the deep window keeps them off the terminal
(:mod:`profilers.runtime.kineto_chatter`), the script's own lines on stderr kept in their order.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from profilers.runtime.kineto_chatter import is_kineto_chatter

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import os, sys
import torch
model = torch.nn.Linear(16, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for i in range(24):
    loss = model(torch.randn(8, 16)).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"script line {i}", file=sys.stderr, flush=True)
    os.write(2, f"raw line {i}\\n".encode())
"""


def _autotune(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "autotune", *args], capture_output=True, text=True, timeout=600, cwd=ROOT,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )  # fmt: skip


@pytest.mark.slow
def test_profile_prints_no_kineto_marker_and_every_line_of_the_script(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    out = _autotune("profile", "--run-dir", str(tmp_path / "run"), str(script))
    assert out.returncode == 0, out.stderr
    assert list((tmp_path / "run" / "traces").iterdir())  # the deep window ran
    lines = (out.stdout + out.stderr).splitlines()
    assert not [line for line in lines if "USDT:" in line]
    # the script's lines written while the window started or stopped come through, in order
    for kind in ("script line", "raw line"):
        assert [line for line in lines if line.startswith(kind)] == [f"{kind} {i}" for i in range(24)]


@pytest.mark.slow
def test_demo_prints_no_kineto_marker(tmp_path):
    out = _autotune("demo", "--model", "cnn", "--steps", "8", "--tune-trials", "0",
                    "--runs-root", str(tmp_path))  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "demo-cnn" in out.stdout + out.stderr
    assert "USDT:" not in out.stdout + out.stderr


def test_a_marker_is_told_from_a_line_of_the_script():
    marker = "USDT:2026-12-06 13:34:47 4034:4034 SyncActivityProfilerHandler.cpp:52] profiler_start"
    assert is_kineto_chatter(marker)
    assert not is_kineto_chatter("Traceback (most recent call last):")
    assert not is_kineto_chatter("  USDT: indented is not Kineto's")
