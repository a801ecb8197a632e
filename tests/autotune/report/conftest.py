"""Real runs the report tests read: one profile run and one small tuning study, made once per session."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.made_once import made_once

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
UNMODIFIED = str(SCRIPTS / "train_unmodified.py")
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}
BATCH_SPACE = """
[space.batch_size]
type = "int"
low = 8
high = 128
power_of_two = true
arg = "--batch-size={value}"
"""
#: The study's price per GPU-hour (its objective is cost).
STUDY_PRICE = 2.5


def autotune(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run the real ``autotune`` command line."""
    return subprocess.run(
        [sys.executable, "-m", "autotune", *args], capture_output=True, text=True, env=ENV, timeout=timeout
    )


@pytest.fixture(scope="session")
def profile_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished CPU profile of an unmodified script (400 steps), made once for every worker."""

    def make(root: Path) -> None:
        out = autotune("profile", "--run-dir", str(root / "profile"), "--quiet", UNMODIFIED, "--steps", "400")
        assert out.returncode == 0, out.stderr

    return made_once(tmp_path_factory, "report-profile", make) / "profile"


@pytest.fixture(scope="session")
def study_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished 4-trial grid study of the script's --batch-size with the cost objective.

    Its best is re-measured against the baseline in one round (the verdict's interval is tested on
    studies of its own, tests/autotune/tuner/test_confirm.py). Made once for every worker.
    """
    return made_once(tmp_path_factory, "report-study", _make_study) / "study"


def _make_study(root: Path) -> None:
    space = root / "space.toml"
    space.write_text(BATCH_SPACE)
    run_dir = root / "study"
    out = autotune(
        "tune",
        "--space",
        str(space),
        "--trials",
        "4",
        "--searcher",
        "grid",
        "--run-dir",
        str(run_dir),
        "--objective",
        "cost",
        "--price-per-gpu-hour",
        str(STUDY_PRICE),
        "--quiet",
        "--trial-steps",
        "12",
        "--warmup-steps",
        "2",
        "--min-measured-steps",
        "5",
        "--confirm-rounds",
        "1",
        UNMODIFIED,
    )
    assert out.returncode == 0, out.stderr
