"""The memory a real step takes beyond its trace (kernel workspaces), measured on this CPU and fitted.

The reference is the CPU allocator's own running total during real steps (torch.profiler's
profile_memory): counts of bytes, not timings, so the same on a busy machine.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from autotune.demo.plan import demo_workload
from autotune.plan.calibrate import CpuCalibration
from autotune.plan.measure import batch_bytes, measured_step_peak_bytes, predicted_step_peak_bytes
from autotune.plan.plan import plan
from autotune.plan.step import trace_step
from autotune.plan.workspace import MemoryCalibration, calibrate_memory, config_label, fit_residuals
from profilers.contract.plan_doc import WorkspaceLine
from tests.autotune.plan.workloads import WORKLOADS, adamw

CNN = (*WORKLOADS["residual_cnn"][:3], adamw)
LSTM = (*WORKLOADS["lstm_lm"][:3], adamw)
GPT = demo_workload("gpt")[:4]


def _trace_error(workload: tuple, micro_batch: int, precision: str) -> float:  # type: ignore[type-arg]
    figures = trace_step(*workload, micro_batch, precision, False)
    traced = predicted_step_peak_bytes(figures, batch_bytes(workload[1], micro_batch))
    return traced / measured_step_peak_bytes(*workload, micro_batch, precision, False) - 1


@pytest.mark.slow
@pytest.mark.parametrize(
    ("workload", "fit_on", "held_out", "median_within", "worst_within"),
    [
        # a residual CNN with BatchNorm: oneDNN's workspaces grow with the batch, a line per setting
        (
            CNN,
            [(2, "fp32", False), (8, "fp32", False), (2, "bf16", False), (8, "bf16", False)],
            [(4, "fp32", False), (16, "fp32", False), (4, "bf16", False), (16, "bf16", False)],
            0.02,
            0.05,
        ),
        # an LSTM LM: the fused RNN's buffers for the backward (the trace takes torch's decomposition)
        (
            LSTM,
            [(2, "fp32", False), (8, "fp32", False), (32, "fp32", False)],
            [(4, "fp32", False), (16, "fp32", False)],
            0.03,
            0.05,
        ),
    ],
    ids=["residual_cnn", "lstm_lm"],
)
def test_measured_workspace_brings_held_out_configurations_close(workload, fit_on, held_out, median_within,
                                                                 worst_within):  # fmt: skip
    """Without it the trace misses 10-53% of these models' real peak; with the line fitted on
    other micro-batches the held-out ones come within a few percent (0.0% and 1-3% seen here)."""
    # the gap is there, at the largest held-out micro-batch of some setting: its size depends on the
    # CPU's kernels (residual CNN at 16: fp32 -6.4% and bf16 -34.5% on an AMD EPYC here, where other
    # machines gave fp32 below -8%)
    largest = max(mb for mb, _, _ in held_out)
    settings = sorted({p for mb, p, _ in held_out if mb == largest})
    assert min(_trace_error(workload, largest, p) for p in settings) < -0.08
    result = calibrate_memory(*workload, fit_on, held_out)
    errors = [p / m - 1 for _, p, m in result.held_out]
    assert len(errors) == len(held_out)
    assert result.held_out_median_error is not None and result.held_out_median_error < median_within, errors
    assert max(abs(e) for e in errors) < worst_within, errors


def test_where_the_trace_sees_everything_the_workspace_is_nothing():
    """The demo GPT's step is traced to the byte: the fitted lines stay within a few KiB of zero."""
    result = calibrate_memory(*GPT, [(2, "fp32", False), (8, "fp32", False)], [(4, "fp32", False)])
    assert abs(result.workspace_bytes("fp32", False, 16)) < 64 * 1024
    ((_, predicted, measured),) = result.held_out
    assert predicted == pytest.approx(measured, rel=0.005)


def test_a_line_per_setting_through_its_residuals():
    residuals = [((2, "fp32", False), 300.0), ((8, "fp32", False), 900.0), ((4, "bf16", True), 80.0)]
    lines = fit_residuals(residuals)
    assert lines[("fp32", False)] == pytest.approx((100.0, 100.0))
    assert lines[("bf16", True)] == pytest.approx((0.0, 20.0))  # one micro-batch: in proportion to it
    calibration = MemoryCalibration(lines, (), ())
    assert calibration.workspace_bytes("fp32", False, 16) == pytest.approx(1700.0)
    assert calibration.workspace_bytes("bf16", False, 16) == 0.0  # never measured: nothing added
    assert MemoryCalibration({("fp32", False): (-50.0, 1.0)}, (), ()).workspace_bytes("fp32", False, 4) == 0.0


def test_full_and_selective_checkpointing_keep_their_own_workspace():
    # both measured at the script's micro-batch of 8: one line each, not their mean
    residuals = [((8, "bf16", True), 800.0), ((8, "bf16", "selective"), 2400.0), ((8, "bf16", False), 4000.0)]
    calibration = MemoryCalibration(fit_residuals(residuals), (), ())
    assert calibration.workspace_bytes("bf16", True, 16) == pytest.approx(1600.0)
    assert calibration.workspace_bytes("bf16", "selective", 16) == pytest.approx(4800.0)
    lines = calibration.facts().workspace_lines  # sorted with bool and str modes side by side
    assert [line.activation_checkpointing for line in lines] == [False, True, "selective"]
    assert config_label((8, "bf16", "selective")) == "micro_batch=8 bf16 selective checkpointing"
    assert config_label((8, "bf16", True)) == "micro_batch=8 bf16 checkpointing"


def test_this_cpus_rows_carry_the_measured_workspace_and_gpus_do_not():
    memory = MemoryCalibration({("fp32", False): (1000.0, 100.0)}, ("micro_batch=2 fp32",), ())
    cpu = CpuCalibration(1e-11, 2e-11, 3e-11, 5e-6, fitted_on=("x",), held_out=(), memory=memory)
    bare = CpuCalibration(1e-11, 2e-11, 3e-11, 5e-6, fitted_on=("x",), held_out=())
    measured = plan(*GPT, global_batch=16, gpus=("L4",), precisions=("fp32",), cpu=cpu)
    traced = plan(*GPT, global_batch=16, gpus=("L4",), precisions=("fp32",), cpu=bare)

    def row(result, gpu):  # type: ignore[no-untyped-def]
        return next(c for c in result.configs if c.gpu == gpu and c.params.micro_batch == 4)

    with_it, without = row(measured, "this-cpu"), row(traced, "this-cpu")
    assert with_it.peak_memory_bytes - without.peak_memory_bytes == 1000 + 100 * 4
    assert with_it.memory_by_category["kernel_workspace"] == 1400
    assert row(measured, "L4").peak_memory_bytes == row(traced, "L4").peak_memory_bytes
    cpu = measured.calibration.cpu
    assert cpu is not None and cpu.memory is not None
    assert cpu.memory.workspace_lines == (WorkspaceLine("fp32", False, 1000.0, 100.0),)


@pytest.mark.slow
def test_a_scripts_workspace_measured_at_its_own_micro_batch_predicts_others():
    """``autotune plan SCRIPT --calibrate``: the script's step run once for real at its own
    micro-batch (16) gives the workspace per sample; at 8 and 32, against the script really run
    with those batches: the trace alone misses over half (the LSTM's fused kernel), with the
    workspace within 5% (-3.0% and 0.0% seen here)."""
    from autotune.plan.script import calibrate_script, run_child, trace_script

    script = str(Path(__file__).resolve().parents[2] / "scripts" / "plan_rnn.py")
    own = trace_script(script, ["--batch", "16"])
    memory = calibrate_script(script, ["--batch", "16"], {("as-is", False): own}).memory
    assert memory is not None and memory.fitted_on == ("micro_batch=16 fp32",)
    for batch in (8, 32):
        traced = trace_script(script, ["--batch", str(batch)]).step_new_peak_bytes
        measured = run_child(script, ["--batch", str(batch)], measure=True)["measured_step_peak_bytes"]
        assert traced / measured - 1 < -0.3
        predicted = traced + memory.workspace_bytes("fp32", False, batch)
        assert predicted == pytest.approx(measured, rel=0.05), batch


@pytest.mark.slow
def test_a_calibrated_script_plan_has_this_cpu_rows_with_the_workspace():
    from autotune.plan.script import plan_script

    script = str(Path(__file__).resolve().parents[2] / "scripts" / "plan_rnn.py")
    result = plan_script(script, ["--batch", "16"], calibrate=True, global_batch=32, gpus=("L4",))
    rows = {c.params.micro_batch: c for c in result.configs if c.gpu == "this-cpu"}
    assert sorted(rows) == [1, 2, 4, 8, 16, 32]
    assert result.calibration.cpu is not None and result.calibration.cpu.memory is not None
    line = result.calibration.cpu.memory.workspace_lines[0]
    assert rows[32].memory_by_category["kernel_workspace"] == round(32 * line.bytes_per_sample)
    assert all(c.step_time_s and c.step_time_s > 0 for c in rows.values())
    gpu = next(c for c in result.configs if c.gpu == "L4" and c.params.micro_batch == 32)
    assert "kernel_workspace" not in gpu.memory_by_category


def test_the_plan_says_what_this_cpus_rows_rest_on():
    """In the terminal, and in the Markdown and HTML documents' "how far to trust it"."""
    from autotune.cli.plan import plan_dict
    from autotune.report.plan_cells import cpu_notes, trust_notes
    from profilers.contract.plan_doc import PlanDocument

    memory = MemoryCalibration({("fp32", False): (0.0, 10.0)}, ("micro_batch=16 fp32",), ())
    probed = CpuCalibration(1e-11, 2e-11, 3e-11, 5e-6, fitted_on=("probe",), held_out=(), memory=memory)
    result = plan(*GPT, global_batch=16, gpus=("L4",), precisions=("fp32",), cpu=probed)
    doc = PlanDocument.parse(plan_dict(result))
    assert doc.cpu is not None
    lines = cpu_notes(doc.cpu, doc.cpu_memory)
    assert lines[0].startswith("This CPU: step times at the costs a short probe measured here")
    assert "measured at micro_batch=16 fp32; taken in proportion to the micro-batch, not checked" in lines[1]
    assert set(lines) <= set(trust_notes(doc))
    checked = MemoryCalibration({}, tuple(f"c{i}" for i in range(5)), (("micro_batch=4 fp32", 103.0, 100.0),))
    timed = CpuCalibration(
        1e-11, 2e-11, 3e-11, 5e-6, ("a", "b"), (("micro_batch=4 fp32", 0.011, 0.010),), checked
    )
    timed_plan = plan(*GPT, global_batch=16, gpus=("L4",), precisions=("fp32",), cpu=timed)
    doc = PlanDocument.parse(plan_dict(timed_plan))
    assert doc.cpu is not None
    lines = cpu_notes(doc.cpu, doc.cpu_memory)
    assert lines[0].startswith(
        "This CPU, calibrated on 2 timed configurations; on 1 others: median error 10.0%"
    )
    assert "measured at 5 configurations; on 1 others: median error 3.0%" in lines[1]
