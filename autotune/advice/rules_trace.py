"""The trace rules: what a torch.profiler trace alone shows, with the trace's own figures as evidence.

Each rule takes a :class:`profilers.traces.analysis.TraceAnalysis` (every rank's GPU time) and
returns a :class:`Recommendation` or None. The rule ids are the profile rules' where the finding is
the same (``host_bound``, ``comm_bound``, ``precision_fp32``, ``straggler``) and new ones where a
trace shows more (``launch_bound``, ``memcpy_heavy``). A rule fires on the worst rank and names it;
every rank's figures go into ``figures`` for CI. Speedups are upper bounds (the cause removed).
"""

from __future__ import annotations

from collections.abc import Callable

from autotune.advice.records import AdviceSection, Recommendation, Threshold
from autotune.advice.rules import HOST_BOUND_ACTIONS, at_most
from autotune.advice.thresholds import BY_KEY, limit, severity_for
from autotune.fmt import format_number, format_seconds
from profilers.runtime.flops import match_device
from profilers.traces.analysis import TraceAnalysis, compute_per_step_us
from profilers.traces.gpu_time import KIND_COMPUTE, KIND_MEMORY, RankGpuTime
from profilers.traces.idle import IdleCause

_BATCH = "a larger micro-batch (autotune tune searches micro_batch)"


def _us(value: float | None) -> str:
    return "n/a" if value is None else format_seconds(value / 1e6)


def _where(r: RankGpuTime) -> str:
    return f"rank {r.rank} ({r.device_name or 'GPU'})"


def _with_gpu(analysis: TraceAnalysis) -> list[RankGpuTime]:
    return [r for r in analysis.ranks if r.kernel_time_us > 0 and r.idle_pct is not None]


def _idle_line(r: RankGpuTime) -> str | None:
    """HTA's idle breakdown of the rank's busiest compute stream, and its largest cause, in one line."""
    b = r.idle_breakdown
    if b is None or b.idle_us <= 0:
        return None
    line = (
        f"its busiest compute stream ({b.stream}) was idle {_us(b.idle_us)}: "
        f"host wait {b.host_wait_pct or 0:.0f}%, kernel wait {b.kernel_wait_pct or 0:.0f}%, "
        f"other {b.other_pct or 0:.0f}% (HTA's idle breakdown)"
    )
    named = [c for c in b.causes if c.cause not in ("launch", "launch_overhead", "unknown")]
    if named:
        c = named[0]
        line += f"; {c.idle_pct:.0f}% of it waited on {c.evidence}"
    return line


def _sync_cause(r: RankGpuTime) -> IdleCause | None:
    b = r.idle_breakdown
    syncs = [c for c in b.causes if c.cause == "sync"] if b is not None else []
    if not syncs:
        return None
    total = sum(c.idle_us for c in syncs)
    top = max(syncs, key=lambda c: c.idle_us)  # its evidence names the call and operator
    return IdleCause(
        "sync", top.category, total, sum(c.idle_pct for c in syncs), sum(c.gaps for c in syncs), top.evidence
    )


def idle_sync(analysis: TraceAnalysis) -> Recommendation | None:
    """The busiest compute stream waits while the host sits in a synchronizing call (.item(), .cpu())."""
    hits = []
    for r in _with_gpu(analysis):
        cause = _sync_cause(r)
        if cause is None or r.kernel_time_us <= 0:
            continue
        span_pct = 100 * cause.idle_us / r.kernel_time_us
        if cause.idle_pct > limit("idle_sync.share") and span_pct > limit("idle_sync.span"):
            hits.append((r, cause, span_pct))
    if not hits:
        return None
    r, cause, span_pct = max(hits, key=lambda h: h[2])
    bound = 1 / (1 - span_pct / 100) if span_pct < 100 else None
    b = r.idle_breakdown
    assert b is not None
    evidence = [
        f"{_where(r)}: the busiest compute stream ({b.stream}) waited {_us(cause.idle_us)} in "
        f"{cause.gaps:,} gap{'s' if cause.gaps != 1 else ''} ({cause.idle_pct:.0f}% of its idle time, "
        f"{span_pct:.1f}% of the GPU span) "
        f"while the host was in {cause.evidence}",
        "a synchronizing call blocks the CPU until the GPU has finished everything queued: nothing new is "
        "launched meanwhile, so the GPU drains its queue and then waits",
    ]
    if bound is not None:
        evidence.append(at_most(bound, "if the host never synchronized"))
    actions = (
        f"remove the sync in {cause.evidence.split(' in ', 1)[-1]}: keep values on the GPU "
        "(accumulate loss.detach() and read it every N steps instead of .item() each step)",
        "copies to the host without blocking: pinned memory and .to('cpu', non_blocking=True), read after "
        "an event",
        "no data-dependent shapes in the step (torch.nonzero, boolean masks, .tolist()), which sync too",
    )
    figures = {
        "rank": r.rank,
        "stream": b.stream,
        "sync_idle_us": cause.idle_us,
        "sync_share_of_idle_pct": cause.idle_pct,
        "sync_share_of_span_pct": span_pct,
        "call": cause.evidence,
        "speedup_bound": bound,
    }
    title = (
        f"The GPU waits on host syncs: {span_pct:.0f}% of the GPU span on rank {r.rank} ({cause.evidence})"
    )
    return Recommendation(
        "idle_sync", severity_for(bound), title, tuple(evidence), actions, bound, figures=figures
    )


def host_bound(analysis: TraceAnalysis) -> Recommendation | None:
    """The GPU idles over half its span while each kernel starts right after its launch call."""
    hits = [
        r
        for r in _with_gpu(analysis)
        if r.idle_pct is not None
        and 100 - r.idle_pct < limit("host_bound.gpu_busy")
        and r.launch.launch_delay_us_median is not None
        and r.launch.launch_delay_us_median < limit("host_bound.launch_delay")
    ]
    if not hits:
        return None
    r = max(hits, key=lambda x: x.idle_pct or 0.0)
    busy = 1 - (r.idle_pct or 0.0) / 100
    bound = 1 / busy if busy > 0 else None
    evidence = [
        f"{_where(r)}: the GPU is idle {r.idle_pct:.1f}% of its {_us(r.kernel_time_us)} span "
        f"(compute {r.compute_pct:.1f}%, non-compute {r.non_compute_pct:.1f}%)",
        f"a kernel starts a median {_us(r.launch.launch_delay_us_median)} after its launch call "
        f"({r.launch.launches:,} launches, median call {_us(r.launch.launch_us_median)}), with a median "
        f"{format_number(r.launch.queue_median or 0, 6)} kernels queued ahead of it: the GPU waited for "
        "the host",
        f"{r.launch.runtime_calls:,} runtime calls took {_us(r.launch.runtime_us)}; host ops' self time "
        f"{_us(r.cpu_op_self_us)} over a {_us(r.host_span_us)} host span",
    ]
    waited = _idle_line(r)
    if waited:
        evidence.append(waited)
    if bound is not None:
        evidence.append(at_most(bound, "if the GPU never waited for the host"))
    actions = HOST_BOUND_ACTIONS
    figures = {
        "rank": r.rank,
        "idle_pct": r.idle_pct,
        "launch_delay_us_median": r.launch.launch_delay_us_median,
        "ranks": [x.rank for x in hits],
        "speedup_bound": bound,
    }
    title = f"Host-bound: the GPU is idle {r.idle_pct:.0f}% of the trace on {_where(r)}"
    return Recommendation(
        "host_bound", severity_for(bound), title, tuple(evidence), actions, bound, figures=figures
    )


def launch_bound(analysis: TraceAnalysis) -> Recommendation | None:
    """Most kernels are shorter than the CPU call that launched them, and the GPU idles."""
    hits = [
        r
        for r in _with_gpu(analysis)
        if r.launch.short_kernels_pct is not None
        and r.launch.short_kernels_pct > limit("launch_bound.short_kernels")
        and (r.idle_pct or 0.0) > limit("launch_bound.idle")
    ]
    if not hits:
        return None
    r = max(hits, key=lambda x: x.launch.short_kernels_pct or 0.0)
    evidence = (
        f"{_where(r)}: {r.launch.short_kernels:,} kernels ({r.launch.short_kernels_pct:.0f}%) ran shorter "
        f"than their launch call (median kernel {_us(r.kernel_median_us)}, median launch call "
        f"{_us(r.launch.launch_us_median)})",
        f"the GPU is idle {r.idle_pct:.1f}% of its span",
    )
    actions = (
        "fewer, larger kernels: torch.compile(model) fuses elementwise chains",
        "CUDA graphs: one launch per step (torch.compile(mode='reduce-overhead'))",
        "fused optimizers (torch.optim.AdamW(..., fused=True)) and foreach ops",
        f"more work per kernel: {_BATCH}",
    )
    figures = {"rank": r.rank, "short_kernels_pct": r.launch.short_kernels_pct, "idle_pct": r.idle_pct,
               "ranks": [x.rank for x in hits]}  # fmt: skip
    title = f"Launch-bound: {r.launch.short_kernels_pct:.0f}% of kernels are shorter than their launch"
    return Recommendation("launch_bound", "medium", title, evidence, actions, figures=figures)


def comm_bound(analysis: TraceAnalysis) -> Recommendation | None:
    """Communication that no compute kernel hides passes 10% of a rank's GPU span."""
    shares = [(r, 100 * r.comm_exposed_us / r.kernel_time_us) for r in _with_gpu(analysis) if r.comm_us > 0]
    hits = [(r, s) for r, s in shares if s > limit("comm_bound.share")]
    if not hits:
        return None
    r, share = max(hits, key=lambda x: x[1])
    bound = 1 / (1 - share / 100) if share < 100 else None
    evidence = [
        f"{_where(r)}: communication kernels run {_us(r.comm_us)} of the {_us(r.kernel_time_us)} GPU span; "
        f"{_us(r.comm_exposed_us)} of it ({share:.1f}% of the span) with no compute kernel beside it",
        f"{r.comm_overlap_pct or 0:.1f}% of communication overlaps compute (HTA's comm-comp overlap)",
    ]
    waited = _idle_line(r)
    if waited:
        evidence.append(waited)
    if bound is not None:
        evidence.append(at_most(bound, "if all communication were hidden behind compute"))
    actions = (
        "accumulate gradients under model.no_sync(), one all-reduce per optimizer step (grad_accum)",
        "overlap: DDP(bucket_cap_mb=...) sized so the first buckets reduce while backward still runs",
        f"more compute per byte sent: {_BATCH}",
        "bf16 gradient compression (ddp_comm_hooks), NCCL over NVLink/InfiniBand",
    )
    figures = {
        "rank": r.rank,
        "exposed_pct": share,
        "comm_us": r.comm_us,
        "comm_exposed_us": r.comm_exposed_us,
        "comm_overlap_pct": r.comm_overlap_pct,
        "speedup_bound": bound,
    }
    title = f"Communication-bound: {share:.0f}% of the GPU span in exposed collectives on rank {r.rank}"
    return Recommendation(
        "comm_bound", severity_for(bound), title, tuple(evidence), actions, bound, figures=figures
    )


def precision_fp32(analysis: TraceAnalysis) -> Recommendation | None:
    """fp32 GEMMs on the CUDA cores of a GPU whose tensor cores run a reduced precision faster."""
    for r in _with_gpu(analysis):
        peak = match_device(r.device_name or "")
        compute = r.kind_us(KIND_COMPUTE)
        if peak is None or not peak.fp32_tflops or compute <= 0:
            continue
        fast, fast_tflops = ("bf16", peak.bf16_tflops) if peak.bf16_tflops else ("fp16", peak.fp16_tflops)
        share = 100 * r.fp32_gemm_us / compute
        if not fast_tflops or share <= limit("precision_fp32.trace_share"):
            continue
        ratio = fast_tflops / peak.fp32_tflops
        busy_share = r.fp32_gemm_us / r.kernel_time_us if r.kernel_time_us else 0.0
        bound = 1 / (1 - busy_share + busy_share / ratio)
        evidence = [
            f"{_where(r)}: fp32 GEMM/convolution kernels on CUDA cores (sgemm, scudnn...) run "
            f"{_us(r.fp32_gemm_us)}, {share:.0f}% of compute-kernel time; tensor-core kernels "
            f"{r.tensor_core_pct or 0:.0f}%",
            f"{peak.name}: {fast} peaks at {format_number(fast_tflops, 6)} TFLOPS against "
            f"{format_number(peak.fp32_tflops, 6)} in fp32 "
            f"({ratio:.0f}x; {peak.source.split(',')[0]})",
            at_most(bound, f"if those GEMMs ran {ratio:.0f}x faster in {fast}"),
        ]
        actions = (
            f"autocast the forward and the loss to {fast}: autotune.prepare(..., precision='{fast}')",
            *(
                ("TF32 for fp32 matmuls: torch.backends.cuda.matmul.allow_tf32 = True",)
                if peak.tf32_tflops
                else ()
            ),
            "autotune tune searches precision with your own loss",
        )
        figures = {"rank": r.rank, "fp32_gemm_us": r.fp32_gemm_us, "fp32_gemm_share_pct": share,
                   "peak_ratio": ratio, "speedup_bound": bound}  # fmt: skip
        title = f"fp32 GEMMs on CUDA cores: {share:.0f}% of compute time on a {peak.name}"
        return Recommendation("precision_fp32", severity_for(bound), title, tuple(evidence), actions, bound,
                              figures=figures)  # fmt: skip
    return None


def memcpy_heavy(analysis: TraceAnalysis) -> Recommendation | None:
    """Memory copies and fills take over 10% of a rank's GPU span."""
    shares = [
        (r, 100 * r.kind_us(KIND_MEMORY) / r.kernel_time_us) for r in _with_gpu(analysis)
    ]
    hits = [(r, s) for r, s in shares if s > limit("memcpy_heavy.share")]
    if not hits:
        return None
    r, share = max(hits, key=lambda x: x[1])
    copies = ", ".join(f"{k} {_us(v)}" for k, v in sorted(r.memcpy_us.items(), key=lambda kv: -kv[1]))
    evidence = (f"{_where(r)}: memcpy/memset kernels run {share:.1f}% of the GPU span ({copies})",)
    actions = []
    if r.copy_us("HtoD", "DtoH") > r.copy_us("DtoD"):
        actions += [
            "pinned memory, async copies: DataLoader(pin_memory=True), .to(device, non_blocking=True)",
            "keep results on the GPU: no .cpu()/.item() per step; log every N steps",
        ]
    if r.copy_us("DtoD") > 0:
        actions.append("DDP(gradient_as_bucket_view=True): gradients live in the buckets, no copy in and out")
        actions.append("avoid .contiguous()/.clone() copies in the model (channels_last end to end)")
    figures = {"rank": r.rank, "memory_share_pct": share, "memcpy_us": dict(r.memcpy_us)}
    title = f"Memory copies: {share:.0f}% of the GPU span on rank {r.rank}"
    return Recommendation("memcpy_heavy", "medium", title, evidence, tuple(actions), figures=figures)


def straggler(analysis: TraceAnalysis) -> Recommendation | None:
    """One rank's compute per step is well above the fastest rank's: the others wait for it."""
    work = {r.rank: (r, compute_per_step_us(r)) for r in _with_gpu(analysis)}
    known = [(r, w) for r, w in work.values() if w]
    if len(known) < 2:
        return None
    slow, fast = max(known, key=lambda x: x[1]), min(known, key=lambda x: x[1])
    ratio = slow[1] / fast[1]
    if ratio <= limit("straggler.ratio"):
        return None
    evidence = (
        f"rank {slow[0].rank} computes {_us(slow[1])} of kernels per step, "
        f"rank {fast[0].rank} {_us(fast[1])} "
        f"({ratio:.2f}x)",
        f"rank {fast[0].rank} is idle {fast[0].idle_pct or 0:.1f}% of its span, rank {slow[0].rank} "
        f"{slow[0].idle_pct or 0:.1f}%: the fast ranks wait in the collectives",
    )
    actions = (
        f"compare rank {slow[0].rank}'s top kernels with the others' (tables below): more work, or slower",
        f"check rank {slow[0].rank}'s GPU: clocks and throttling (nvidia-smi -q -d PERFORMANCE)",
        "give every rank the same work per step (DistributedSampler, equal sequence lengths)",
    )
    figures = {"slowest_rank": slow[0].rank, "fastest_rank": fast[0].rank, "compute_ratio": ratio,
               "compute_us_per_step": {r.rank: w for r, w in known}}  # fmt: skip
    title = f"Straggler: rank {slow[0].rank} computes {ratio:.1f}x as long per step as rank {fast[0].rank}"
    return Recommendation("straggler", "high" if ratio >= 1.3 else "medium", title, evidence, actions,
                          figures=figures)  # fmt: skip


#: The trace rules in report order, each with why it cannot run (None: it can).
TRACE_RULES: tuple[tuple[str, Callable[[TraceAnalysis], Recommendation | None]], ...] = (
    ("host_bound", host_bound),
    ("launch_bound", launch_bound),
    ("comm_bound", comm_bound),
    ("precision_fp32", precision_fp32),
    ("memcpy_heavy", memcpy_heavy),
    ("idle_sync", idle_sync),
    ("straggler", straggler),
)


#: The thresholds the trace rules read (keys of autotune.advice.thresholds.BY_KEY).
TRACE_THRESHOLDS = (
    "host_bound.gpu_busy", "host_bound.launch_delay", "launch_bound.short_kernels", "launch_bound.idle",
    "comm_bound.share", "precision_fp32.trace_share", "memcpy_heavy.share", "straggler.ratio",
    "idle_sync.share", "idle_sync.span",
)  # fmt: skip


def _why_not(rule: str, analysis: TraceAnalysis) -> str | None:
    gpu = _with_gpu(analysis)
    if not gpu:
        return f"{rule}: the trace has no GPU activity (a CPU-only trace)"
    if rule == "comm_bound" and not any(r.comm_us > 0 for r in gpu):
        return "comm_bound: no communication kernels in the trace"
    if rule == "precision_fp32" and not any(match_device(r.device_name or "") for r in gpu):
        names = ", ".join(sorted({r.device_name or "unnamed" for r in gpu}))
        return f"precision_fp32: the peak throughputs of {names} are not in the device table"
    if rule == "straggler" and len({r.rank for r in gpu}) < 2:
        return "straggler: one rank's trace (give the folder of every rank's trace)"
    return None


def advise_trace(analysis: TraceAnalysis) -> AdviceSection:
    """The advice section of a trace: what fired, the thresholds checked, the rules not checked."""
    recs: list[Recommendation] = []
    checked: set[str] = set()
    missing: list[str] = []
    for rule, check in TRACE_RULES:
        why = _why_not(rule, analysis)
        if why is not None:
            missing.append(why)
            continue
        checked.add(rule)
        rec = check(analysis)
        if rec is not None:
            recs.append(rec)
    order = ("high", "medium", "low")
    recs.sort(key=lambda r: (order.index(r.severity), -(r.speedup_estimate or 0.0)))
    rules: tuple[Threshold, ...] = tuple(BY_KEY[k] for k in TRACE_THRESHOLDS if BY_KEY[k].rule in checked)
    return AdviceSection(tuple(recs), rules, tuple(missing))


__all__ = ["TRACE_RULES", "TRACE_THRESHOLDS", "advise_trace"]
