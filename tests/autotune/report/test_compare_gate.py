"""``autotune compare A B --fail-if-slower PCT``: the CI gate, on real profiled runs and constructed figures.

The real runs train tests/scripts/gate_step.py, whose step is mostly a wait (as a GPU step is for
its host), and its copy with an injected slowdown: a sleep of 20% of each step's own length. The
margins: B / A is then at most 1 / 1.2 = 0.83 (a busy CPU stretches both runs' host part alike,
seen 0.74-0.85 here beside two busy loops), and the gate's interval spreads a factor of about
exp(1.96 * sqrt(2 * 0.045**2 + both runs' own variance)) = 1.14 to 1.2 either side of it, so its
upper end lies below 1 (``--fail-if-slower 0``) with about 0.05 to spare in the log; two
identical runs sit at 1 +- 13% (the between-process spread) and so never fail, loads alike or not.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from autotune.compare import Side, compare
from autotune.compare_gate import BETWEEN_PROCESS_LOG_SD, MIN_MEASURED_STEPS, decide, parse_pct, weigh
from profilers.contract.load import MIN_LOAD_READINGS, LoadProfile, load_profile
from tests.autotune.report.conftest import autotune
from tests.hogs import busy_loops
from tests.profile_run import profile_script

GATE_STEP = Path(__file__).resolve().parents[2] / "scripts" / "gate_step.py"
#: 150 steps of about 21 ms: some 140 measured steps and 30 load readings (10 Hz), several times the minimums.
STEPS = ("--steps", "150", "--wait-ms", "20")


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


@pytest.fixture(scope="module")
def slowed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A, and B: the same script with a sleep of 20% of each step added, one after the other."""
    root = tmp_path_factory.mktemp("gate")
    a = profile_script(root / "a", GATE_STEP, *STEPS)
    b = profile_script(root / "b", GATE_STEP, *STEPS, "--slower-pct", "20")
    return a, b


def _gate(*args: str) -> tuple[int, dict]:
    out = autotune("compare", *args, "--format", "json")
    assert out.returncode in (0, 1, 3), out.stderr
    gate = json.loads(out.stdout)["gate"]
    assert gate["exit_code"] == out.returncode
    return out.returncode, gate


def _load_unknown_or_unlike(gate: dict) -> bool:
    """Whether the gate was undecided because of the load (the machine saturated, or loads unlike)."""
    evidence = gate["evidence"]
    return gate["outcome"] == "undecided" and evidence["problem"] == evidence["loads"]["problem"] is not None


@pytest.mark.slow
def test_an_injected_slowdown_fails_the_gate(slowed):
    """Exit 1, unless the machine's load kept the gate from deciding (then 3, naming the load).

    The load can: beside busy loops that leave no idle CPU (two on this 2-core machine) the readings
    cannot tell how many processes competed, and the gate is undecided rather than risk failing a
    build for nothing (test_identical_runs_one_beside_a_busy_process_never_fail). Never 0.
    """
    a, b = slowed
    code, gate = _gate(str(a), str(b), "--fail-if-slower", "0")
    if code == 3:
        assert _load_unknown_or_unlike(gate), gate["reason"]
        assert gate["ratio"] < 1, gate["reason"]  # undecided, but still measured slower
        return
    assert code == 1, gate["reason"]
    assert gate["reason"].startswith("B / A throughput 0.") and "under alike loads" in gate["reason"]
    out = autotune("compare", str(a), str(b), "--fail-if-slower", "0")
    assert out.returncode == 1
    assert out.stdout.strip().splitlines()[-1] == f"gate: fail (exit 1): {gate['reason']}"
    assert "lies wholly below 1: beyond the noise" in " ".join(out.stdout.split())  # the verdict agrees
    # a threshold beyond the slowdown (B / A about 0.8, well above 0.5) passes it
    assert _gate(str(a), str(b), "--fail-if-slower", "50%")[0] == 0
    # the other way round B is the faster: never a failure
    assert _gate(str(b), str(a), "--fail-if-slower", "0")[0] == 0


@pytest.mark.slow
def test_the_decision_is_in_the_json(slowed):
    a, b = slowed
    out = autotune("compare", str(a), str(b), "--fail-if-slower", "0", "--format", "json")
    assert out.returncode in (1, 3), out.stderr
    data = json.loads(out.stdout)
    gate = data["gate"]
    outcome = "fail" if out.returncode == 1 else "undecided"
    assert (gate["outcome"], gate["exit_code"], gate["fail_if_slower_pct"], gate["floor_ratio"]) == (
        outcome, out.returncode, 0, 1)  # fmt: skip
    low, high = gate["ratio_ci95"]
    assert low < gate["ratio"] < high
    assert (high < gate["floor_ratio"]) is (outcome == "fail") or _load_unknown_or_unlike(gate)
    throughput = next(f for f in data["figures"] if f["what"] == "throughput")
    assert gate["ratio"] == pytest.approx(throughput["b"] / throughput["a"])
    evidence = gate["evidence"]
    assert evidence == data["evidence"] and evidence["between_process_log_sd"] == BETWEEN_PROCESS_LOG_SD
    loads = evidence["loads"]
    assert loads["alike"] is (loads["problem"] is None) is (outcome == "fail")
    assert min(loads["a"]["readings"], loads["b"]["readings"]) >= MIN_LOAD_READINGS
    assert "\n" not in gate["reason"]
    plain = json.loads(autotune("compare", str(a), str(b), "--format", "json").stdout)
    assert plain["gate"] is None and plain["evidence"] == evidence  # no gate asked: no decision, exit 0


@pytest.mark.slow
def test_identical_runs_one_beside_a_busy_process_never_fail(tmp_path):
    """The same script twice, the second beside a busy loop: exit 0, or 3 naming the load; never 1.

    Under the strictest threshold (0%): a slowdown the load caused is never called the code's.
    """
    quiet = profile_script(tmp_path / "quiet", GATE_STEP, *STEPS)
    with busy_loops(1):
        busy = profile_script(tmp_path / "busy", GATE_STEP, *STEPS)
    out = autotune("compare", str(quiet), str(busy), "--fail-if-slower", "0", "--format", "json")
    assert out.returncode in (0, 3), json.dumps(json.loads(out.stdout)["gate"])
    gate = json.loads(out.stdout)["gate"]
    assert gate["exit_code"] == out.returncode
    if out.returncode == 3:
        assert "load" in gate["reason"], gate["reason"]
    text = autotune("compare", str(quiet), str(busy), "--fail-if-slower", "0")
    assert text.returncode == out.returncode
    assert (
        text.stdout.strip().splitlines()[-1]
        == f"gate: {gate['outcome']} (exit {out.returncode}): {gate['reason']}"
    )


@pytest.mark.slow
def test_a_run_compared_with_itself_is_the_same_run(slowed, tmp_path):
    """By one path, by a path through '..', and through a symbolic link: one line, exit 0."""
    a, _ = slowed
    link = tmp_path / "link"
    link.symlink_to(a, target_is_directory=True)
    for other in (a, a / ".." / a.name, link):
        out = autotune("compare", str(a), str(other), "--fail-if-slower", "5")
        assert out.returncode == 0, out.stderr
        assert out.stdout == f"gate: pass (exit 0): A and B are the same run ({a.resolve()})\n"
    plain = autotune("compare", str(a), str(a))
    assert plain.returncode == 0 and plain.stdout == f"A and B are the same run ({a.resolve()})\n"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("-5", "expected a percentage from 0 to below 100, got '-5'"),
        ("abc", "expected a percentage such as 5 or 5%, got 'abc'"),
        ("100", "expected a percentage from 0 to below 100, got '100'"),
        ("nan", "expected a percentage from 0 to below 100, got 'nan'"),
    ],
)
def test_a_bad_threshold_is_one_line_and_exit_2(tmp_path, value, message):
    out = autotune("compare", str(tmp_path), str(tmp_path), f"--fail-if-slower={value}")
    assert out.returncode == 2, out.stderr
    assert (
        message in out.stderr and len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr
    )


def test_a_threshold_is_a_percentage():
    assert parse_pct("5") == parse_pct("5%") == parse_pct(" 5 % ") == 5.0
    assert parse_pct("0") == 0.0 and parse_pct("2.5%") == 2.5
    for bad in ("-1", "100%", "inf", "", "%", "5%%", "five"):
        with pytest.raises(ValueError):
            parse_pct(bad)


# -- the decision on constructed figures -----------------------------------------------------------
def _steady(others: float, own: float = 1.0, readings: int = 20) -> LoadProfile:
    return load_profile([others] * readings, [own] * readings, 2)


def _side(
    rate: float, half_pct: float = 2.0, steps: int = 100, load: LoadProfile | None = None, **kw
) -> Side:
    """A profile run at ``rate`` samples/s with a 95% interval of +-``half_pct`` %."""
    ci = (rate * (1 - half_pct / 100), rate * (1 + half_pct / 100))
    load = load if load is not None else _steady(0.0)
    return Side(kw.pop("label", "run"), "profile", 16 / rate, 15 / rate, 17 / rate, steps, samples_per_s=rate,
                samples_per_s_ci95=ci, load_profile=load, **kw)  # fmt: skip


def test_an_interval_wholly_below_the_threshold_fails():
    ev = weigh(_side(1000), _side(700))
    assert ev.problem is None and ev.ratio == pytest.approx(0.7)
    assert ev.ratio_ci95 is not None and ev.ratio_ci95[1] < 0.95
    gate = decide(ev, 5)
    assert (gate.outcome, gate.exit_code) == ("fail", 1) and "under alike loads" in gate.reason


def test_the_between_process_spread_widens_the_interval():
    """Each run's own interval is +-1%; the two processes' spread (0.045 in the log, each) makes it
    about +-13%: a 10% slowdown that each run's interval alone would call certain is not failed."""
    ev = weigh(_side(1000, 1.0), _side(900, 1.0))
    assert ev.ratio_ci95 is not None
    low, high = ev.ratio_ci95
    assert high / 0.9 == pytest.approx(0.9 / low) and 1.12 < high / 0.9 < 1.15
    assert decide(ev, 5).outcome == "pass"  # 0.9 is below 0.95, but not the whole interval


def test_within_the_threshold_passes():
    gate = decide(weigh(_side(1000), _side(990)), 5)
    assert (gate.outcome, gate.exit_code) == ("pass", 0) and "not shown below the 0.95×" in gate.reason
    faster = decide(weigh(_side(1000), _side(1500)), 5)
    assert faster.outcome == "pass" and "above the 0.95×" in faster.reason


def test_loads_that_differ_are_undecided():
    gate = decide(weigh(_side(1000), _side(500, load=_steady(1.5))), 5)
    assert (gate.outcome, gate.exit_code) == ("undecided", 3)
    assert gate.reason.startswith("loads differ: other processes took 0.0 cores on average during A and 1.5")


def test_the_same_mean_load_in_bursts_is_a_different_load():
    """The issue's case: 1.0 and 1.0 cores of other processes on average, one steady, the other in
    bursts of both cores (the run without a core half the time): undecided, and the verdict claims
    nothing beyond the noise for a 2.68x difference."""
    steady = _steady(1.0)
    bursts = load_profile([0.0, 2.0] * 10, [1.0, 0.0] * 10, 2)
    assert steady.mean_cores == bursts.mean_cores == 1.0
    a, b = _side(1000, load=steady), _side(1000 / 2.68, load=bursts)
    c = compare(a, b, 5)
    assert c.gate is not None and (c.gate.outcome, c.gate.exit_code) == ("undecided", 3)
    assert c.gate.reason.startswith(
        "loads differ burst by burst: other processes' p90 1.0 cores during A and 2.0"
    )
    assert "so no claim is made beyond the noise" in c.verdict
    assert "lies wholly" not in c.verdict and "do not overlap" not in c.verdict


def test_runs_on_a_machine_without_idle_cpu_are_undecided():
    """Other processes at 1.3 and 1.6 of 2 cores, the run taking the rest: how many competed is
    unknown (identical runs then differed 2.9x). A run filling the machine alone is not contended."""
    gate = decide(weigh(_side(1000, load=_steady(1.3, 0.7)), _side(500, load=_steady(1.6, 0.4))), 5)
    assert gate.outcome == "undecided" and gate.reason.startswith(
        "loads unknown: the machine had no idle CPU"
    )
    assert "in 100% of A's window and 100% of B's" in gate.reason
    alone = _steady(0.1, 1.9)
    assert (
        alone.contended_share == 0
        and decide(weigh(_side(1000, load=alone), _side(500, load=alone)), 5).exit_code == 1
    )


def test_too_few_steps_or_readings_are_undecided():
    few = MIN_MEASURED_STEPS - 1
    gate = decide(weigh(_side(1000), _side(500, steps=few)), 5)
    assert gate.outcome == "undecided"
    assert gate.reason.startswith(f"too few measured steps (B {few}; {MIN_MEASURED_STEPS} needed)")
    sparse = _steady(0.0, readings=MIN_LOAD_READINGS - 1)
    assert decide(weigh(_side(1000), _side(500, load=sparse)), 5).reason.startswith("too few load readings")


def test_a_trace_or_an_unrecorded_load_is_undecided():
    trace = Side("t", "trace", 0.01, 0.009, 0.011, 10)
    gate = decide(weigh(trace, _side(500)), 5)
    assert gate.outcome == "undecided" and gate.ratio is None
    assert gate.reason == "A is a trace, with no throughput (profile the script with autotune profile)"
    unrecorded = Side(
        "b", "profile", 0.02, 0.019, 0.021, 100, samples_per_s=500.0, samples_per_s_ci95=(490.0, 510.0)
    )
    gate = decide(weigh(_side(1000), unrecorded), 5)
    assert gate.outcome == "undecided" and "load during B was not recorded" in gate.reason


def test_one_source_is_the_same_run():
    gate = decide(weigh(_side(1000, source="/runs/x"), _side(1000, source="/runs/x")), 5)
    assert (gate.outcome, gate.exit_code, gate.reason) == ("pass", 0, "A and B are the same run (/runs/x)")
