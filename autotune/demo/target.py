"""``python -m autotune.demo.target``: a demo model trained the way a script adopting the tuner would.

The tuner's demo trial target. It trains a demo model (:mod:`autotune.demo.models`) with its batch
split from :func:`autotune.batch_plan` and every other knob applied by :func:`autotune.prepare`, so
each parameter a trial sets through ``AUTOTUNE_PARAM_<NAME>`` takes effect: ``micro_batch`` or
``grad_accum`` (the global batch stays fixed), ``precision``, ``layout`` (under ``torchrun`` for
ddp and fsdp), ``activation_checkpointing`` (gpt only: the cnn has no block list), ``compile``.
The user's own defaults are the baseline: the model's default global batch in one micro-batch
(``grad_accum`` 1), fp32, one device.

::

    python -m autotune.demo.target --model gpt --steps 50
    python -m torch.distributed.run --standalone --nproc-per-node 2 -m autotune.demo.target --model cnn
    python -m autotune profile --max-steps 20 -m autotune.demo.target --model gpt   # one trial

One optimizer step is one profiler step, marked with :func:`autotune.step` (before the loop and
after each optimizer step): the profiler's automatic detection takes a script that runs 16
backward passes before its first optimizer step for one that updates by hand, which a long
gradient accumulation (micro-batch 1 of a global batch of 96) does.

Each step's global batch is the next ``global_batch`` indices of a seeded permutation of the
dataset (reshuffled every epoch); rank ``r`` takes its own contiguous share of it, in
``grad_accum`` micro-batches. So the samples of a step do not depend on the split, and at fp32 on
the CPU the gpt's loss trajectory is the same (up to rounding) for every ``micro_batch ×
grad_accum × world_size`` of one global batch. (Not the cnn's: batch norm normalises over each
micro-batch, a real effect of the split.) Deterministic for a seed on the CPU at a fixed thread
count. Nothing is printed per step; one line at the end, from rank 0.

:func:`demo_space` is the search space the demo tunes, and :func:`layout_world_size` the ranks a
configuration of it runs on. Importing this module does not import torch.
"""

from __future__ import annotations

import argparse
import gc
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import autotune
from autotune.search.space import Choice, Int, Space

if TYPE_CHECKING:
    import torch

    from autotune.knobs import BatchPlan
    from autotune.prepared import Prepared

#: Steps when ``--steps`` is not given: more than any trial runs (its ``--max-steps`` stops it).
DEFAULT_STEPS = 10_000
#: Layouts of the demo space, in the order of :data:`autotune.knobs.KNOBS`.
LAYOUTS: tuple[str, ...] = ("single", "ddp", "fsdp")
#: Default global batch of each demo model (their ``default_batch_size``; checked by the tests).
DEFAULT_GLOBAL_BATCH = {"gpt": 16, "cnn": 96}
MODELS: tuple[str, ...] = tuple(DEFAULT_GLOBAL_BATCH)


# ---------------------------------------------------------------------------------- the space


def layout_world_size(layout: str, world_size: int = 2) -> int:
    """Ranks a ``layout`` runs on: 1 for ``single``, ``world_size`` for ``ddp`` and ``fsdp``."""
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}; choose from {', '.join(LAYOUTS)}")
    return 1 if layout == "single" else world_size


def demo_space(
    model: str = "gpt", *, device: str = "cpu", world_size: int = 2, global_batch: int | None = None
) -> Space:
    """The space the demo tunes: ``micro_batch`` × ``precision`` × ``layout``.

    - ``micro_batch``: the powers of two that divide the global batch (``global_batch``, else the
      model's default). Under ddp/fsdp a rank takes ``global_batch / world_size``, so the largest
      values may not divide that: those configurations are infeasible (the trial's
      :func:`autotune.batch_plan` raises ValueError), part of the space for a searcher to learn.
    - ``precision``: fp32, bf16, fp16, and tf32 on ``device="cuda"``.
    - ``layout``: single, ddp, fsdp; single only when ``world_size`` is 1. The ranks follow from
      the layout (:func:`layout_world_size`), so ``world_size`` is not a parameter of its own.
    """
    if model not in DEFAULT_GLOBAL_BATCH:
        raise ValueError(f"unknown demo model {model!r}; choose from {', '.join(MODELS)}")
    if device not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cpu' or 'cuda', got {device!r}")
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    g = DEFAULT_GLOBAL_BATCH[model] if global_batch is None else global_batch
    if g < 2 or g % 2:
        raise ValueError(f"global_batch must be even (a micro-batch to tune), got {g}")
    precisions = ("fp32", "tf32", "bf16", "fp16") if device == "cuda" else ("fp32", "bf16", "fp16")
    return Space(
        micro_batch=Int(1, g & -g, power_of_two=True),  # g & -g: the largest power of two dividing g
        precision=Choice(*precisions),
        layout=Choice(*LAYOUTS) if world_size > 1 else Choice("single"),
    )


# ---------------------------------------------------------------------------------- the data


class GlobalBatchSampler:
    """Index lists of one rank's micro-batches: each step, its share of the next global batch.

    Each epoch is a permutation of ``range(num_samples)`` drawn from a generator seeded once with
    ``seed``; step k's global batch is its k-th run of ``plan.global_batch`` indices (an incomplete
    last run is dropped), of which rank r takes the r-th ``plan.rank_batch`` in ``plan.grad_accum``
    micro-batches of ``plan.micro_batch``. Endless: the training loop decides when to stop.
    """

    def __init__(self, num_samples: int, plan: BatchPlan, rank: int = 0, seed: int = 0) -> None:
        if plan.global_batch > num_samples:
            raise ValueError(f"global_batch {plan.global_batch} is larger than the dataset ({num_samples})")
        self.num_samples, self.plan, self.rank, self.seed = num_samples, plan, rank, seed

    def __iter__(self) -> Iterator[list[int]]:
        import torch

        g, rb, mb = self.plan.global_batch, self.plan.rank_batch, self.plan.micro_batch
        gen = torch.Generator().manual_seed(self.seed)
        while True:
            perm = torch.randperm(self.num_samples, generator=gen).tolist()
            for start in range(0, self.num_samples - g + 1, g):
                mine = perm[start + self.rank * rb : start + (self.rank + 1) * rb]
                for i in range(0, rb, mb):
                    yield mine[i : i + mb]


# ---------------------------------------------------------------------------------- training


@dataclass(frozen=True)
class DemoRun:
    """What :func:`train` did: the batch plan, the knobs in effect and the loss of every step.

    ``losses`` are this rank's (the mean over its share of each global batch); ``final_loss`` is
    the last step's over the whole global batch (averaged over the ranks).
    """

    model: str
    plan: BatchPlan
    precision: str
    layout: str
    device: str  # "cpu" or "cuda"
    autocast_dtype: torch.dtype | None
    rank: int
    losses: list[float]
    final_loss: float


def _loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    import torch.nn.functional as F

    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), target.reshape(-1))


def train(
    model: str = "gpt",
    steps: int = DEFAULT_STEPS,
    *,
    device: str = "auto",
    global_batch: int | None = None,
    seed: int = 0,
    micro_batch: int | None = None,
) -> DemoRun:
    """Train demo ``model`` for ``steps`` optimizer steps with the trial's knobs applied.

    The defaults given to :func:`autotune.batch_plan` and :func:`autotune.prepare` are the user's
    (global batch in one micro-batch unless ``micro_batch`` says otherwise, fp32, single); the
    trial's ``AUTOTUNE_PARAM_*`` override them. ``device``: ``"cpu"``, ``"cuda"`` or ``"auto"``.
    Under ddp/fsdp the process group made by :func:`autotune.prepare` is destroyed before
    returning (or when a step budget stops it), after the model and optimizer are freed: a DDP
    wrapper or FSDP parameters still alive then keep gloo's threads running into interpreter
    shutdown, which aborted 5 of 40 two-rank runs on this project's CPU ("terminate called
    without an active exception", SIGABRT; 0 of 40 with them freed first).
    """
    import torch
    from torch.utils.data import DataLoader

    from autotune.demo.models import default_config, make_dataset, make_model, resolve_device

    if steps < 1:
        raise ValueError("steps must be at least 1")
    cfg = default_config(model)
    g = cfg.default_batch_size if global_batch is None else global_batch
    # before anything is built: an impossible split fails fast
    plan = autotune.batch_plan(g, micro_batch=g if micro_batch is None else micro_batch)
    torch.manual_seed(seed)
    net = make_model(cfg)
    optimizer = torch.optim.AdamW(net.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    prep = autotune.prepare(net, optimizer, device=resolve_device(device))
    try:
        if plan.world_size != prep.world_size:
            raise ValueError(
                f"layout {prep.layout!r} trains on {prep.world_size} rank(s) but the job runs "
                f"{plan.world_size}: launch ddp/fsdp with torchrun, single without it"
            )
        dataset = make_dataset(cfg, seed)
        sampler = GlobalBatchSampler(len(dataset), plan, prep.rank, seed)  # type: ignore[arg-type]
        cuda = prep.device.type == "cuda"
        loader = DataLoader(dataset, batch_sampler=sampler, pin_memory=cuda)
        batches = iter(loader)
        per_step: list[torch.Tensor] = []  # kept on the device: no host sync inside a step
        prep.model.train()
        autotune.step()  # steps are marked explicitly (see the module docstring): the first starts here
        for _ in range(steps):
            total = torch.zeros((), device=prep.device)
            for i in range(plan.grad_accum):
                x, y = next(batches)
                x, y = x.to(prep.device, non_blocking=cuda), y.to(prep.device, non_blocking=cuda)
                with prep.no_sync(i < plan.grad_accum - 1):  # gradients sync on the last micro-batch
                    with prep.autocast():
                        loss = _loss(prep.model(x), y) / plan.grad_accum
                    prep.backward(loss)
                total += loss.detach()
            prep.step()
            autotune.step()
            per_step.append(total)
        losses = torch.stack(per_step).tolist()
        final = per_step[-1].clone()
        if prep.world_size > 1:
            import torch.distributed as dist

            dist.all_reduce(final)
        return DemoRun(
            model=model,
            plan=plan,
            precision=prep.precision,
            layout=prep.layout,
            device=prep.device.type,
            autocast_dtype=prep.autocast_dtype,
            rank=prep.rank,
            losses=losses,
            final_loss=float(final) / prep.world_size,
        )
    finally:
        _close(prep)
        del net, optimizer
        gc.collect()  # the model's and the optimizer's last references go before the process group
        prep.close()


def _close(prep: Prepared) -> None:
    """Drop what ``prep`` holds of the model and optimizer (the process group goes after them)."""
    prep.model = prep._sync_root = None  # type: ignore[assignment]
    prep.optimizer = None


# ---------------------------------------------------------------------------------- command line


def build_parser() -> argparse.ArgumentParser:
    """The ``python -m autotune.demo.target`` argument parser."""
    parser = argparse.ArgumentParser(
        prog="python -m autotune.demo.target",
        description="Train a demo model with the tuner's knobs (AUTOTUNE_PARAM_*) applied.",
    )
    parser.add_argument("--model", choices=MODELS, default="gpt", help="demo model (default gpt)")
    parser.add_argument(
        "--steps", type=int, default=DEFAULT_STEPS, help=f"optimizer steps (default {DEFAULT_STEPS:_})"
    )
    parser.add_argument(
        "--device", choices=("cpu", "cuda", "auto"), default="auto", help="auto: CUDA when available"
    )
    parser.add_argument(
        "--global-batch", type=int, default=None, help="samples per optimizer step (default: the model's)"
    )
    parser.add_argument("--seed", type=int, default=0, help="model initialisation and data order (0)")
    parser.add_argument(
        "--micro-batch",
        type=int,
        default=None,
        help="samples per forward/backward, the rest accumulated (default: the whole global batch)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the target; one line at the end (rank 0). Returns the exit status."""
    args = build_parser().parse_args(argv)
    if args.steps < 1:
        build_parser().error("--steps must be at least 1")
    run = train(
        args.model,
        args.steps,
        device=args.device,
        global_batch=args.global_batch,
        seed=args.seed,
        micro_batch=args.micro_batch,
    )
    p = run.plan
    if run.rank == 0:
        print(
            f"demo-{run.model}: {len(run.losses)} steps, final loss {run.final_loss:.6f} (global batch "
            f"{p.global_batch} = micro {p.micro_batch} x accum {p.grad_accum} x {p.world_size} rank(s); "
            f"{run.precision}, {run.layout}, {run.device})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
