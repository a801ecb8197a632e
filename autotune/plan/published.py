"""Options the plan cannot trace, at their published effect: ``torch.compile`` and float8 training.

A traced step is eager PyTorch: what Inductor fuses, or what float8 matrix products (torchao's
``Float8Linear``) change, is not in it. These rows are estimates: the eager row's step time and
peak memory times the ratios a publisher measured with and without the option on one model, with
the source and its date. They carry over to a step like that model's (a transformer trained with
FSDP, bound by its matrix products); a host-bound row gets none: what ``torch.compile``'s
fewer, fused launches save there is not estimated.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The published run the effects come from.
TORCHTITAN_2024_12 = (
    "pytorch/torchtitan benchmarks/llama3_h100_202412_torchtitan.md (torch 1963fc8 and torchao "
    "eab345c of 2024-12-23): Llama 3.1 8B, FSDP, selective activation checkpointing, H100 96GB"
)


@dataclass(frozen=True, slots=True)
class PublishedEffect:
    """What one option did to a published run: step time and peak memory, with it over without."""

    name: str
    step_time_ratio: float
    memory_ratio: float
    source: str
    #: Only on GPUs with fp8 tensor cores, and only for bf16 rows (float8 replaces bf16 matmuls).
    needs_fp8: bool = False


def _mean(a: float, b: float) -> float:
    return (a + b) / 2


#: Tables 1 and 3 of the torchtitan run: 8 GPUs 5,762 → 6,667 tokens/s per GPU, 82.4 → 77.0 GiB;
#: 128 GPUs 5,605 → 6,514, 67.0 → 62.0 GiB. The ratios are the two tables' means.
COMPILE = PublishedEffect(
    "compile",
    step_time_ratio=_mean(5_762 / 6_667, 5_605 / 6_514),
    memory_ratio=_mean(77.0 / 82.4, 62.0 / 67.0),
    source=f"{TORCHTITAN_2024_12}, Tables 1 and 3: FSDP against FSDP + torch.compile",
)
#: The same tables, with float8 on top of torch.compile: 6,667 → 8,532 and 6,514 → 8,380 tokens/s
#: per GPU, 77.0 → 76.8 and 62.0 → 61.8 GiB.
FLOAT8 = PublishedEffect(
    "float8",
    step_time_ratio=_mean(6_667 / 8_532, 6_514 / 8_380),
    memory_ratio=_mean(76.8 / 77.0, 61.8 / 62.0),
    source=f"{TORCHTITAN_2024_12}, Tables 1 and 3: FSDP + torch.compile against that + Float8",
    needs_fp8=True,
)

#: The eager step as traced: no published effect applied.
EAGER = "eager"
#: What a row can be planned as, and the effects applied in order.
OPTIMIZATIONS: dict[str, tuple[PublishedEffect, ...]] = {
    EAGER: (),
    "compile": (COMPILE,),
    "compile+float8": (COMPILE, FLOAT8),
}


def applies(name: str, precision: str, has_fp8: bool) -> bool:
    """Whether the optimization ``name`` can run a row of ``precision`` on a GPU (fp8 or not)."""
    needs_fp8 = any(e.needs_fp8 for e in OPTIMIZATIONS[name])
    return not needs_fp8 or (has_fp8 and precision == "bf16")


def ratios(name: str) -> tuple[float, float]:
    """(step time, peak memory) of the optimization ``name`` over the eager step's."""
    time_ratio = memory_ratio = 1.0
    for effect in OPTIMIZATIONS[name]:
        time_ratio *= effect.step_time_ratio
        memory_ratio *= effect.memory_ratio
    return time_ratio, memory_ratio


def notes(asked: tuple[str, ...], planned: set[str]) -> list[str]:
    """The plan's notes on the optimizations ``asked`` for, of which rows were ``planned``."""
    out = []
    used = [n for n in asked if n != EAGER and n in planned]
    if used:
        parts = []
        for n in used:
            t, m = ratios(n)
            parts.append(f"{n}: step time × {t:.3f}, peak memory × {m:.3f}")
        out.append(
            "ESTIMATES, not traces: rows planned with " + "; ".join(parts) + f", the effect published in "
            f"{TORCHTITAN_2024_12}; float8 only for bf16 on GPUs with fp8 tensor cores; none for a "
            "host-bound row (torch.compile's fewer launches likely shorten it: not estimated)"
        )
    for n in (n for n in asked if n != EAGER and n not in planned):
        out.append(
            f"{n}: no row estimated: its published gain is a GPU-bound step's, and every row here is bound "
            "by its host" + (" or is not bf16 on a GPU with fp8 tensor cores" if "float8" in n else "")
        )
    return out


__all__ = ["COMPILE", "EAGER", "FLOAT8", "OPTIMIZATIONS", "PublishedEffect", "applies", "notes", "ratios"]
