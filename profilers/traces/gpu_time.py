"""Where each rank's GPU time went, from a torch.profiler (Kineto) trace.

One pass over a trace's events (:func:`keep_events`, fed by :func:`profilers.traces.stream.stream_trace`
for a file) keeps only what the figures need: the GPU activities (as HTA, every complete event on
a stream: kernels, memcpy, memset, stream syncs, in any of Kineto's category spellings), the
runtime calls (CUDA, HIP, MTIA), and the host ops. From them :func:`rank_gpu_time` computes, for one rank:

- the temporal breakdown of Holistic Trace Analysis (HTA, ``get_temporal_breakdown``): over the
  span from the first GPU activity's start to the last one's end, **idle** is the time no activity
  runs, **compute** the union of compute kernels, **non-compute** the rest (communication kernels,
  memcpy, memset that no compute kernel covers); kernels are classified by name as HTA does
  (:func:`kernel_kind`);
- HTA's communication-computation overlap (``get_comm_comp_overlap``): the share of communication
  kernel time during which a compute kernel also runs (None without communication);
- as HTA, GPU activities launched after the last ``ProfilerStep#`` began are left out when the trace
  has two steps or more (the profiler can stop before that step's GPU work has run, so it may be
  cut);
- step times from the ``ProfilerStep#N`` ranges; top kernels and top operators (self host time);
  kernel time by kind; tensor-core share (by kernel name); GEMM kernel time by the dtype the trace
  recorded for the op that launched it (``record_shapes``); CPU-side launch evidence: runtime
  calls, the delay from a launch call to its kernel's start, kernels shorter than their launch.

Pure Python, no torch; memory grows with the kept events (a few tuples each), not the file.
"""

from __future__ import annotations

import functools
import math
import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from profilers.contract.lenient import read_fields, read_records
from profilers.traces.idle import IdleBreakdown, idle_breakdown
from profilers.traces.intervals import length, merge, overlap_merged

KIND_COMPUTE = "compute"
KIND_COMMUNICATION = "communication"
KIND_MEMORY = "memory"
KIND_OTHER = "other"
KINDS = (KIND_COMPUTE, KIND_COMMUNICATION, KIND_MEMORY, KIND_OTHER)

# HTA's classification (hta/utils/utils.py: NCCL_KERNEL_RE, MEMORY_KERNEL_RE, NCCL_COMPUTE_KERNEL_RE),
# the same regular expressions, so "compute" means what HTA means by it. RCCL names its kernels
# as NCCL does.
_COMM_RE = re.compile(r"^nccl.*Kernel")
_MEMORY_RE = re.compile(r"(^Memcpy)|(^Memset)|(^dma)")
_NOT_COMPUTE_RE = re.compile(r"(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)")

#: Substrings of the names of kernels that run on tensor cores (a heuristic: cuBLAS, cuDNN,
#: CUTLASS and flash-attention name their MMA kernels this way). The first group is
#: torch-tb-profiler's list (pytorch/kineto, tb_plugin/torch_tb_profiler/profiler/tensor_core.py,
#: from NVIDIA PyProf); the second adds Ampere/Hopper names: CUTLASS ``tensorop``, Hopper
#: ``wgmma`` and cuBLAS's ``nvjet`` GEMMs, flash-attention and ``fmha`` kernels, and ROCm's
#: matrix-core kernels (``mfma`` in hipBLASLt/Tensile names). A tensor-core kernel with none of
#: these in its name is missed, so the share is a lower bound.
TENSOR_CORE_MARKERS: tuple[str, ...] = (
    "h884", "s884", "h1688", "s1688", "c1688", "hmma", "i8816", "16816", "dgrad_1x1_stride_2x2",
    "first_layer_wgrad_kernel", "conv1x1", "conv2d_c1_k1", "direct_group", "xmma_",
    "tensorop", "wgmma", "nvjet", "flash_fwd", "flash_bwd", "fmha", "mfma",
)  # fmt: skip
#: cuBLAS/cuDNN ``xmma`` kernels that run on the CUDA cores name their FP32 FMA instruction
#: (``sm80_xmma_gemm_f32f32_f32f32_f32_..._ffma_...``, seen on an H200 for fp32 GEMMs and convolutions);
#: their tensor-core twins name the MMA shape and ``tf32``/``bf16``/``f16`` instead.
_CUDA_CORE_FMA = "_ffma_"
#: GEMM and convolution kernels by name: cuBLAS/cuBLASLt (``gemm``, ``nvjet``), cuDNN and CUTLASS
#: convolutions (``conv``, ``dgrad``, ``wgrad``, ``fprop``, ``scudnn``/``hcudnn``), NVIDIA's
#: ``xmma``, rocBLAS/Tensile (``Cijk_``), attention (``flash``, ``fmha``).
_GEMM_RE = re.compile(r"gemm|conv(?!ert)|dgrad|wgrad|fprop|xmma|nvjet|cijk_|[sh]cudnn|flash|fmha", re.I)
#: fp32 GEMM kernels that run on the CUDA cores, not tensor cores (cuBLAS ``sgemm``, cuDNN
#: ``scudnn``, templated ``<float`` GEMMs/convolutions without a tensor-op marker).
_FP32_GEMM_RE = re.compile(r"sgemm|scudnn|_ffma_|gemm.*<float|conv.*<float|dgrad.*<float|wgrad.*<float", re.I)
#: The ops whose kernels are GEMMs or convolutions, and whose recorded input dtype names the GEMM's.
GEMM_OPS = frozenset(
    (
        "aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::addbmm", "aten::_scaled_mm",
        "aten::cudnn_convolution", "aten::miopen_convolution", "aten::_convolution",
        "aten::convolution_backward", "aten::_scaled_dot_product_flash_attention",
        "aten::_scaled_dot_product_efficient_attention", "aten::_scaled_dot_product_cudnn_attention",
    )
)  # fmt: skip
#: torch's dtype names in a trace's ``Input type`` -> short names.
DTYPES = {
    "float": "fp32",
    "double": "fp64",
    "c10::Half": "fp16",
    "c10::BFloat16": "bf16",
    "c10::Float8_e4m3fn": "fp8",
    "c10::Float8_e5m2": "fp8",
}
#: Host-side categories: runtime/driver calls (CUDA, HIP under ``cuda_runtime``, MTIA, older
#: Kineto's ``Runtime``) and ops (``cpu_op``, ``record_function`` ranges, older ``Operator``).
_RUNTIME_CATEGORIES = frozenset(
    ("cuda_runtime", "cuda_driver", "Runtime", "mtia_runtime", "privateuse1_runtime")
)
_HOST_CATEGORIES = frozenset(("cpu_op", "user_annotation", "Operator"))
#: Never GPU activities, skipped before their arguments are looked at.
_SKIPPED_CATEGORIES = frozenset(("python_function", "gpu_user_annotation", "Trace", "ac2g", "fwdbwd"))
_NUMBERS = frozenset((int, float))
#: The Kineto trace schemaVersion this reader was written for.
KNOWN_SCHEMA = 1
_KERNEL = "kernel"
#: The range torch.profiler opens around each step of a scheduled window (``ProfilerStep#N``).
STEP_RANGE_PREFIX = "ProfilerStep#"
TOP = 15


@functools.lru_cache(maxsize=65536)
def classify(name: str) -> tuple[str, bool, bool, bool]:
    """(kind, on tensor cores, a GEMM/convolution, an fp32 GEMM on CUDA cores by name) of a kernel."""
    lower = name.lower()
    on_tc = any(m in lower for m in TENSOR_CORE_MARKERS) and _CUDA_CORE_FMA not in lower
    gemm = on_tc or bool(_GEMM_RE.search(name))
    return kernel_kind(name), on_tc, gemm, gemm and not on_tc and bool(_FP32_GEMM_RE.search(name))


def kernel_kind(name: str) -> str:
    """``communication``, ``memory``, ``compute`` or ``other``, by HTA's name rules."""
    if _COMM_RE.match(name):
        return KIND_COMMUNICATION
    if _MEMORY_RE.match(name):
        return KIND_MEMORY
    if not _NOT_COMPUTE_RE.match(name):
        return KIND_COMPUTE
    return KIND_OTHER


@dataclass(frozen=True, slots=True)
class KernelRow:
    """One kernel name's GPU time over the analysed span."""

    name: str
    kind: str
    count: int
    total_us: float
    mean_us: float
    share_pct: float  # of all GPU activity time (kernels, memcpy, memset summed)


@dataclass(frozen=True, slots=True)
class OpRow:
    """One host operator's time: self (without its children) and total, summed over its calls."""

    name: str
    count: int
    self_us: float
    total_us: float


@dataclass(frozen=True, slots=True)
class LaunchStats:
    """CPU-side launch evidence: how the host fed the GPU."""

    runtime_calls: int  # CUDA/HIP runtime and driver calls
    runtime_us: float  # their summed duration
    launches: int  # kernel launch calls (…LaunchKernel…, cudaGraphLaunch)
    launch_us_median: float | None  # duration of a launch call
    launch_delay_us_median: float | None  # launch call start -> its kernel's start
    short_kernels: int  # kernels shorter than the call that launched them
    short_kernels_pct: float | None  # of the kernels matched to their launch call
    #: Kernels launched and not yet finished when a kernel is launched (HTA's queue length, over
    #: all streams): about 0 means the GPU drains every launch at once, waiting for the host.
    queue_median: float | None = None
    queue_max: int | None = None


@dataclass(frozen=True, slots=True)
class RankGpuTime:
    """One rank's GPU time from its trace (µs; shares in % of ``kernel_time_us``)."""

    rank: int
    source: str  # the trace file
    device_name: str | None
    compute_capability: str | None  # "8.0"
    device_memory_bytes: int | None
    idle_pct: float | None
    compute_pct: float | None
    non_compute_pct: float | None
    comm_overlap_pct: float | None  # None without communication kernels
    kernel_time_us: float  # HTA's: first GPU activity's start to the last one's end
    idle_us: float
    compute_us: float
    non_compute_us: float
    busy_us: float  # union of every GPU activity
    comm_us: float  # union of communication kernels
    comm_exposed_us: float  # communication no compute kernel covers
    kernels: int  # GPU activities analysed (kernels, memcpy, memset)
    time_by_kind_us: dict[str, float]  # kind -> summed duration
    memcpy_us: dict[str, float]  # "HtoD", "DtoH", "DtoD", "Memset"… -> summed duration
    kernel_median_us: float | None  # kernels proper (not memcpy/memset)
    steps: int
    step_time_s_median: float | None
    step_times_s: tuple[float, ...]
    tensor_core_pct: float | None  # tensor-core kernels' share of compute time
    gemm_us: float  # GEMM/convolution kernels by name
    fp32_gemm_us: float  # of which fp32 on CUDA cores (by name, or by the op's recorded dtype)
    gemm_us_by_dtype: dict[str, float]  # the launching op's recorded input dtype -> kernel time
    launch: LaunchStats
    top_kernels: tuple[KernelRow, ...]
    top_ops: tuple[OpRow, ...]
    cpu_op_self_us: float  # self time of every host op (all threads)
    host_span_us: float  # first host event's start to the last one's end
    left_out: tuple[str, ...] = ()  # what the analysis could not use, one sentence each
    world_size: int | None = None
    backend: str | None = None
    idle_breakdown: IdleBreakdown | None = None  # why the GPU waited (profilers.traces.idle)

    @property
    def analysed_steps(self) -> int:
        """The steps the analysed GPU activities cover (0 for a trace that marks no steps).

        From 2 steps on, the last one is left out, as :func:`_analysed` leaves out its activities.
        """
        return self.steps - 1 if self.steps >= 2 else self.steps

    def kind_us(self, kind: str) -> float:
        """The summed duration of the kernels of ``kind`` (KIND_COMPUTE, KIND_MEMORY…); 0 when none ran."""
        return self.time_by_kind_us.get(kind, 0.0)

    def copy_us(self, *directions: str) -> float:
        """The summed duration of the copies in ``directions`` ("HtoD", "DtoH", "DtoD", "Memset"…)."""
        return sum(self.memcpy_us.get(d, 0.0) for d in directions)


#: A kept GPU activity: (start, end, name, correlation, external id, device, category, stream).
_Gpu = tuple[float, float, str, int, int, int, str, int]


@dataclass
class _Kept:
    """What one pass over a trace keeps (compact tuples, not the event dicts)."""

    gpu: list[_Gpu] = field(default_factory=list)
    # correlation -> (start, duration, name) of the runtime call that launched it
    runtime: dict[int, tuple[float, float, str]] = field(default_factory=dict)
    runtime_calls: int = 0
    runtime_us: float = 0.0
    # (start, end, name, thread) of host ops and runtime calls, for self times
    host: list[tuple[float, float, str, Any]] = field(default_factory=list)
    gemm_dtypes: dict[int, str] = field(default_factory=dict)  # external id -> dtype
    annotations: set[str] = field(default_factory=set)  # names of record_function ranges
    bad: Counter[str] = field(default_factory=Counter)


def keep_events(events: Iterable[dict[str, Any]], hta_rounding: bool = False) -> _Kept:
    """One pass: keep the GPU activities, runtime calls and host ops the figures need.

    ``hta_rounding`` rounds each fractional start up and end down to the µs, as HTA does to traces
    with ns-resolution timestamps (it shortens every activity by up to 1 µs, so it is off by
    default; the tests turn it on to check the definitions against HTA's figures exactly).
    """
    kept = _Kept()
    gpu, runtime, host, dtypes, bad = kept.gpu, kept.runtime, kept.host, kept.gemm_dtypes, kept.bad
    runtime_calls = 0
    runtime_us = 0.0
    base: Any = None
    for ev in events:
        cat = ev.get("cat")
        if ev.get("ph") != "X" or cat in _SKIPPED_CATEGORIES:
            continue
        host_side = cat in _HOST_CATEGORIES
        runtime_side = not host_side and cat in _RUNTIME_CATEGORIES
        args = ev.get("args")
        if not (host_side or runtime_side):
            stream = args.get("stream") if type(args) is dict else None
            if type(stream) is not int or stream < 0:  # as HTA: a GPU activity is on a stream
                continue
        ts: Any = ev.get("ts")
        dur: Any = ev.get("dur")
        if type(ts) not in _NUMBERS or type(dur) not in _NUMBERS:
            bad["events without a numeric ts/dur"] += 1
            continue
        if dur < 0:
            bad["events with a negative duration"] += 1
            continue
        if hta_rounding and (type(ts) is float or type(dur) is float):
            end = math.floor(ts + dur)
            ts = math.ceil(ts)
            dur = end - ts
        # µs since the epoch pass 10^15, where a double's step is 0.25 µs: times are kept from the
        # first event's, a difference that is exact, so each end is its start plus the exact duration.
        if base is None:
            base = ts
        ts = ts - base
        name = str(ev.get("name", ""))
        if host_side:
            host.append((ts, ts + dur, name, (ev.get("pid"), ev.get("tid"))))
            if cat == "user_annotation":
                kept.annotations.add(name)
            elif name in GEMM_OPS and type(args) is dict:
                types = args.get("Input type")
                if isinstance(types, list) and types and isinstance(types[0], str):
                    dtypes[args.get("External id", -1)] = DTYPES.get(types[0], types[0])
        elif runtime_side:
            runtime_calls += 1
            runtime_us += dur
            corr = args.get("correlation") if type(args) is dict else None
            if type(corr) is int:
                runtime[corr] = (ts, dur, name)
            host.append((ts, ts + dur, name, (ev.get("pid"), ev.get("tid"))))
        else:
            corr = args.get("correlation", -1)  # type: ignore[union-attr]
            kind = _KERNEL if str(cat).lower() == "kernel" else str(cat)
            gpu.append(
                (ts, ts + dur, name, corr if type(corr) is int else -1,
                 args.get("External id", -1), args.get("device", 0), kind,  # type: ignore[union-attr]
                 stream if type(stream) is int else -1)
            )  # fmt: skip
    kept.runtime_calls, kept.runtime_us = runtime_calls, runtime_us
    return kept


def _steps(host: list[tuple[float, float, str, Any]]) -> list[tuple[float, float]]:
    """The ``ProfilerStep#N`` ranges, by start (one per step number: the outermost)."""
    by_number: dict[str, tuple[float, float]] = {}
    for start, end, name, _ in host:
        if name.startswith(STEP_RANGE_PREFIX):
            prev = by_number.get(name)
            if prev is None or end - start > prev[1] - prev[0]:
                by_number[name] = (start, end)
    return sorted(by_number.values())


def _self_times(host: list[tuple[float, float, str, Any]]) -> dict[str, list[float]]:
    """Per host op name: [calls, self µs, total µs]; runtime calls are children, as in torch.

    Per thread, events sorted by start (the longer first at a tie, so a parent precedes its
    children); an event's direct children's durations come off its self time.
    """
    out: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
    threads: dict[Any, list[tuple[float, float, str, Any]]] = defaultdict(list)
    for event in host:
        threads[event[3]].append(event)
    for events in threads.values():
        events.sort(key=lambda e: (e[0], e[0] - e[1]))
        stack: list[list[Any]] = []  # [end, name, self]
        for start, end, name, _ in events:
            while stack and stack[-1][0] <= start:
                done = stack.pop()
                out[done[1]][1] += done[2]
            dur = end - start
            if stack and end <= stack[-1][0]:
                stack[-1][2] -= dur
            row = out[name]
            row[0] += 1
            row[2] += dur
            stack.append([end, name, dur])
        for done in stack:
            out[done[1]][1] += done[2]
    return out


@dataclass(frozen=True)
class _DeviceProps:
    """One of a Kineto trace's ``deviceProperties`` (its keys as Kineto writes them)."""

    id: int | None = None
    name: str | None = None
    totalGlobalMem: int | None = None  # Kineto's key
    computeMajor: int | None = None
    computeMinor: int | None = None

    @property
    def compute_capability(self) -> str | None:
        major, minor = self.computeMajor, self.computeMinor
        return None if major is None or minor is None else f"{major}.{minor}"


@dataclass(frozen=True)
class _DistributedInfo:
    """A Kineto trace's ``distributedInfo``: the rank that wrote it."""

    rank: int | None = None
    world_size: int | None = None
    backend: str | None = None


def _device(props: tuple[_DeviceProps, ...], index: int) -> _DeviceProps:
    """The properties of the device the rank's kernels ran on (the only one listed, else none)."""
    return next((p for p in props if p.id == index), props[0] if len(props) == 1 else _DeviceProps())


def _analysed(kept: _Kept, host_steps: list[tuple[float, float]]) -> tuple[list[_Gpu], str | None]:
    """The GPU activities HTA analyses: with 2 steps or more, those launched before the last one."""
    if len(host_steps) < 2:
        return kept.gpu, None
    cutoff = host_steps[-1][0]
    runtime = kept.runtime
    before = [g for g in kept.gpu if g[3] in runtime and runtime[g[3]][0] < cutoff]
    dropped = len(kept.gpu) - len(before)
    why = (
        f"{dropped:,} GPU activities launched in the last ProfilerStep or by no launch call in the "
        "trace (the profiler can stop before that step's GPU work has run; as HTA)"
    )
    return before, why if dropped else None


class _Temporal(NamedTuple):
    span: float
    busy: float
    compute: float
    comm: float
    overlap: float


def _temporal(gpu: list[_Gpu], kinds: list[str]) -> _Temporal:
    """HTA's temporal breakdown and communication overlap of the analysed activities."""
    merged_all = merge((g[0], g[1]) for g in gpu)
    comp = merge((g[0], g[1]) for g, k in zip(gpu, kinds, strict=True) if k == KIND_COMPUTE)
    comm = merge((g[0], g[1]) for g, k in zip(gpu, kinds, strict=True) if k == KIND_COMMUNICATION)
    span = merged_all[-1][1] - merged_all[0][0] if merged_all else 0.0
    return _Temporal(span, length(merged_all), length(comp), length(comm), overlap_merged(comp, comm))


@dataclass
class _Mix:
    """Per-activity sums: time by kind and name, copies, GEMMs, launches."""

    by_kind: dict[str, float] = field(default_factory=lambda: dict.fromkeys(KINDS, 0.0))
    memcpy: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    names: dict[str, list[float]] = field(default_factory=lambda: defaultdict(lambda: [0, 0.0]))
    gemm: float = 0.0
    fp32_gemm: float = 0.0
    tensor_core: float = 0.0
    by_dtype: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    kernel_durations: list[float] = field(default_factory=list)
    launch_delays: list[float] = field(default_factory=list)
    queue: list[tuple[float, float]] = field(default_factory=list)  # (launch call start, kernel end)
    short: int = 0
    matched: int = 0
    devices: Counter[int] = field(default_factory=Counter)


def _mix(gpu: list[_Gpu], kept: _Kept) -> _Mix:
    mix = _Mix()
    runtime, dtypes = kept.runtime, kept.gemm_dtypes
    for start, end, name, corr, ext, device, cat, _ in gpu:
        kind, on_tc, is_gemm, fp32_by_name = classify(name)
        dur = end - start
        mix.by_kind[kind] += dur
        row = mix.names[name]
        row[0] += 1
        row[1] += dur
        mix.devices[device] += 1
        if kind == KIND_MEMORY:
            mix.memcpy[name[:6] if name.startswith("Memset") else name[:11].replace("Memcpy ", "")] += dur
            continue
        if cat != "kernel":
            continue
        mix.kernel_durations.append(dur)
        call = runtime.get(corr)
        if call is not None:
            mix.matched += 1
            mix.launch_delays.append(start - call[0])
            mix.queue.append((call[0], end))
            mix.short += dur < call[1]
        if kind != KIND_COMPUTE or not is_gemm:
            continue
        mix.tensor_core += dur if on_tc else 0.0
        mix.gemm += dur
        dtype = dtypes.get(ext)
        if dtype is not None:
            mix.by_dtype[dtype] += dur
        if fp32_by_name or (dtype == "fp32" and not on_tc):
            mix.fp32_gemm += dur
    return mix


def _queue_lengths(queue: list[tuple[float, float]]) -> list[int]:
    """At each launch, how many kernels launched before it have not finished yet."""
    marks = sorted([(end, 0) for _, end in queue] + [(launch, 1) for launch, _ in queue])
    depth, out = 0, []
    for _, is_launch in marks:  # at a tie a kernel's end comes before a launch
        if is_launch:
            out.append(depth)
            depth += 1
        else:
            depth -= 1
    return out


def _launch_stats(kept: _Kept, mix: _Mix) -> LaunchStats:
    launches = [c[1] for c in kept.runtime.values() if "aunch" in c[2]]
    queue = _queue_lengths(mix.queue)
    return LaunchStats(
        runtime_calls=kept.runtime_calls,
        runtime_us=kept.runtime_us,
        launches=len(launches),
        launch_us_median=statistics.median(launches) if launches else None,
        launch_delay_us_median=statistics.median(mix.launch_delays) if mix.launch_delays else None,
        short_kernels=mix.short,
        short_kernels_pct=100.0 * mix.short / mix.matched if mix.matched else None,
        queue_median=statistics.median(queue) if queue else None,
        queue_max=max(queue) if queue else None,
    )


def _top_ops(kept: _Kept) -> list[OpRow]:
    """Host operators by self time (record_function ranges, steps and runtime calls left out)."""
    runtime_names = {call[2] for call in kept.runtime.values()}
    ops = [
        OpRow(name, int(n), s, t)
        for name, (n, s, t) in _self_times(kept.host).items()
        if name not in kept.annotations
        and name not in runtime_names
        and not name.startswith(STEP_RANGE_PREFIX)
    ]
    ops.sort(key=lambda r: -r.self_us)
    return ops


def rank_gpu_time(
    kept: _Kept, meta: dict[str, Any], source: str, rank_default: int = 0, top: int = TOP
) -> RankGpuTime:
    """The figures of one rank from what :func:`keep_events` kept and the trace's metadata.

    ``top`` is how many kernels and operators the tables keep (most time first).
    """
    left_out = [f"{n:,} {what}" for what, n in sorted(kept.bad.items())]
    schema = meta.get("schemaVersion")
    if type(schema) is int and schema > KNOWN_SCHEMA:
        left_out.append(
            f"the trace's schemaVersion {schema} is newer than the {KNOWN_SCHEMA} this tool knows: read as "
            f"version {KNOWN_SCHEMA}, events of kinds it does not know are not counted"
        )
    host_steps = _steps(kept.host)
    gpu, dropped = _analysed(kept, host_steps)
    if dropped:
        left_out.append(dropped)
    t = _temporal(gpu, [classify(g[2])[0] for g in gpu])
    idle = t.span - t.busy

    def pct(part: float) -> float | None:
        return 100.0 * part / t.span if t.span > 0 else None

    mix = _mix(gpu, kept)
    total = sum(mix.by_kind.values())
    top_kernels = tuple(
        KernelRow(name, kernel_kind(name), int(n), us, us / n, 100.0 * us / total if total else 0.0)
        for name, (n, us) in sorted(mix.names.items(), key=lambda kv: -kv[1][1])[:top]
    )
    ops = _top_ops(kept)
    props = read_records(_DeviceProps, meta.get("deviceProperties"))
    gpu_props = _device(props, mix.devices.most_common(1)[0][0] if mix.devices else 0)
    raw_dist = meta.get("distributedInfo")
    dist = _DistributedInfo(**read_fields(_DistributedInfo, raw_dist if isinstance(raw_dist, dict) else {}))
    host_span = max(h[1] for h in kept.host) - min(h[0] for h in kept.host) if kept.host else 0.0
    step_times = tuple((end - start) / 1e6 for start, end in host_steps)
    compute_sum = mix.by_kind[KIND_COMPUTE]
    return RankGpuTime(
        rank=rank_default if dist.rank is None else dist.rank,
        source=source,
        device_name=gpu_props.name,
        compute_capability=gpu_props.compute_capability,
        device_memory_bytes=gpu_props.totalGlobalMem,
        idle_pct=pct(idle),
        compute_pct=pct(t.compute),
        non_compute_pct=pct(t.span - idle - t.compute),
        comm_overlap_pct=100.0 * t.overlap / t.comm if t.comm > 0 else None,
        kernel_time_us=t.span,
        idle_us=idle,
        compute_us=t.compute,
        non_compute_us=t.span - idle - t.compute,
        busy_us=t.busy,
        comm_us=t.comm,
        comm_exposed_us=t.comm - t.overlap,
        kernels=len(gpu),
        time_by_kind_us=mix.by_kind,
        memcpy_us=dict(mix.memcpy),
        kernel_median_us=statistics.median(mix.kernel_durations) if mix.kernel_durations else None,
        steps=len(host_steps),
        step_time_s_median=statistics.median(step_times) if step_times else None,
        step_times_s=step_times,
        tensor_core_pct=100.0 * mix.tensor_core / compute_sum if compute_sum > 0 else None,
        gemm_us=mix.gemm,
        fp32_gemm_us=mix.fp32_gemm,
        gemm_us_by_dtype=dict(mix.by_dtype),
        launch=_launch_stats(kept, mix),
        top_kernels=top_kernels,
        top_ops=tuple(ops[:top]),
        cpu_op_self_us=sum(r.self_us for r in ops),
        host_span_us=host_span,
        left_out=tuple(left_out),
        world_size=dist.world_size,
        backend=dist.backend,
        idle_breakdown=idle_breakdown(
            [(g[0], g[1], g[2], g[3], g[7], g[6], classify(g[2])[0]) for g in gpu],
            kept.runtime,
            kept.host,
        ),
    )


__all__ = [
    "DTYPES",
    "GEMM_OPS",
    "KINDS",
    "KernelRow",
    "LaunchStats",
    "OpRow",
    "RankGpuTime",
    "keep_events",
    "kernel_kind",
    "rank_gpu_time",
]
