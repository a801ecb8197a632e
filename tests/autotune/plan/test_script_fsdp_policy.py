"""A script's plan: FSDP's low-precision rows as ``autotune.prepare`` runs them (its mixed-precision
policy, bf16 weights gathered), unless the model cannot run so, as prepare decides (BatchNorm)."""

from __future__ import annotations

from pathlib import Path

from autotune.plan.plan import UNMIXED
from autotune.plan.script import plan_script
from autotune.plan.step import POLICY_PARAM_DTYPE

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def _rows(result, layout):  # type: ignore[no-untyped-def]
    return {c.params.micro_batch: c for c in result.configs if c.params.layout == layout}


def test_a_scripts_fsdp_rows_run_fsdps_policy_and_its_ddp_rows_autocast():
    args = ["--batch", "8", "--width", "128", "--seq", "64"]
    result = plan_script(str(SCRIPTS / "plan_lm.py"), args, precisions=("bf16",), gpus_per_node=2,
                         gpus=("H100-SXM",))  # fmt: skip
    fsdp, ddp = _rows(result, "fsdp"), _rows(result, "ddp")
    assert fsdp and all(c.params.precision_policy == POLICY_PARAM_DTYPE for c in fsdp.values())
    assert all(c.params.precision_policy == "autocast" for c in ddp.values())
    for m in (2, 4):
        by, autocast = fsdp[m].memory_by_category, ddp[m].memory_by_category
        assert by["parameter_casts"] == 0 < autocast["parameter_casts"]  # gathered in bf16, no casts
        # fp32 master weights and Adam state, sharded over the 2 GPUs: half of DDP's each
        assert abs(by["optimizer_state"] / autocast["optimizer_state"] - 0.5) < 0.01
        assert abs(by["parameters"] / autocast["parameters"] - 0.5) < 0.01
        assert by["activations"] <= autocast["activations"]  # what autocast keeps in fp32 is bf16
    assert not any(n.startswith(UNMIXED) for n in result.notes)


def test_one_gpu_traces_no_policy_and_a_batchnorm_model_keeps_autocast_rows_with_the_reason():
    one = plan_script(str(SCRIPTS / "plan_cnn.py"), [], precisions=("bf16",), gpus=("H100-SXM",))
    assert not _rows(one, "fsdp") and not any(n.startswith(UNMIXED) for n in one.notes)
    two = plan_script(
        str(SCRIPTS / "plan_cnn.py"), [], precisions=("bf16",), gpus_per_node=2, gpus=("H100-SXM",)
    )
    fsdp = _rows(two, "fsdp")
    assert fsdp and all(c.params.precision_policy == "autocast" for c in fsdp.values())
    [note] = [n for n in two.notes if n.startswith(UNMIXED)]
    assert "BatchNorm" in note and "autocast" in note
