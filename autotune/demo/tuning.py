"""The demo's tuning phase: a short study of the demo GPT's micro-batch × precision × layout.

Trials run :mod:`autotune.demo.target` (the demo model trained through ``autotune.prepare`` and
``autotune.batch_plan``) in their own processes, ddp and fsdp over two ranks through torchrun
(gloo on the CPU; on CUDA only when two GPUs are visible). The baseline is the team's
configuration today: micro-batches of 2 with 8 accumulation steps (of the global batch of 16),
fp32, one device.
"""

from __future__ import annotations

import time
from pathlib import Path

from rich.console import Console

from autotune.demo.target import demo_space
from autotune.search.registry import DEFAULT_SEARCHER
from autotune.tuner.config import TuneConfig
from autotune.tuner.progress import Progress
from autotune.tuner.trials import TrialSettings
from autotune.tuner.tune import TuneError
from profilers.contract.study.summary import TuningSummary

#: Trials of the demo study, the baseline included.
DEFAULT_TRIALS = 12
#: Steps in one trial at most (warm-up included); most trials stop earlier, once stable.
TRIAL_STEPS = 16
#: The baseline's micro-batch: the demo plays a team that runs micro-batches of 2 with 8
#: accumulation steps, a setting carried over from a smaller device, and asks what this one wants.
BASELINE_MICRO_BATCH = 2


def tune_demo(
    console: Console,
    device: str,
    n_trials: int,
    runs_root: Path | None,
    model: str = "gpt",
    confirm_rounds: int = 3,
) -> TuningSummary | None:
    """Run the demo study; its summary (None when it stopped without a best configuration)."""
    ranks = 2 if device == "cpu" or _cuda_devices() >= 2 else 1
    settings = TrialSettings(
        script="autotune.demo.target",
        module=True,
        script_args=("--model", model, "--device", device, "--micro-batch", str(BASELINE_MICRO_BATCH)),
        max_steps=TRIAL_STEPS,
        warmup_steps=2,
        timeout_s=300.0,
        distributed_world_size=ranks,
        stable_within=0.05,
        min_measured_steps=4,
    )
    config = TuneConfig(
        settings=settings,
        space=demo_space(model, device=device, world_size=ranks),
        n_trials=n_trials,
        searcher=DEFAULT_SEARCHER,
        seed=0,
        device_kind="cuda" if device.startswith("cuda") else "cpu",
        confirm_rounds=max(0, confirm_rounds),
    )
    root = runs_root if runs_root is not None else Path("runs")
    run_dir = root / f"{time.strftime('%Y%m%d-%H%M%S')}-demo-tune-{model}"
    console.print(
        f"Tuning demo {model} on {device}: {n_trials} trials of micro-batch × precision × layout "
        f"({'single, ddp and fsdp over 2 ranks' if ranks > 1 else 'one device'}), the global batch "
        f"held fixed; the baseline first: micro-batch {BASELINE_MICRO_BATCH}, fp32, one device"
    )
    progress = Progress()
    progress.header(config, run_dir, resumed=False)
    tuner = progress.tuner(config, run_dir)
    try:
        summary = tuner.run()
    except TuneError as exc:
        console.print(f"[red]the demo study stopped:[/red] {exc}")
        return None
    progress.result(summary)
    console.print(f"Study directory: {run_dir}")
    return summary if summary.best is not None else None


def _cuda_devices() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0
