"""Device-time a study saves by stopping losing trials early: the demo study with and without it.

The demo's study (the demo GPT's micro-batch × precision × layout, :mod:`autotune.demo.tuning`) runs
twice on this machine, one after the other, over the same configurations (the grid searcher with
one seed, no plan prior, the baseline's configuration run again before every second trial so the
spread between processes is known early): once with early stopping (``--early-stop 0.5``, the
default) and once without (``0``). For each, from the study's own bill (profilers.contract.study.bill):
the trials' device-time, how many stopped early and on which rule, and the best configuration; then
the saving, and for each configuration stopped early in the first study its time there against its
time in the second (the saving where it happened, beside the machine's drift elsewhere).

Run from the repository root::

    python benchmarks/early_stop.py [--trials 10] [--model gpt]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from autotune.demo.target import demo_space
from autotune.demo.tuning import BASELINE_MICRO_BATCH, TRIAL_STEPS
from autotune.tuner.config import TuneConfig
from autotune.tuner.trials import TrialSettings
from autotune.tuner.tune import Tuner


def study(root: Path, name: str, trials: int, model: str, early_stop: float) -> dict:
    """Run one demo study; its summary.json."""
    settings = TrialSettings(
        script="autotune.demo.target",
        module=True,
        script_args=("--model", model, "--device", "cpu", "--micro-batch", str(BASELINE_MICRO_BATCH)),
        max_steps=TRIAL_STEPS,
        warmup_steps=2,
        timeout_s=300.0,
        distributed_world_size=2,
        stable_within=0.05,
        min_measured_steps=4,
    )
    config = TuneConfig(
        settings=settings,
        space=demo_space(model, device="cpu", world_size=2),
        n_trials=trials,
        searcher="grid",
        seed=0,
        device_kind="cpu",
        confirm_rounds=0,
        plan_prior=False,
        anchor_every=2,
        early_stop_ratio=early_stop,
    )
    run_dir = root / name
    Tuner(config, run_dir).run()
    return json.loads((run_dir / "summary.json").read_text())


def key(entry: dict) -> str:
    return json.dumps(entry["params"], sort_keys=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--model", default="gpt")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        on = study(Path(tmp), "early-stop", args.trials, args.model, 0.5)
        off = study(Path(tmp), "no-early-stop", args.trials, args.model, 0.0)
    print(f"demo {args.model} study on the CPU, {args.trials} trials, grid seed 0, anchors every 2 trials")
    print(f"{'study':<16}{'trial device-s':>16}{'stopped early':>15}{'best':>40}")
    for name, s in (("early stop", on), ("no early stop", off)):
        stopped = [t for t in s["trials"] if t["stop_reason"] == "below_threshold"]
        rules = ", ".join(sorted({str(t["stop_rule"]) for t in stopped})) or "-"
        best = key(s["best"]) if s["best"] else "-"
        print(
            f"{name:<16}{3600 * s['bill']['trials_device_hours']:>16.0f}{len(stopped):>9} ({rules}){best:>40}"
        )
    saved = 1 - on["bill"]["trials_device_hours"] / off["bill"]["trials_device_hours"]
    print(f"trials' device-time saved: {saved:.1%} (the whole studies', machine drift included)")
    other = {key(t): t for t in off["trials"]}
    for t in on["trials"]:
        if t["stop_reason"] == "below_threshold" and key(t) in other:
            full = other[key(t)]
            stopped_s, whole_s = 3600 * t["device_hours"], 3600 * full["device_hours"]
            print(f"  {key(t)}: {t['duration_s']:.1f} s stopped ({t['stop_rule']})", end="")
            print(f" against {full['duration_s']:.1f} s run whole ({full['stop_reason']}),", end="")
            print(f" {stopped_s:.0f} against {whole_s:.0f} device-s")


if __name__ == "__main__":
    main()
