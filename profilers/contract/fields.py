"""What every key of summary.json means: the one table the documentation's reference pages are made from.

The profile summary (``PROFILE_SUMMARY_FIELDS``) and a tuning study's summary
(``TUNE_SUMMARY_FIELDS``) are documented here, beside the schema, so that the documentation
site's reference pages (``docs/reference/``, filled in by ``scripts/docs_hooks.py``) cannot drift
from what the code writes: a test profiles a real loop and runs a real study and checks that every
key written is documented here, and every key documented here is written.

>>> from profilers.contract.fields import PROFILE_SUMMARY_FIELDS, documented_keys
>>> "throughput" in documented_keys(PROFILE_SUMMARY_FIELDS)
True
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FieldDoc:
    """One row of a reference table: the keys it documents (one or several) and their meaning."""

    keys: tuple[str, ...]
    meaning: str  # Markdown: `code` spans for other keys and values
    always: bool = True  # False: written only in some runs (the meaning says when)


def documented_keys(fields: tuple[FieldDoc, ...], always_only: bool = False) -> set[str]:
    """Every top-level key a table documents (``always_only``: those every run writes)."""
    return {key for doc in fields if doc.always or not always_only for key in doc.keys}


def markdown_table(fields: tuple[FieldDoc, ...]) -> str:
    """The table as Markdown, one row per :class:`FieldDoc` (what the reference pages show)."""
    lines = ["| key | meaning |", "|---|---|"]
    lines += ["| " + ", ".join(f"`{k}`" for k in doc.keys) + f" | {doc.meaning} |" for doc in fields]
    return "\n".join(lines)


#: The keys of a profile run's summary.json, in the order it writes them.
PROFILE_SUMMARY_FIELDS: tuple[FieldDoc, ...] = (
    FieldDoc(
        ("schema",),
        ("layout version (1)"),
    ),
    FieldDoc(
        ("name", "run_dir"),
        ("run name and directory"),
    ),
    FieldDoc(
        ("steps",),
        ("every step observed (on this rank)"),
    ),
    FieldDoc(
        ("measured_steps",),
        ("steps in the statistics (after warm-up, FLOP and trace steps)"),
    ),
    FieldDoc(
        ("step_time_s",),
        ("`median`, `p10`, `p90`, `mean` of measured steps (on CUDA, on the GPU's timeline)"),
    ),
    FieldDoc(
        ("throughput",),
        (
            "`samples_per_s`, `tokens_per_s` (null without token ids), `samples_per_s_ci95` "
            "([low, high], the 95% interval from the measured steps' times: Student's t on the "
            "mean step time; null below 2 steps); job-wide under torchrun (the ranks' sum over "
            "`ranks_per_replica`, the tensor × pipeline degree of a model-parallel job, else 1), "
            "plus `per_rank_samples_per_s` (every rank's, in rank order)"
        ),
    ),
    FieldDoc(
        ("phases",),
        (
            "`data`, `forward`, `backward`, `optimizer`, `eval`, `other`: fractions of measured "
            "step time, summing to 1 (`eval`: forwards under `no_grad`/`inference_mode` or of a "
            "model in eval mode, inside training)"
        ),
    ),
    FieldDoc(
        ("peak_memory_bytes",),
        (
            "CUDA: peak allocated (`torch.cuda.max_memory_allocated`, peak stats reset at the "
            "start); CPU: peak RSS growth over the session's start, from the host samples of the "
            "training's own steps (outside the FLOP-counting step and the torch.profiler window, "
            "whose buffers are the profiler's and are given back to the OS after it), less the "
            "profiler's own imports (`memory.profiler_rss_bytes`)"
        ),
    ),
    FieldDoc(
        ("memory",),
        (
            "details: `rss_start_bytes`, `rss_peak_bytes` (over the training's own steps: the "
            "FLOP-counting step and the torch.profiler window left out, and less "
            "`profiler_rss_bytes`), `rss_peak_growth_bytes`, `profiler_rss_bytes` (resident "
            "memory the profiler's own first use of FlopCounterMode and torch.profiler keeps: the"
            " modules they import, measured on a helper thread at that first use), "
            "`ru_maxrss_bytes` (the process's lifetime peak, everything included), and on CUDA "
            "`cuda_peak_allocated_bytes`, `cuda_peak_reserved_bytes`; with glibc, "
            "`heap_live_bytes_max` and `heap_live_envelope` (as `rss_envelope`): the bytes in "
            "live C allocations (`mallinfo2`: `uordblks + hblkhd`), read at step ends at most 10 "
            "times a second, which on a CPU is the memory the training holds across steps "
            "whatever the allocator keeps"
        ),
    ),
    FieldDoc(
        ("flops_per_step",),
        ("FLOPs of one step on one rank (`torch.utils.flop_counter.FlopCounterMode`), or null"),
    ),
    FieldDoc(
        ("mfu",),
        (
            "achieved FLOP/s over the device peak for the precision in use, or null when the peak"
            " is unknown (CPUs, unlisted GPUs)"
        ),
    ),
    FieldDoc(
        ("peak_flops_per_s",),
        ("the peak used for `mfu`"),
    ),
    FieldDoc(
        ("precision",),
        ("`fp32`, `tf32`, `bf16` or `fp16`, as seen at the step's first forward"),
    ),
    FieldDoc(
        ("device",),
        (
            "`kind` (`cpu` or `cuda`), `name`, `count`, `index` (the CUDA device of the model's "
            "input), `nvml_indexes` (the job's GPUs in NVML's numbering, matched by UUID; null "
            "when every GPU was sampled)"
        ),
    ),
    FieldDoc(
        ("gpu",),
        (
            "per job GPU from NVML (rates over the measured steps, `span` says `measured_steps`, "
            "or `session` when too few readings fell inside; peaks over the whole run): "
            "`util_pct` {mean, readings, p5, p50, p95, min, max}, `throttle` {readings, "
            "`power_thermal_share`, `reason_shares` by NVML reason name} (over the same readings "
            "as the rates), `mem_used_envelope` (the memory line's input: {readings, `span_ns`, "
            "`peaks` [[s, bytes]…]}, the peaks of 8 equal slices of the measured steps after the "
            "profiler's instruments finished), `mem_used_bytes_max`, `mem_total_bytes`, "
            "`process_mem_bytes_max`, `mem_busy_pct_mean`, `power_w_mean`, `power_w_max`, "
            "`energy_j` (over the measured steps, `duration_s` long), `run_energy_j` (the whole "
            "run), `sm_clock_mhz_mean`, `mem_clock_mhz_mean`, `temperature_c_max`, "
            "`throttle_reasons`, `pcie_rx_kbps_mean`, `pcie_tx_kbps_mean`; null without NVML"
        ),
    ),
    FieldDoc(
        ("host",),
        (
            "`cpu_util_pct_mean`, `process_cpu_pct_mean` (this process and its child processes, "
            "such as DataLoader workers), `rss_peak_bytes`, `host_mem_total_bytes`, "
            "`rss_envelope` (as `mem_used_envelope`, of this process's RSS)"
        ),
    ),
    FieldDoc(
        ("load",),
        (
            "how busy the machine was during the measured steps, in cores: `machine_cores`, "
            "`busy_cores` (every process), `own_cores` (the run's processes: under torchrun every"
            " rank on rank 0's host, `ranks` of them, with their DataLoader workers), "
            "`other_cores` (the rest: other processes' CPU; null when a rank's CPU is unknown), "
            '`samples`; null without host readings. The terminal\'s "Machine load" row, the '
            "report's overview and the dashboard say it in one line, and add that the figures are"
            " slower than the quiet machine gives when `other_cores` is above the load band (a "
            "quarter of the cores, at least half a core)"
        ),
    ),
    FieldDoc(
        ("rank",),
        ("the rank that wrote this summary (0; every rank keeps its own in the run store's `ranks` table)"),
    ),
    FieldDoc(
        ("ranks",),
        (
            "under torchrun: per rank `rank`, `steps`, `measured_steps`, `step_time_s`, "
            "`samples_per_s`, `tokens_per_s`, `peak_memory_bytes`; else null"
        ),
    ),
    FieldDoc(
        ("top_ops",),
        (
            "operators with the most self time in the deep-profile window: `name`, `device`, "
            "`calls`, `self_time_us`, `total_time_us`, `flops`"
        ),
    ),
    FieldDoc(
        ("profile_window",),
        (
            "the whole deep-profile window summed up (every op and kernel, not only `top_ops`), "
            "or null when no window ran: `steps` profiled, `wall_us`, `cpu_op_self_us` (self CPU "
            "time of synchronous ops, all threads), on CUDA `kernels`, `kernel_time_us`, "
            "`kernel_mean_us`, `kernel_median_us`, `kernel_busy_us` (union of kernel intervals), "
            "`tensor_core_fraction` (0-1 of kernel time, by kernel name), then "
            "`collective_calls`, `collective_time_us` (union of collective intervals), "
            "`collective_exposed_us` (CUDA: not overlapped by a compute kernel; else null), "
            "`collective_source` (`device_kernels` NCCL kernels, `backend_ranges` `gloo:`/`nccl:`"
            " ranges, `frontend_ops` `c10d::` ops, or null), `dataloader_us`, `dataloader_iter` "
            "(`_SingleProcessDataLoaderIter`, `_MultiProcessingDataLoaderIter` or null); times in"
            " µs"
        ),
    ),
    FieldDoc(
        ("trace_files",),
        ("trace paths relative to the run directory"),
    ),
    FieldDoc(
        ("memory_snapshot_files",),
        (
            "CUDA memory snapshots (`--memory-snapshot`) relative to the run directory: "
            "`memory/rank<R>.pickle` when the profiler window closed, `memory/rank<R>-oom.pickle` at an "
            "out-of-memory error; pytorch.org/memory_viz draws them, `autotune report FILE` explains them"
        ),
    ),
    FieldDoc(
        ("step_mode",),
        ("how steps were found: `optimizer`, `backward` or `explicit`"),
    ),
    FieldDoc(
        ("wall_time_s",),
        ("length of the profiled region"),
    ),
    FieldDoc(
        ("stopped_by_budget",),
        ("true when a step budget (`--max-steps` or an early stop) ended the script"),
    ),
    FieldDoc(
        ("stop_reason",),
        (
            "why a step budget ended the script: `max_steps`, `stable`, `below_threshold` or "
            "`non_finite_loss` (see step budgets above), `interrupted` for Ctrl-C, null when the "
            "script ended on its own"
        ),
    ),
    FieldDoc(
        ("outcome",),
        (
            "how the run ended: `finished` (the code returned), `stopped` (a step budget, a stop "
            "rule or Ctrl-C), `crashed` (it raised, or exited with a nonzero status) or "
            "`no_steps` (no training step was seen, whatever the ending); the terminal, the "
            "report and the dashboard say it first"
        ),
    ),
    FieldDoc(
        ("error",),
        (
            "with `crashed` (and `no_steps` when the script raised): `type`, `message` (first 500"
            " characters), `step` (the step in progress, 1-based) and `exit_code` for "
            "`SystemExit`; else null"
        ),
    ),
    FieldDoc(
        ("seen",),
        (
            "with `no_steps`: `optimizer_steps` and `model_forward` (whether a model's forward "
            "ran), what was seen instead of a step"
        ),
        always=False,
    ),
    FieldDoc(
        ("loss",),
        (
            "per-step training loss (rank 0's under torchrun): `first`, `last`, `min`, "
            "`last_mean` (mean of the last up to 5 measured steps with a loss), "
            "`non_finite_steps` (steps whose loss is NaN or infinite), `first_non_finite_step`, "
            "`per_step` (every step's loss in order, null where none was seen or it was not "
            "finite); null when no scalar loss was backpropagated. JSON has no NaN: a non-finite "
            "`first`, `last` or `last_mean` is null, and `non_finite_steps` tells"
        ),
    ),
    FieldDoc(
        ("warnings",),
        ("profiler faults reported during the run (training went on without that part)"),
    ),
    FieldDoc(
        ("model",),
        (
            "the step's model (the first module called for training): `class`, `parameters`, "
            "`trainable_parameters`, `parameter_bytes`, `gradient_bytes` (what data parallelism "
            "all-reduces each step), `ddp_bucket_cap_bytes` (a DistributedDataParallel model's "
            "bucket size, else null); null when no training forward was seen"
        ),
    ),
    FieldDoc(
        ("samples_from",),
        (
            'how samples per step were found: `{"override": N}` with `--samples-per-step`, else '
            "the model input that gave them: `module` (its class), `input` (`args[0]`, "
            "`input_ids`…), `batch_dim` (1 for time-major `[seq, batch]` inputs), `shape` (at the"
            " first step), `tokens` (whether it holds token ids); null when no input was seen"
        ),
    ),
    FieldDoc(
        ("params_used",),
        (
            "the tuning parameters and built-in knobs the code read (`autotune.param`, "
            "`autotune.prepare`, `autotune.batch_plan`) with the values it used: a trial's, else "
            "the code's own defaults; `{}` when it read none"
        ),
    ),
    FieldDoc(
        ("sampling",),
        (
            "where the devices were sampled: `where` maps each backend (`host`, `nvml`, `replay`) "
            "to `sampler process` (a process of its own, off the training's interpreter) or "
            "`training process` (the recorder thread: `AUTOTUNE_SAMPLER=thread`, a backend the "
            "sampler process could not build with the same devices, or one it handed back when it "
            "died); `notes` says why, and what was lost; null without sampling"
        ),
    ),
)

#: The keys of a tuning study's summary.json.
TUNE_SUMMARY_FIELDS: tuple[FieldDoc, ...] = (
    FieldDoc(("schema",), "layout version of the tuning summary (1)"),
    FieldDoc(
        ("kind",),
        ("`tune`"),
    ),
    FieldDoc(("run_dir",), "the study's directory, as given to the tuner"),
    FieldDoc(
        ("command",),
        ("the script and its arguments"),
    ),
    FieldDoc(
        ("objective", "metric"),
        (
            "`throughput`/`cost`/`energy` and its metric: `samples_per_s`, "
            "`usd_per_million_samples`, `joules_per_sample`"
        ),
    ),
    FieldDoc(
        ("direction",),
        ("`maximize` or `minimize`"),
    ),
    FieldDoc(
        ("price_per_gpu_hour",),
        ("the price given, or null"),
    ),
    FieldDoc(
        ("memory_budget_bytes",),
        ("`--memory-budget` in bytes, or null"),
    ),
    FieldDoc(
        ("loss_tolerance",),
        (
            "`--loss-tolerance`: how far (a fraction) a reduced-precision trial's loss may drift "
            "from the fp32 baseline's"
        ),
    ),
    FieldDoc(
        ("searcher", "seed"),
        ("the search"),
    ),
    FieldDoc(
        ("space",),
        ("the search space as its TOML tables"),
    ),
    FieldDoc(
        ("n_trials", "trials_run"),
        ("the trials asked for, and those that ran (skipped ones are not)"),
    ),
    FieldDoc(
        ("status_counts",),
        ("trials per status"),
    ),
    FieldDoc(
        ("baseline",),
        ("trial 0, the script's own defaults (a trial entry)"),
    ),
    FieldDoc(
        ("best",),
        (
            "the best trial (a trial entry; null when none can be named, as with `no_effect`) with "
            "`cost_saving_vs_baseline` (1 − its cost"
            " over the baseline's, with a price), then from the re-measurements: "
            "`speedup_confirmation_rounds` (rounds with both runs ok), `speedup_ratios` (best "
            "over baseline, per round), `speedup_geomean`, `speedup_ci95` ([low, high], 2 rounds "
            "or more, else null) and `confirmed` (true when the low end is above 1)"
        ),
    ),
    FieldDoc(
        ("confirm_rounds",),
        ("`--confirm-rounds`"),
    ),
    FieldDoc(
        ("preset", "preset_per_rank"),
        (
            "`--preset` (`hf`, `lightning`, `torchtitan`) or null, and the samples per rank per "
            "optimizer step its baseline measured, which every trial keeps (null without a preset)"
        ),
    ),
    FieldDoc(
        ("confirmations",),
        (
            "the re-measurements of the best trial: `best_id`, `round`, `role` (`baseline` or "
            "`best`), `status`, `samples_per_s`, `samples_per_s_ci95`, `other_load_cores`, "
            "`duration_s`, `run_dir`, `error`, `started_at`, `ended_at`, `load_cores` and where it ran "
            "(`executor`, `node`, `devices`)"
        ),
    ),
    FieldDoc(
        ("pareto",),
        (
            "with `--multi-objective`: ids of the trials no other beats on throughput, peak "
            "memory and cost at once; else null"
        ),
    ),
    FieldDoc(
        ("stopped",),
        ("why the study stopped before its trials ran, or null"),
    ),
    FieldDoc(
        ("verdict",),
        (
            "the study's one verdict (above): `status`, `speedup` (the headline figure), "
            "`speedup_ci95`, `search_speedup`, `rounds`, `search_load_cores`, "
            "`confirm_load_cores`, `load_band_cores`, `cores_ratio`, `per_core_speedup`, "
            "`recommend`, `headline` (the sentence every output prints), `firmer` (what to run "
            "for a firmer answer), `search_ci95` (the search's ratio's interval across processes) and "
            "`action` (`apply`, `keep` or `measure again`)"
        ),
    ),
    FieldDoc(
        ("machine_cores", "threads"),
        (
            "the machine's cores, and `threads_per_rank` (every trial's) with the `device_kind` "
            "the baseline ran on"
        ),
    ),
    FieldDoc(
        ("search_prior",),
        (
            "null with `--no-plan-prior`; else `note` (`plan prior: this CPU's probed costs`, "
            "`plan prior: H100-SXM`, or why there is none, also printed once), `used` (false when"
            " no prior could be made, e.g. none of the configurations could be traced), "
            "`predicted` (the configurations the search scored, best predicted first, at most "
            "100: `params`, `predicted` in the objective's unit, scaled to the baseline's "
            "measurement) and `predicted_vs_measured` (`trial`, `predicted`, `measured` of each "
            "trial that finished ok)"
        ),
        always=False,
    ),
    FieldDoc(
        ("trials",),
        (
            "every trial: `id`, `baseline`, `params`, `status`, `objective`, `throughput` "
            "(samples/s), `tokens_per_s`, `peak_memory_bytes`, `step_time_s`, "
            "`usd_per_million_samples`, `joules_per_sample`, `world_size`, `duration_s`, "
            "`device_hours` and `cost_usd` (what running it cost the study: its wall time on its "
            "devices, at the bill's price; 0 for a skipped trial), "
            "`stop_reason`, `stop_floor_samples_per_s`, `stop_rule` and `stop_best_id` (a trial stopped "
            "early as losing: the floor its throughput's upper bound fell below, `spread` when set from "
            "trial `stop_best_id`'s lower bound less the spread between processes, `share` when set as "
            "`--early-stop` × its value before that spread was measured), `throughput_ci95` (its 95% "
            "interval), `stable`, `other_load_cores` "
            "(other processes' CPU while it measured, in cores), `load_cores` (the cores that figure is "
            "over: the trial's slot when `--parallel` pinned it, else the machine's), `starved_share` "
            "(the share of its measured "
            "steps it ran short of CPU: no idle core, its own CPU below 3/4 of what its threads could "
            "use; over half of them makes the trial `busy`: measured again once the machine is calmer, "
            "else left out), `busy_before` (the first run's starved share when it ran again), "
            "`threads_per_rank`, `precision` (what"
            " the profiler saw the model run in), `params_used`, `run_dir` (the trial's profile "
            "run, relative to the study's directory: `trials/trial-0005`; studies written before "
            "stored the path as given to the tuner, and are still read), `error`; and where it ran: "
            "`executor` (`local` or `ray`), `node`, `devices` (`cuda:N` or `cpu:N` slots), `started_at`, "
            "`ended_at` (Unix seconds); and `speedup_vs_baseline` (its throughput over the nearest "
            "anchor's, as the search measured it), `speedup_vs_baseline_ci95` (its 95% interval with "
            "the spread between the baseline's processes; null with one) and `anchor` (that anchor's "
            "index, 0 for the baseline trial)"
        ),
    ),
    FieldDoc(
        ("no_effect",),
        (
            "true when the study stopped because what it tunes changed nothing (a parameter the "
            "script never reads): `best` is then null and the verdict is `no_effect`"
        ),
    ),
    FieldDoc(
        ("anchor_every", "anchors"),
        (
            "`--anchor-every`, and the baseline's configuration run again during the search, each "
            "in the slot of the trial it preceded: `best_id` (that trial), `round` (the anchor's index"
            " from 1), `role` (`anchor`), `status`, `samples_per_s`, `samples_per_s_ci95`, "
            "`other_load_cores`, `duration_s`, `run_dir`, `error`, `started_at`, `ended_at`, "
            "`executor`, `node`, `devices`, `load_cores`"
        ),
    ),
    FieldDoc(
        ("process_spread",),
        (
            "the baseline's throughput over its separate processes (the baseline trial and the "
            "anchors that finished ok): `processes`, `low_samples_per_s`, `high_samples_per_s`, "
            "`log_sd` (sd of their log throughputs; null with one) and `beyond_own_intervals` (two "
            "of them disagree beyond their own 95% intervals: the machine's speed moved)"
        ),
    ),
    FieldDoc(
        ("usage_hours_per_day", "bill"),
        (
            "`--usage-hours-per-day` (null: not said), and what the study cost and when it pays "
            "back: `device_hours` (every trial, anchor and re-measurement, each its wall time on "
            "its devices), `trials_device_hours`, `remeasure_device_hours`, `processes`, "
            "`processes_without_time`, `price_per_gpu_hour` and `price_source` (`--price-per-gpu-hour`, "
            "else the built-in table's price of the baseline's GPU; null on a CPU), `usd`, "
            "`saving_share` (the share of the baseline's device-time per sample the best saves: "
            "1 − devices ratio / the verdict's speedup; below 0 when it costs more, faster only on "
            "more devices; null unless the verdict applies it), "
            "`saving_device_hours_per_hour` (per hour of training), `saving_usd_per_day` (at the "
            "usage, 24 h when not said), `payback_training_hours`, `payback_days` (at the usage "
            "said) and `pays_back_in_month`"
        ),
    ),
    FieldDoc(
        ("parallel", "executor"),
        (
            "trials of the search that could run at once (as the study settled it: never more than "
            "the CPU's cores), and `local` or `ray`"
        ),
    ),
)
