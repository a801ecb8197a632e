"""``autotune plan --format json`` is written as its record and reads back into the same record.

Real plans, as a user asks for them: the demo CNN calibrated on this CPU (its ``this-cpu`` rows,
the probe's costs, the held-out checks and the measured workspace) and a plain script's. Each JSON
must parse into ``PlanDocument`` and write back to the very same object, key order included.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from profilers.contract.json_checks import record_json
from profilers.contract.plan_doc import PlanDocument

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def _plan(*args: str) -> tuple[dict, str]:
    out = subprocess.run(
        [sys.executable, "-m", "autotune", "plan", "--format", "json", *args],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout), out.stderr


def _round_trips(data: dict) -> PlanDocument:
    doc = PlanDocument.parse(data, "plan.json")
    assert record_json(doc) == data
    assert list(record_json(doc)) == list(data) and list(record_json(doc.model)) == list(data["model"])
    return doc


@pytest.mark.slow
def test_a_calibrated_demo_plan_writes_back_what_it_read_and_keeps_kinetos_lines_off_the_terminal():
    data, stderr = _plan("--demo", "cnn", "--calibrate")
    assert "profiler_start" not in stderr and "USDT" not in stderr  # the workspace measurement's Kineto
    doc = _round_trips(data)
    assert not {"micro_batch", "accumulation", "script"} & set(data["model"])  # a demo has no script's batch
    cpu = doc.calibration.cpu
    assert cpu is not None and cpu.memory is not None and doc.cpu is not None
    assert len(cpu.held_out) == len(doc.cpu.held_out) >= 1  # timed configurations left out of the fit
    assert doc.cpu.held_out[0].predicted == cpu.held_out[0].predicted_s
    assert any(c.gpu == "this-cpu" for c in doc.configs)
    assert doc.suggestion is not None and doc.suggestion.config is not None
    assert doc.suggestion.config.params in {c.params for c in doc.configs}


def test_a_scripts_plan_writes_back_what_it_read():
    data, _ = _plan(str(SCRIPTS / "plan_rnn.py"), "--batch", "16")
    doc = _round_trips(data)
    assert doc.model.script is not None and doc.model.micro_batch == 16
    assert "demo" not in data["model"]  # a script's plan names its script, not a demo
    degrees = {(c.params.layout, c.params.degrees.dp) for c in doc.configs if c.gpus == 1}
    assert ("single", 1) in degrees
