"""Every threshold the advice rules use, in one table, each with where its figure comes from.

Public rule sets the figures are taken from (checked against their source text):

- torch-tb-profiler, ``pytorch/kineto`` ``tb_plugin/torch_tb_profiler/profiler/data.py``
  (``RunProfileData.analyze``): DataLoader share > 5% ("set num_workers"), communication share >
  10%, GPU utilization (kernel-busy time over the step) < 50% ("increase batch size"), peak memory >
  90% of device memory, tensor-core-eligible work with no tensor-core kernel on compute
  capability ≥ 7.0 ("enable Automatic Mixed Precision").
- Amazon SageMaker Debugger profiler rules, ``awslabs/sagemaker-debugger-rulesconfig``
  ``smdebug_rulesconfig/profiler_rules/rules.py``: LowGPUUtilization (``threshold_p95=70``,
  ``threshold_p5=10``), StepOutlier (``stddev=3``), GPUMemoryIncrease (``increase=5`` %),
  BatchSize (``gpu_memory_threshold_p95=70``), LoadBalancing (``threshold=0.5``).
- Holistic Trace Analysis (HTA), ``facebookresearch/HolisticTraceAnalysis``
  ``docs/source/features/cuda_kernel_launch_stats.rst``: "the launch time on the CPU side is
  between 5-20 microseconds"; a kernel shorter than its launch is a short kernel.

Where a figure is this project's own choice, the source says "this project" and why. Besides the
firing thresholds, the ``MIN_*`` constants say how much data a rule needs before it is evaluated
at all (a rule without them lands in the report's "not checked" list).
"""

from __future__ import annotations

from autotune.advice.records import Threshold
from profilers.contract.study.verdict import APPLY_MIN_SPEEDUP

_TB = (
    "torch-tb-profiler (pytorch/kineto tb_plugin/torch_tb_profiler/profiler/data.py, RunProfileData.analyze)"
)
_SM = (
    "Amazon SageMaker Debugger "
    "(awslabs/sagemaker-debugger-rulesconfig smdebug_rulesconfig/profiler_rules/rules.py)"
)
_HTA = (
    "Holistic Trace Analysis (facebookresearch/HolisticTraceAnalysis "
    "docs/source/features/cuda_kernel_launch_stats.rst)"
)

#: Threshold key ("rule.condition") -> threshold. Keys are what the rules look figures up by.
BY_KEY: dict[str, Threshold] = {
    "input_bound.data_share": Threshold(
        "input_bound",
        "Input-bound",
        "data-wait share of the measured step time",
        ">",
        5.0,
        "%",
        f"{_TB}: dataloader_ratio > 0.05 recommends DataLoader num_workers",
    ),
    "input_bound.data_wait": Threshold(
        "input_bound",
        "Input-bound",
        "median data wait per step",
        ">",
        0.2,
        "ms",
        "this project: a DataLoader hands a ready batch over in about 0.1 ms (measured on this project's "
        "2-core CI machine: 0.1 ms single-process, 0.9 ms from 2 worker processes, a batch of 8×64 floats), "
        "so a shorter wait is not one that loader settings can remove",
    ),
    "low_gpu_util.p95": Threshold(
        "low_gpu_util",
        "Low GPU utilization",
        "95th percentile of NVML GPU utilization",
        "<",
        70.0,
        "%",
        f"{_SM}: LowGPUUtilization threshold_p95=70",
    ),
    "gpu_util_swings.p5": Threshold(
        "gpu_util_swings",
        "GPU utilization swings",
        "5th percentile of NVML GPU utilization (p95 ≥ 70%)",
        "<",
        10.0,
        "%",
        f"{_SM}: LowGPUUtilization threshold_p5=10 (fluctuation when p95 is above threshold_p95)",
    ),
    "host_bound.kernel_median": Threshold(
        "host_bound",
        "Host-bound (launch overhead)",
        "median GPU kernel duration",
        "<",
        10.0,
        "µs",
        f"{_HTA}: CPU-side launches take 5-20 µs, so kernels shorter than ~10 µs finish before the next "
        "launch is issued",
    ),
    "host_bound.gpu_busy": Threshold(
        "host_bound",
        "Host-bound (launch overhead)",
        "GPU kernel-busy share of the profiled window",
        "<",
        50.0,
        "%",
        f"{_TB}: gpu_utilization < 0.5 (kernel-busy time over step time) recommends a larger batch",
    ),
    "host_bound.cpu_ops": Threshold(
        "host_bound",
        "Host-bound (launch overhead)",
        "self CPU time of ops over the profiled window (GPU busy < 50%)",
        ">",
        90.0,
        "%",
        "this project: the host thread is busy issuing ops nearly all the time while the GPU waits",
    ),
    "precision_fp32.peak_ratio": Threshold(
        "precision_fp32",
        "fp32 on tensor-core GPU",
        "the GPU's reduced-precision peak over its fp32 peak",
        ">",
        1.0,
        "x",
        f"{_TB}: AMP recommendation on compute capability ≥ 7.0 (Volta and newer: tensor cores); peaks from "
        "profilers/hardware/peaks.py (NVIDIA datasheets)",
    ),
    "precision_no_tensor_cores.share": Threshold(
        "precision_no_tensor_cores",
        "Reduced precision without tensor cores",
        "tensor-core kernels' share of GPU kernel time in bf16/fp16",
        "<",
        1.0,
        "%",
        f"{_TB}: tc_used_ratio == 0 (no tensor-core kernel); this project allows 1% so one stray kernel "
        "does not hide it",
    ),
    "memory_high.peak": Threshold(
        "memory_high",
        "Memory nearly full",
        "peak device memory in use over device memory",
        ">",
        90.0,
        "%",
        f"{_TB}: peak_mem > total_mem * 0.9",
    ),
    "memory_low.peak": Threshold(
        "memory_low",
        "Memory mostly unused",
        "peak allocated device memory over device memory",
        "<",
        50.0,
        "%",
        f"this project: half the device is left for a larger micro-batch; {_SM} BatchSize flags "
        "gpu_memory_threshold_p95=70 together with low utilization",
    ),
    "comm_bound.share": Threshold(
        "comm_bound",
        "Communication-bound",
        "collective time over the profiled window",
        ">",
        10.0,
        "%",
        f"{_TB}: communication_ratio > 0.1",
    ),
    "straggler.ratio": Threshold(
        "straggler",
        "Straggling rank",
        "slowest rank's own step time over the fastest rank's (from a profile: the low end of its 95% "
        "interval over paired steps)",
        ">",
        1.2,
        "x",
        f"this project: the public rule sets compare ranks differently ({_SM} LoadBalancing: utilization "
        "histograms at distance 0.5); 1.2x keeps a busy CPU machine's jitter out",
    ),
    "step_outliers.sigma": Threshold(
        "step_outliers",
        "Step-time outliers",
        "measured step time above the median, in robust σ",
        ">",
        3.0,
        "σ",
        f"{_SM}: StepOutlier stddev=3 (σ here is 1.4826 × the median absolute deviation)",
    ),
    "step_outliers.excess": Threshold(
        "step_outliers",
        "Step-time outliers",
        "outlier steps' time above the median, over measured time",
        ">",
        5.0,
        "%",
        f"this project: {_SM} StepOutlier fires past n_outliers=10 on hundreds of steps; a profile has tens, "
        "so the rule asks instead that the outliers cost more than 5% of the run",
    ),
    "step_outliers.contention": Threshold(
        "step_outliers",
        "Step-time outliers",
        "CPU other processes took during an outlier step (host contention)",
        ">",
        0.5,
        "cores",
        "this project: half a core taken by other processes delays a CPU step's thread on a 2-core "
        "machine by up to a scheduler slice (several ms); its outliers then say more about the machine "
        "than about the training",
    ),
    "memory_growth.growth": Threshold(
        "memory_growth",
        "Memory growth (leak)",
        "growth over the measured steps of the memory at the first (line through the peaks of 8 slices)",
        ">",
        5.0,
        "%",
        f"{_SM}: GPUMemoryIncrease increase=5 (%; there of device memory between moving averages)",
    ),
    "memory_growth.host_growth": Threshold(
        "memory_growth",
        "Memory growth (leak)",
        "growth of a CPU run's resident memory (RSS) over the measured steps, of its level at the first",
        ">",
        15.0,
        "%",
        "this project: glibc's heap keeps growing over the first dozens of steps of a loop of 1 MiB "
        "tensors with nothing kept (2-6% over 80 steps of tests/scripts/advice_leak.py --no-leak, seen "
        "without the profiler too); keeping each step's graph grows it 28-34% over 40 steps",
    ),
    "memory_growth.steady": Threshold(
        "memory_growth",
        "Memory growth (leak)",
        "slope over the second half of the steps over the whole slope",
        ">",
        50.0,
        "%",
        "this project: a leak keeps growing; a warm-up allocation grows once and then stays flat",
    ),
    "throttling.share": Threshold(
        "throttling",
        "Power or thermal throttling",
        "GPU samples with a power or thermal clocks-event reason",
        ">",
        10.0,
        "%",
        "this project: NVML reports the reasons per reading; rarer than 1 in 10 is a transient",
    ),
    "apply_tuned.speedup": Threshold(
        "apply_tuned",
        "Apply the tuned configuration",
        "re-measured speedup of the best trial over the baseline (per core when the cores differ), "
        "its 95% interval above 1",
        ">",
        APPLY_MIN_SPEEDUP,
        "x",
        "this project: trials are measured to ±5% (autotune tune --stable-within 0.05)",
    ),
    "precision_study.tolerance": Threshold(
        "precision_study",
        "Precision evidence from the study",
        "loss drift of a bf16/fp16 trial from the fp32 baseline",
        ">",
        10.0,
        "%",
        "this project: autotune tune --loss-tolerance 0.1 marks such a trial diverged",
    ),
    "precision_study.pair_ratio": Threshold(
        "precision_study",
        "Precision evidence from the study",
        "reduced precision's throughput over fp32's at the same other settings: a single like-for-like "
        "pair is faster or slower beyond this; several pairs decide by the 95% interval of their "
        "geometric-mean ratio",
        ">",
        1.05,
        "x",
        "this project: trials are measured to ±5% (autotune tune --stable-within 0.05)",
    ),
    "host_bound.launch_delay": Threshold(
        "host_bound",
        "Host-bound (launch overhead)",
        "median delay from a kernel's launch call to its start, in a trace (GPU idle > 50%)",
        "<",
        50.0,
        "µs",
        f"this project: {_HTA} puts one launch at 5-20 µs; a kernel that starts within a few launch "
        "times of its call found no queued work ahead of it, so the GPU was waiting for the host",
    ),
    "launch_bound.short_kernels": Threshold(
        "launch_bound",
        "Launch-bound (short kernels)",
        "kernels shorter than the CPU call that launched them, in a trace (GPU idle > 20%)",
        ">",
        50.0,
        "%",
        f"{_HTA}: a kernel shorter than its launch is a short kernel; this project: over half of them, "
        "with the GPU idle a fifth of the time, means launches pace the GPU",
    ),
    "launch_bound.idle": Threshold(
        "launch_bound",
        "Launch-bound (short kernels)",
        "GPU idle share of the trace's GPU span",
        ">",
        20.0,
        "%",
        "this project: below a fifth idle, short kernels cost little",
    ),
    "precision_fp32.trace_share": Threshold(
        "precision_fp32",
        "fp32 on tensor-core GPU",
        "fp32 GEMM/convolution kernels on CUDA cores, share of compute-kernel time in a trace",
        ">",
        20.0,
        "%",
        f"{_TB}: AMP recommendation on compute capability ≥ 7.0; this project: a fifth of the compute "
        "time is where reduced precision pays more than it costs to try",
    ),
    "memcpy_heavy.share": Threshold(
        "memcpy_heavy",
        "Memory copies",
        "memcpy and memset kernel time (summed), share of the trace's GPU span",
        ">",
        10.0,
        "%",
        "this project: the same 10% as communication (torch-tb-profiler's communication_ratio > 0.1); "
        "copies are non-compute time as collectives are",
    ),
    "idle_sync.share": Threshold(
        "idle_sync",
        "The GPU waits on host syncs",
        "idle time of the busiest compute stream while the host sat in a synchronizing call",
        ">",
        10.0,
        "%",
        "this project: the idle breakdown is Holistic Trace Analysis's (get_idle_time_breakdown; "
        "facebookresearch/HolisticTraceAnalysis docs/source/features/idle_time_breakdown.rst), the "
        "share is this project's: a tenth of the waiting is worth naming the call that causes it",
    ),
    "idle_sync.span": Threshold(
        "idle_sync",
        "The GPU waits on host syncs",
        "that synchronized idle time, share of the GPU span",
        ">",
        2.0,
        "%",
        "this project: below 2% of the span the sync costs less than the run-to-run noise of a step",
    ),
    "oom_boundary.trials": Threshold(
        "oom_boundary",
        "Out-of-memory boundary",
        "trials that ran out of memory",
        ">",
        0.0,
        "trials",
        "this project: any out-of-memory trial bounds the batch",
    ),
}

#: The rules table, in report order.
THRESHOLDS: tuple[Threshold, ...] = tuple(BY_KEY.values())
#: Thresholds only the trace rules read (autotune/advice/rules_trace.py): a profile run's report
#: does not list them among the rules it checked.
TRACE_ONLY: frozenset[str] = frozenset(
    ("host_bound.launch_delay", "launch_bound.short_kernels", "launch_bound.idle",
     "precision_fp32.trace_share", "memcpy_heavy.share", "idle_sync.share", "idle_sync.span")
)  # fmt: skip
#: The thresholds the profile and study rules read.
RUN_THRESHOLDS: tuple[Threshold, ...] = tuple(t for k, t in BY_KEY.items() if k not in TRACE_ONLY)

#: Measured steps a step-time rule needs (outliers, stragglers per rank).
MIN_STEPS = 8
#: Memory readings during the measured steps the memory-growth rule needs.
MIN_MEMORY_SAMPLES = 6
#: GPU readings during the measured steps the utilization and throttling rules need.
MIN_GPU_SAMPLES = 5


def thresholds_for(rule: str) -> tuple[Threshold, ...]:
    """The thresholds of one rule id, in table order (empty for an unknown id)."""
    return tuple(t for t in THRESHOLDS if t.rule == rule)


def limit(key: str) -> float:
    """The value of the threshold ``key`` ("rule.condition"); KeyError for an unknown key."""
    return BY_KEY[key].value


#: Expected speedup (an upper bound, or measured) from which a recommendation is "high" or
#: "medium" severity; below both it is "low". This project: 30% more throughput is worth acting on
#: first, 10% is worth a look, less is within what other changes move.
SEVERITY_SPEEDUP: dict[str, float] = {"high": 1.3, "medium": 1.1}


def severity_for(speedup: float | None) -> str:
    """Severity of a recommendation that expects ``speedup`` (None: no estimate, "low")."""
    if speedup is not None and speedup >= SEVERITY_SPEEDUP["high"]:
        return "high"
    if speedup is not None and speedup >= SEVERITY_SPEEDUP["medium"]:
        return "medium"
    return "low"
