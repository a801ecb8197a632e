"""The profile rules: one function per rule, ``(run) -> Recommendation | None``.

A rule fires when this run's figures (:mod:`autotune.advice.facts`) cross its thresholds
(:mod:`autotune.advice.thresholds`) and says why with this run's numbers. It returns None when it
does not fire and when the run lacks its data (:data:`autotune.advice.advise.RULES` pairs each
rule with the function that tells the two apart). Every ``speedup_estimate`` here is an upper
bound: the gain if the cause disappeared entirely.
"""

from __future__ import annotations

import statistics
from typing import NamedTuple

from autotune.advice import facts
from autotune.advice.records import Recommendation, figures_of, records_of
from autotune.advice.thresholds import MIN_GPU_SAMPLES, MIN_STEPS, limit, severity_for
from autotune.fmt import format_bytes, format_number, format_pct
from profilers.contract.rundir import RunData
from profilers.runtime.flops import DDP_DEFAULT_BUCKET_CAP_BYTES, match_device

#: summary.json's ``profile_window.collective_source`` in words.
COLLECTIVE_SOURCES = {
    "device_kernels": "NCCL kernels",
    "backend_ranges": "the backend's collective ranges",
    "frontend_ops": "c10d ops",
}
_BATCH = "a larger micro-batch (autotune tune searches micro_batch)"


#: What to do when the GPU waits for the host (the profile and the trace rules say the same).
HOST_BOUND_ACTIONS = (
    "fuse the small kernels: torch.compile(model) (autotune.prepare(..., compile=True))",
    "replay each step as one launch: CUDA graphs (torch.compile(mode='reduce-overhead'))",
    f"more work per kernel: {_BATCH}",
    "drop host syncs from the loop (.item(), .cpu()); fused optimizers (AdamW(..., fused=True))",
)


def ms(seconds: float) -> str:
    """Seconds as milliseconds (µs below 1 ms)."""
    return f"{seconds * 1e6:.0f} µs" if abs(seconds) < 1e-3 else f"{seconds * 1e3:.1f} ms"


def gib(n_bytes: float | None) -> str:
    """Bytes as GiB (MiB below 1 GiB); "?" when unknown."""
    if n_bytes is None:
        return "?"
    return f"{n_bytes / 2**30:.1f} GiB" if abs(n_bytes) >= 2**30 else f"{n_bytes / 2**20:.1f} MiB"


def at_most(bound: float, if_: str) -> str:
    """The evidence line of an upper-bound estimate."""
    return f"at most {bound:.2f}x the throughput ({100 * (bound - 1):.0f}% more samples/s) {if_}"


def _gpu(run: RunData) -> bool:
    return facts.device(run).kind == "cuda"


_CHEAPER_BATCHES = "make __getitem__ cheaper: pre-process the dataset once, decode and augment on the GPU"


def input_bound(run: RunData) -> Recommendation | None:
    """The steps wait for data longer than a loader hand-over takes, and for over 5% of the step."""
    d = facts.data_wait(run)
    if d is None or d.data_share * 100 <= limit("input_bound.data_share"):
        return None
    if d.data_median_s * 1e3 <= limit("input_bound.data_wait"):
        return None
    bound = 1 / (1 - d.data_share) if d.data_share < 1 else None
    evidence = [
        f"data wait is {format_pct(d.data_share)} of the measured step time: {ms(d.data_median_s)} of the "
        f"{ms(d.step_median_s)} median step (rank 0, {d.measured_steps} measured steps)"
    ]
    if d.dataloader_iter == "_SingleProcessDataLoaderIter":
        evidence.append("the DataLoader loads in the training process (num_workers=0)")
        actions = [
            "DataLoader(..., num_workers=N, pin_memory=True, persistent_workers=True, prefetch_factor=4), "
            "N up to the CPU cores per GPU minus one"
        ]
    elif d.dataloader_iter is not None:
        evidence.append("the DataLoader already loads in worker processes and still cannot keep up")
        actions = [
            "raise num_workers and prefetch_factor, keep the workers (persistent_workers=True)",
            _CHEAPER_BATCHES,
        ]
    elif facts.summary_figures(run).window is not None:
        evidence.append("no DataLoader ran in the profiled window: the batch is built on the training thread")
        actions = [
            "build batches in a Dataset read by DataLoader(..., num_workers=N, pin_memory=True, "
            "persistent_workers=True)"
        ]
    else:  # a tuning trial or --no-deep-profile: nothing saw how the batches are loaded
        evidence.append("this run had no profiled window, so how its batches are loaded was not seen")
        actions = [
            "load batches ahead of the step: a DataLoader (or the framework's) with num_workers=N, "
            "pin_memory=True, persistent_workers=True",
            "profile the script once with autotune profile: its deep window (on by default) shows how "
            "the batches are loaded",
        ]
    idle = facts.idle_cores(run)
    if idle is not None and idle[0] < 1.0:  # more loader workers would have no core to run on
        evidence.append(
            f"the CPU has {idle[0]:.1f} of its {idle[1]} cores idle on average: more loader workers would "
            "take cores from the training"
        )
        actions = [a for a in actions if "num_workers" not in a]
        actions += [] if _CHEAPER_BATCHES in actions else [_CHEAPER_BATCHES]
    if _gpu(run):
        actions.append("copy batches with .to(device, non_blocking=True) from pinned memory")
    if bound is not None:
        evidence.append(at_most(bound, "if the wait disappeared"))
    title = f"Input-bound: {format_pct(d.data_share)} of each step waits for data"
    figures = figures_of(d, speedup_bound=bound)
    return Recommendation(
        "input_bound", severity_for(bound), title, tuple(evidence), tuple(actions), bound, figures=figures
    )


def _util(run: RunData) -> list[facts.GpuUtil]:
    return [u for u in facts.gpu_utilization(run) if u.samples >= MIN_GPU_SAMPLES]


def _util_line(u: facts.GpuUtil) -> str:
    return (
        f"GPU {u.index} ({u.name or 'GPU'}): utilization p5 {u.p5_pct:.0f}%, median {u.p50_pct:.0f}%, "
        f"p95 {u.p95_pct:.0f}% over {u.samples} NVML readings during the measured steps"
    )


def low_gpu_util(run: RunData) -> Recommendation | None:
    """NVML utilization stays low: its 95th percentile is under 70%."""
    low = [u for u in _util(run) if u.p95_pct < limit("low_gpu_util.p95")]
    if not low:
        return None
    actions = (
        "find what the GPU waits for: data (input-bound), the host (host-bound), other ranks (communication)",
        f"more work per kernel: {_BATCH}",
        "fewer launches: torch.compile(model), CUDA graphs (torch.compile(mode='reduce-overhead'))",
    )
    title = f"Low GPU utilization: p95 {min(u.p95_pct for u in low):.0f}%"
    evidence = tuple(_util_line(u) for u in low)
    return Recommendation(
        "low_gpu_util", "medium", title, evidence, actions, figures={"gpus": records_of(low)}
    )


def gpu_util_swings(run: RunData) -> Recommendation | None:
    """Utilization swings between busy and idle: p95 at least 70% but p5 under 10%."""
    high, low = limit("low_gpu_util.p95"), limit("gpu_util_swings.p5")
    swings = [u for u in _util(run) if u.p95_pct >= high and u.p5_pct < low]
    if not swings:
        return None
    evidence = (*(_util_line(u) for u in swings), "the GPU is busy in bursts and idle between them")
    actions = (
        "find the stalls in the step timeline: evaluation, checkpoint saves, logging that syncs (.item())",
        "prefetch the next batch: DataLoader prefetch_factor, pin_memory=True and non_blocking copies",
    )
    title = f"GPU utilization swings: p5 {min(u.p5_pct for u in swings):.0f}%"
    figures = {"gpus": records_of(swings)}
    return Recommendation("gpu_util_swings", "low", title, evidence, actions, figures=figures)


#: A profiled window whose steps take this much longer than the measured median says so: its
#: shares are of steps torch.profiler slowed (its per-op cost falls on short CPU ops, not on a
#: kernel or a transfer), and can differ from an unprofiled step's.
WINDOW_SLOWDOWN_SHOWN = 1.5


def _slowed_by(w: facts.Window) -> float | None:
    """How much slower the window's steps ran than the unprofiled ones, from 1.5x; else None."""
    slowdown = w.slowdown
    return slowdown if slowdown is not None and slowdown >= WINDOW_SLOWDOWN_SHOWN else None


def _slowed(w: facts.Window) -> str:
    """``, N.Nx the unprofiled steps' M ms median: ...`` when the window ran that much slower."""
    slowdown = _slowed_by(w)
    if slowdown is None or w.measured_step_us is None:
        return ""
    median = ms(w.measured_step_us / 1e6)
    return f", {slowdown:.1f}x the unprofiled steps' {median} median: torch.profiler's overhead"


def _unprofiled_busy_share(w: facts.Window) -> float | None:
    """The GPU's kernel time per step over the unprofiled steps' median, for a slowed window; else None.

    torch.profiler's cost is on the host (each op recorded); the kernels take the GPU as long as
    ever, so in a window the profiler slowed the GPU idles more than in the run's own steps.
    """
    if _slowed_by(w) is None or w.gpu_busy_share is None or not w.measured_step_us:
        return None
    return min(1.0, w.gpu_busy_share * w.step_us / w.measured_step_us)


def host_bound(run: RunData) -> Recommendation | None:
    """The GPU is busy under half the time, between many short kernels or while the host issues ops."""
    w = facts.window(run)
    if w is None or w.gpu_busy_share is None or w.kernels_per_step is None:
        return None
    unprofiled = _unprofiled_busy_share(w)
    busy = w.gpu_busy_share if unprofiled is None else max(w.gpu_busy_share, unprofiled)
    if busy * 100 >= limit("host_bound.gpu_busy"):
        return None
    short = w.kernel_median_us is not None and w.kernel_median_us < limit("host_bound.kernel_median")
    if not short and w.cpu_op_share * 100 <= limit("host_bound.cpu_ops"):
        return None
    bound = 1 / busy if busy > 0 else None
    evidence = [
        f"the GPU ran kernels {format_pct(w.gpu_busy_share)} of the profiled window ({w.steps} steps of "
        f"{ms(w.step_us / 1e6)}{_slowed(w)}): {w.kernels_per_step:,.0f} kernels per step, median "
        f"{w.kernel_median_us or 0:.1f} µs, mean {w.kernel_mean_us or 0:.1f} µs",
        f"CPU ops took {format_pct(w.cpu_op_share)} of the window (self time, all threads)",
    ]
    if unprofiled is not None and w.measured_step_us and unprofiled > w.gpu_busy_share:
        evidence.append(
            f"the profiler's overhead fell on the host, not on the kernels: their "
            f"{ms(w.gpu_busy_share * w.step_us / 1e6)} per step are {format_pct(unprofiled)} of the "
            f"unprofiled steps' {ms(w.measured_step_us / 1e6)} median, the figure used here"
        )
    if bound is not None:
        evidence.append(at_most(bound, "if the GPU never waited for the host"))
    actions = HOST_BOUND_ACTIONS
    title = f"Host-bound: the GPU is busy {format_pct(busy)} of the step"
    figures = figures_of(
        w,
        window_slowdown=w.slowdown,
        unprofiled_busy_share=unprofiled,
        busy_share_used=busy,
        speedup_bound=bound,
    )
    return Recommendation(
        "host_bound", severity_for(bound), title, tuple(evidence), actions, bound, figures=figures
    )


def precision_fp32(run: RunData) -> Recommendation | None:
    """fp32 compute on a GPU whose tensor cores are many times faster in a reduced precision."""
    if not _gpu(run) or facts.summary_figures(run).precision != "fp32":
        return None
    name = str(facts.device(run).name or "")
    peak = match_device(name)
    fast = "bf16" if peak is not None and peak.bf16_tflops else "fp16"
    fast_tflops = None if peak is None else peak.bf16_tflops or peak.fp16_tflops
    if peak is None or not peak.fp32_tflops or not fast_tflops:
        return None
    ratio = fast_tflops / peak.fp32_tflops
    if ratio <= limit("precision_fp32.peak_ratio"):
        return None
    evidence = [
        f"the run computes in fp32 (no autocast, TF32 off) on {name}, whose tensor cores peak at "
        f"{format_number(fast_tflops, 6)} TFLOP/s in {fast} against "
        f"{format_number(peak.fp32_tflops, 6)} in fp32 ({ratio:.1f}x; "
        f"{peak.source})"
    ]
    mfu = facts.summary_figures(run).mfu
    if mfu is not None:
        evidence.append(f"MFU is {format_pct(mfu)} of the fp32 peak")
    w = facts.window(run)
    if w is not None and w.tensor_core_share is not None:
        evidence.append(f"{format_pct(w.tensor_core_share)} of GPU kernel time ran in tensor-core kernels")
    scaler = "bf16 autocast, no loss scaling" if fast == "bf16" else "fp16 autocast with a GradScaler"
    actions = [f"autotune.prepare(model, optimizer, precision='{fast}') ({scaler})"]
    if peak.tf32_tflops:
        actions.append("at least TF32 matmuls: autotune.prepare(..., precision='tf32')")
    actions.append("let autotune tune check the loss against fp32 (a drifting trial is marked diverged)")
    title = f"fp32 on {peak.name}: its tensor cores peak {ratio:.0f}x higher in {fast}"
    figures = {
        "device": name,
        "fast_precision": fast,
        "fp32_peak_tflops": peak.fp32_tflops,
        "fast_peak_tflops": fast_tflops,
        "peak_ratio": ratio,
        "mfu": mfu,
        "tensor_core_share": None if w is None else w.tensor_core_share,
    }
    return Recommendation("precision_fp32", "high", title, tuple(evidence), tuple(actions), figures=figures)


def precision_no_tensor_cores(run: RunData) -> Recommendation | None:
    """bf16/fp16 compute whose GPU kernels do not run on tensor cores."""
    precision, w = facts.summary_figures(run).precision, facts.window(run)
    if not _gpu(run) or precision not in ("bf16", "fp16") or w is None or w.tensor_core_share is None:
        return None
    if w.tensor_core_share * 100 >= limit("precision_no_tensor_cores.share"):
        return None
    evidence = (
        f"the run computes in {precision}, yet tensor-core kernels ran "
        f"{format_pct(w.tensor_core_share)} of GPU kernel time ({w.kernels_per_step or 0:,.0f} kernels "
        "per step; kernel names as profilers/runtime/deep.py matches them)",
    )
    actions = (
        "matmul and convolution sizes in multiples of 8 (pad hidden, vocabulary, channel sizes)",
        "autocast around the forward and the loss (with prep.autocast(): ...)",
        "if elementwise and normalization ops dominate, fuse them: torch.compile(model)",
    )
    title = f"{precision} without tensor cores: {format_pct(w.tensor_core_share)} of kernel time"
    figures = figures_of(
        precision=precision, tensor_core_share=w.tensor_core_share, kernels_per_step=w.kernels_per_step
    )
    return Recommendation("precision_no_tensor_cores", "medium", title, evidence, actions, figures=figures)


def memory_high(run: RunData) -> Recommendation | None:
    """Peak memory in use passes 90% of a GPU's memory."""
    high = [
        m for m in facts.device_memory(run) if 100 * m.high_bytes / m.total_bytes > limit("memory_high.peak")
    ]
    if not high:
        return None
    evidence = tuple(
        f"GPU {m.index} ({m.name or 'GPU'}) held {gib(m.high_bytes)} of {gib(m.total_bytes)} at its peak "
        f"({format_pct(m.high_bytes / m.total_bytes)}): NVML in use {gib(m.used_max_bytes)}, torch reserved "
        f"{gib(m.peak_reserved_bytes)}, allocated {gib(m.peak_allocated_bytes)}"
        for m in high
    )
    actions = (
        "activation checkpointing: autotune.prepare(..., activation_checkpointing=True)",
        "shard parameters, gradients and optimizer state: autotune.prepare(..., layout='fsdp')",
        "a smaller micro-batch with gradient accumulation, same global batch (autotune.batch_plan)",
        "bf16 autocast; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True when reserved ≫ allocated",
    )
    title = f"Memory nearly full: {format_pct(max(m.high_bytes / m.total_bytes for m in high))} of the GPU"
    return Recommendation(
        "memory_high", "medium", title, evidence, actions, figures={"gpus": records_of(high)}
    )


def memory_low(run: RunData) -> Recommendation | None:
    """Peak allocated memory stays under half of every GPU's memory."""
    mems = [(m, (m.peak_allocated_bytes or 0) / m.total_bytes) for m in facts.device_memory(run)]
    mems = [(m, share) for m, share in mems if share > 0]
    if not mems or max(share for _, share in mems) * 100 >= limit("memory_low.peak"):
        return None
    m, top = max(mems, key=lambda item: item[1])
    evidence = (
        f"the largest rank allocated at most {gib(m.peak_allocated_bytes)} of GPU {m.index}'s "
        f"{gib(m.total_bytes)} ({format_pct(top)}; torch.cuda.max_memory_allocated)",
    )
    actions = (
        f"{_BATCH}; the study also finds where it runs out of memory",
        "if activation checkpointing is on, it costs speed for memory this run does not need",
    )
    title = f"Memory mostly unused: {format_pct(top)} of the GPU"
    figures = figures_of(m, peak_allocated_share=top)
    return Recommendation("memory_low", "low", title, evidence, actions, figures=figures)


def _rank0(run: RunData) -> facts.RankTime | None:
    """Rank 0's median step, phases and wait (None without its measured steps)."""
    return next((r for r in facts.rank_times(run) if r.rank == 0), None)


class _Straggling(NamedTuple):
    ranks: list[facts.RankTime]
    slow: facts.RankTime
    fast: facts.RankTime
    ratio: tuple[float, float, float]  # (low, geometric mean, high) of the paired per-step ratio


def _straggling(run: RunData) -> _Straggling | None:
    """The slowest rank's own work over the fastest's, when it passes the straggler bar; else None.

    The bar is passed by the low end of the ratio's 95% interval over paired steps, not by a ratio
    of two medians: between ranks doing the same work, a busy shared machine moves one rank's
    median 20% above the other's (seen on 2 cores), while step by step the two stay within 20%.
    """
    ranks = [r for r in facts.rank_times(run) if r.measured_steps >= MIN_STEPS]
    if len(ranks) < 2:
        return None
    slow, fast = max(ranks, key=lambda r: r.own_s), min(ranks, key=lambda r: r.own_s)
    ratio = facts.own_work_ratio(run, slow.rank, fast.rank)
    if ratio is None or ratio[0] <= limit("straggler.ratio"):
        return None
    return _Straggling(ranks, slow, fast, ratio)


def _wait_share(run: RunData) -> float:
    """The share of rank 0's step it waits for a straggling rank (inside its collectives).

    Only a straggler the straggler rule names counts: between ranks doing the same work, one
    rank's backward median above another's is the machine's jitter (up to a tenth of the step on
    two shared cores), and taking it out would hide communication that is really there.
    """
    if _straggling(run) is None:
        return 0.0
    rank0 = _rank0(run)
    return rank0.wait_s / rank0.step_median_s if rank0 and rank0.step_median_s > 0 else 0.0


class _Buckets(NamedTuple):
    evidence: str
    actions: tuple[str, ...]


def _bucket_advice(run: RunData) -> _Buckets:
    """Whether larger DDP buckets can help: only when the gradients fill more than one bucket."""
    figures = facts.summary_figures(run)
    grad_bytes, cap = figures.model.gradient_bytes, figures.model.ddp_bucket_cap_bytes
    if grad_bytes is None or grad_bytes <= 0:  # unknown: the general advice
        return _Buckets(
            "",
            ("fewer, larger all-reduces: DistributedDataParallel(model, bucket_cap_mb=100, "
             "gradient_as_bucket_view=True) when the gradients are larger than 25 MiB",),
        )  # fmt: skip
    cap = cap if isinstance(cap, int) and cap > 0 else DDP_DEFAULT_BUCKET_CAP_BYTES
    mib = 1024 * 1024
    buckets = -(-grad_bytes // cap)
    if buckets <= 1:
        return _Buckets(
            f"the gradients ({format_bytes(grad_bytes)}) already fit one {format_number(cap / mib, 6)} MiB "
            "DDP bucket: "
            "larger buckets cannot cut the number of all-reduces",
            (),
        )
    bigger = min(-(-grad_bytes // mib), 256)
    return _Buckets(
        f"the gradients ({format_bytes(grad_bytes)}) make {buckets} all-reduces of "
        f"{format_number(cap / mib, 6)} MiB buckets",
        (f"fewer, larger all-reduces: DistributedDataParallel(model, bucket_cap_mb={bigger}, "
         "gradient_as_bucket_view=True)",),
    )  # fmt: skip


#: The phases a training step's collectives run in: DDP's all-reduce waits inside backward, FSDP
#: gathers in forward and backward, a sharded optimizer gathers in its step. On a GPU the phases
#: are on the GPU's timeline (CUDA events on the compute stream), which waits for the collectives'
#: stream inside those same phases.
COLLECTIVE_PHASES: tuple[str, ...] = ("forward", "backward", "optimizer")


def _collective_phases_share(rank0: facts.RankTime | None) -> float | None:
    """The share of rank 0's median measured step its collective phases take (None without steps).

    The most of an unprofiled step collectives can take: the profiled window's own share can pass it
    when the profiler slowed the window (each rank then also waits for the other's profiled work).
    """
    if rank0 is None or rank0.step_median_s <= 0:
        return None
    return min(1.0, sum(rank0.phase_median_s[p] for p in COLLECTIVE_PHASES) / rank0.step_median_s)


def comm_bound(run: RunData) -> Recommendation | None:
    """Exposed collective time, less any wait for straggling ranks, passes 10% of the step."""
    w = facts.window(run)
    if w is None or not w.collective_share:
        return None
    exposed = w.collective_exposed_share if w.collective_exposed_share is not None else w.collective_share
    wait = min(exposed, _wait_share(run))
    net = exposed - wait
    rank0 = _rank0(run)
    ceiling = _collective_phases_share(rank0)
    shown = net if ceiling is None else min(net, ceiling)
    if shown * 100 <= limit("comm_bound.share"):
        return None
    bound = 1 / (1 - shown) if shown < 1 else None
    source = COLLECTIVE_SOURCES.get(str(w.collective_source), str(w.collective_source))
    evidence = [
        f"collectives ({source}) take {format_pct(w.collective_share)} of the profiled window on rank 0: "
        f"{ms(w.collective_share * w.step_us / 1e6)} of each {ms(w.step_us / 1e6)} profiled step{_slowed(w)}",
        f"{format_pct(exposed)} of the window is collective time no compute kernel hides"
        if w.collective_exposed_share is not None
        else "the CPU window cannot tell overlap with compute: all collective time counts as exposed",
    ]
    if wait > 0.01:
        evidence.append(
            f"{format_pct(wait)} of rank 0's step is waiting for slower ranks (see stragglers), left out"
        )
    if rank0 is not None and ceiling is not None and ceiling < net:
        evidence.append(
            f"an unprofiled step cannot hold more: its forward, backward and optimizer phases (where "
            f"the collectives run) are {format_pct(ceiling)} of rank 0's {ms(rank0.step_median_s)} "
            "median step, the figure used here"
        )
    if bound is not None:
        evidence.append(at_most(bound, "if the exposed communication disappeared"))
    buckets = _bucket_advice(run)
    if buckets.evidence:
        evidence.append(buckets.evidence)
    actions = (
        *buckets.actions,
        "accumulate gradients under model.no_sync(), one all-reduce per optimizer step (grad_accum)",
        f"more compute per byte sent: {_BATCH}",
        "on GPUs: NCCL over NVLink/InfiniBand, bf16 gradient compression (ddp_comm_hooks), FSDP",
    )
    up_to = "up to " if shown < net else ""
    title = f"Communication-bound: {up_to}{format_pct(shown)} of the step in collectives"
    figures = figures_of(
        w,
        window_slowdown=w.slowdown,
        exposed_share=exposed,
        straggler_wait_share=wait,
        net_share=net,
        phases_share=ceiling,
        share_used=shown,
        speedup_bound=bound,
    )
    return Recommendation(
        "comm_bound", severity_for(bound), title, tuple(evidence), actions, bound, figures=figures
    )


def straggler(run: RunData) -> Recommendation | None:
    """One rank's own work per step is well above the fastest rank's: the others wait for it."""
    found = _straggling(run)
    if found is None:
        return None
    ranks, slow, fast, (ratio_low, ratio, ratio_high) = found
    median = statistics.median(r.own_s for r in ranks)
    bound = slow.own_s / median if median > 0 else None
    others = [r for r in ranks if r.rank != slow.rank]
    excess = {
        p: slow.phase_median_s[p] - statistics.median(r.phase_median_s[p] for r in others)
        for p in slow.phase_median_s
        if p != "backward"
    }
    phase = max(excess, key=lambda p: excess[p])
    steps = ", ".join(f"rank {r.rank} {ms(r.step_median_s)}" for r in ranks)
    evidence = [
        f"rank {slow.rank} works {ms(slow.own_s)} per step, the fastest rank ({fast.rank}) {ms(fast.own_s)} "
        f"({ratio:.2f}x step by step, 95% interval {ratio_low:.2f}x to {ratio_high:.2f}x; "
        f"median steps: {steps})",
        f"rank {fast.rank} waits {ms(fast.wait_s)} per step in its backward pass (the all-reduce waits for "
        "the slowest rank)",
        f"rank {slow.rank}'s {phase} phase is {ms(excess[phase])} longer than the other ranks' median",
    ]
    if bound is not None:
        evidence.append(at_most(bound, f"if rank {slow.rank} worked as fast as the median rank"))
    actions = (
        f"find what rank {slow.rank} does that the others do not, starting with its {phase} phase (a slower "
        "disk, a larger shard, longer samples)",
        f"check rank {slow.rank}'s machine: autotune doctor, throttling, other processes on its CPU or GPU",
        "give every rank the same work per step (micro-batch, sequence lengths: DistributedSampler)",
    )
    title = f"Straggler: rank {slow.rank} works {ratio:.1f}x longer than rank {fast.rank}"
    figures = {
        "ranks": records_of(ranks),
        "slowest_rank": slow.rank,
        "own_ratio": ratio,
        "own_ratio_ci95": [ratio_low, ratio_high],
        "speedup_bound": bound,
    }
    return Recommendation(
        "straggler", severity_for(bound), title, tuple(evidence), actions, bound, figures=figures
    )


def step_outliers(run: RunData) -> Recommendation | None:
    """A few measured steps take far longer than the rest, and cost more than 5% of the run."""
    o = facts.step_outliers(run)
    if o is None or not o.steps or o.total_s <= o.excess_s:
        return None
    share = o.excess_s / o.total_s
    if share * 100 <= limit("step_outliers.excess"):
        return None
    bound = o.total_s / (o.total_s - o.excess_s)
    # the slowest 8, in step order: with many outliers, the ones that cost most are the ones shown
    slowest = sorted(zip(o.steps, o.durations_s, strict=True), key=lambda sd: -sd[1])[:8]
    shown = ", ".join(f"{s} ({ms(d)})" for s, d in sorted(slowest))
    more = f" and {len(o.steps) - 8} shorter ones" if len(o.steps) > 8 else ""
    evidence = [
        f"{len(o.steps)} of {o.measured_steps} measured steps took longer than {ms(o.threshold_s)} (median "
        f"{ms(o.median_s)} + {format_number(limit('step_outliers.sigma'), 6)}σ, σ = 1.4826 × MAD = "
        f"{ms(o.sigma_s)}): steps "
        f"{shown}{more}",
        f"they cost {format_number(o.excess_s)} s above the median step, {format_pct(share)} of the "
        "measured time",
    ]
    gaps = {b - a for a, b in zip(o.steps, o.steps[1:], strict=False)}
    if len(o.steps) >= 3 and len(gaps) == 1:
        evidence.append(f"they recur every {gaps.pop()} steps: periodic work")
    if any(s.eval_ns for s in run.steps if s.rank == 0 and s.kind == "measured"):
        evidence.append("evaluation inside a step is left out of its time here (it is the eval phase)")
    contended = o.contended_steps or ()
    if o.other_cores_outliers is not None and o.other_cores_rest is not None:
        evidence.append(
            f"other processes took {o.other_cores_outliers:.2f} cores during the slow steps, "
            f"{o.other_cores_rest:.2f} during the others ({len(contended)} of {len(o.steps)} slow steps "
            f"came while they took more than {format_number(limit('step_outliers.contention'), 6)} cores)"
        )
    evidence.append(at_most(bound, "if those steps took the median time"))
    if len(contended) * 2 >= len(o.steps) and contended:
        # Host contention: the machine's other work, not the training's. Reported, never pressing.
        title = (
            f"Step-time outliers: {len(o.steps)} slow steps cost {format_pct(share)}, "
            "most while other processes were busy (host contention)"
        )
        actions: tuple[str, ...] = (
            "other processes on this machine slowed those steps: measure on a machine with nothing else "
            "running (or pin the training to its own cores: taskset, cgroups) before acting on them",
        )
        figures = figures_of(o, speedup_bound=bound)
        return Recommendation("step_outliers", "low", title, tuple(evidence), actions, bound, figures=figures)
    actions = (
        "see what runs on those steps: checkpoint saves (torch.distributed.checkpoint.async_save), "
        "logging that syncs (.item()), the garbage collector (gc.freeze() after start-up)",
        "on a shared machine, other processes show the same way: compare with the host timeline",
    )
    title = f"Step-time outliers: {len(o.steps)} slow steps cost {format_pct(share)}"
    figures = figures_of(o, speedup_bound=bound)
    return Recommendation(
        "step_outliers", severity_for(bound), title, tuple(evidence), actions, bound, figures=figures
    )


def _grows(t: facts.MemoryTrend | None, bar_pct: float) -> bool:
    """Whether a memory line grows beyond ``bar_pct`` and keeps growing in its second half."""
    return (
        t is not None
        and t.growth_pct > bar_pct
        and t.second_half_ratio is not None
        and 100 * t.second_half_ratio > limit("memory_growth.steady")
    )


def memory_growth(run: RunData) -> Recommendation | None:
    """Memory in use grows steadily over the measured steps: a leak, not a warm-up allocation.

    On a CPU run the line is RSS, which also counts what the C allocator keeps after a free. Beside
    it, the bytes in live allocations at step ends (:func:`facts.heap_trend`) decide: growing too,
    it is a leak (HIGH, on that line); flat, the allocator keeps freed memory (LOW); unknown (no
    glibc readings), RSS alone is never more than LOW.
    """
    t = facts.memory_trend(run)
    if t is None:
        return None
    on_host = t.source.startswith("host")  # a CPU run: RSS, which the allocator grows too
    bar = limit("memory_growth.host_growth") if on_host else limit("memory_growth.growth")
    if not _grows(t, bar):
        return None
    heap = facts.heap_trend(run) if on_host else None
    if heap is not None and _grows(heap, bar):
        t, on_host = heap, False  # live allocations grow: a leak, whatever the allocator keeps
    steady = t.second_half_ratio or 0.0
    evidence = [
        f"{t.source} grows {gib(t.bytes_per_step)} per step over {t.steps} measured steps: "
        f"{gib(t.growth_bytes)}, +{t.growth_pct:.1f}% of the {gib(t.start_bytes)} at the first "
        f"(least-squares line through {t.samples} readings)",
        f"the second half of the steps grows at {100 * steady:.0f}% of the overall slope: still "
        "growing, not a warm-up allocation",
    ]
    if t.capacity_bytes and t.bytes_per_step > 0:
        left = max(0.0, (t.capacity_bytes - t.start_bytes - t.growth_bytes) / t.bytes_per_step)
        evidence.append(f"at this rate the {gib(t.capacity_bytes)} are full in about {left:,.0f} more steps")
    actions: tuple[str, ...] = (
        "find tensors kept across steps: losses.append(loss) keeps each step's graph; keep loss.item()",
        "metrics summed as tensors (total += loss), lists or caches that grow each step, retain_graph=True",
        "torch.cuda.memory._record_memory_history() / _dump_snapshot() show what holds GPU memory"
        if t.source.startswith("GPU")
        else "tracemalloc or memray show what holds host memory",
    )
    title = f"Memory growth: {gib(t.bytes_per_step)} more every step"
    severity = "high"
    if heap is not None and t is heap:
        evidence.append("the process's resident memory (RSS) grows with it")
    elif on_host and heap is not None:  # RSS grows, live allocations do not: the allocator keeps it
        severity = "low"
        title = f"Host memory (RSS) grows {gib(t.bytes_per_step)} every step, live allocations do not"
        evidence.append(
            f"{heap.source} stays at {gib(heap.start_bytes)} ({heap.growth_pct:+.1f}% over the same steps): "
            "nothing more is held across steps; the C allocator keeps memory that was freed"
        )
        actions = (
            "freed buffers of growing sizes between longer-lived allocations leave holes glibc cannot "
            "return: pad variable shapes (sequence lengths, last batches) to a few fixed sizes",
            "or run with jemalloc or tcmalloc (LD_PRELOAD), or call glibc's malloc_trim(0) between epochs; "
            "MALLOC_TRIM_THRESHOLD_=0 returns only the top of the heap",
        )
    elif on_host:  # RSS alone, the live bytes unknown: glibc's heap grows without any tensor held
        severity = "low"
        title = f"Host memory (RSS) grows {gib(t.bytes_per_step)} every step: not shown to be a leak"
        evidence.append(
            "RSS counts the C allocator's heap as well as live tensors, and glibc keeps freed memory: it "
            "grows with no tensor kept (2 of 4 identical profiles; never with MALLOC_TRIM_THRESHOLD_=0)"
        )
        actions = (
            "profile again with MALLOC_TRIM_THRESHOLD_=0: growth that stays is memory really held",
            *actions,
        )
    return Recommendation("memory_growth", severity, title, tuple(evidence), actions, figures=figures_of(t))


def throttling(run: RunData) -> Recommendation | None:
    """Power or thermal limits hold a GPU's clocks down in more than 10% of its readings."""
    hot = [
        t
        for t in facts.throttling(run)
        if t.samples >= MIN_GPU_SAMPLES and t.share * 100 > limit("throttling.share")
    ]
    if not hot:
        return None
    evidence, bounds = [], []
    for t in hot:
        reasons = ", ".join(f"{name} {format_pct(share)}" for name, share in sorted(t.reasons.items()))
        share = format_pct(t.share)
        line = f"GPU {t.index} ({t.name or 'GPU'}): {share} of {t.samples} readings report {reasons}"
        if t.sm_clock_mean_mhz and t.sm_clock_max_mhz:
            line += f"; SM clock {t.sm_clock_mean_mhz:.0f} MHz on average, {t.sm_clock_max_mhz} MHz at most"
            bounds.append(t.sm_clock_max_mhz / t.sm_clock_mean_mhz)
        evidence.append(line)
    bound = max(bounds) if bounds else None
    if bound is not None:
        evidence.append(at_most(bound, "at full clocks"))
    names = sorted({n for t in hot for n in t.reasons})
    hardware = any("thermal" in n or n in ("hw_slowdown", "hw_power_brake") for n in names)
    actions = (
        "thermal reasons: check airflow, fans, GPU temperatures (nvidia-smi -q -d TEMPERATURE,PERFORMANCE)",
        "sw_power_cap: compare the enforced and default power limits (nvidia-smi -q -d POWER)",
        "hw_slowdown, hw_power_brake: a hardware signal (power supply, external brake); ask the operator",
    )
    title = f"Throttling: {', '.join(names)} on {len(hot)} GPU(s)"
    figures = {"gpus": records_of(hot), "speedup_bound": bound}
    severity = "high" if hardware else "medium"
    return Recommendation("throttling", severity, title, tuple(evidence), actions, bound, figures=figures)
