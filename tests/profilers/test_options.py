"""The one table of profile options: ProfileOptions' checks, the CLI flags, the tuner's trial flags."""

from __future__ import annotations

import dataclasses
import math
import re

import pytest

from autotune.cli.main import build_parser
from profilers.runtime.options import PROFILE_OPTIONS, ProfileOptions, option_args


def profile_args(argv: list[str]) -> dict[str, object]:
    args = build_parser().parse_args(["profile", *argv, "train.py"])
    return {spec.field: getattr(args, spec.field) for spec in PROFILE_OPTIONS if spec.flag is not None}


def test_every_option_is_in_the_table_once():
    fields = [f.name for f in dataclasses.fields(ProfileOptions) if f.name != "command"]
    assert sorted(spec.field for spec in PROFILE_OPTIONS) == sorted(fields)
    flags = [spec.flag for spec in PROFILE_OPTIONS if spec.flag is not None]
    assert len(flags) == len(set(flags))


def test_the_cli_defaults_are_profile_options_defaults():
    parsed = profile_args([])
    for spec in PROFILE_OPTIONS:
        if spec.flag is not None and spec.kind != "path":
            assert parsed[spec.field] == spec.default, spec.field
    assert str(parsed["runs_root"]) == ProfileOptions().runs_root and parsed["run_dir"] is None


def test_what_the_tuner_passes_a_trial_parses_back_to_the_same_options(tmp_path):
    wanted = {
        "run_dir": tmp_path / "t",
        "warmup_steps": 5,
        "deep_profile": False,
        "count_flops": False,
        "quiet": True,
        "overwrite": True,
        "max_steps": 40,
        "stable_within": 0.03,
        "stop_below_samples_per_s": 1234.5,
        "min_measured_steps": 6,
        "stop_on_non_finite_loss": True,
        "sample_hz": 2.5,
    }
    parsed = profile_args(option_args(wanted))
    assert {k: parsed[k] for k in wanted} == wanted
    assert option_args({"warmup_steps": 3, "max_steps": None}) == []  # defaults need no flag
    with pytest.raises(ValueError, match="not profile options"):
        option_args({"warmup": 1})


@pytest.mark.parametrize(
    ("field", "bad", "flag_text"),
    [
        ("warmup_steps", -1, "-1"),
        ("profile_steps", 0, "0"),
        ("sample_hz", 2000.0, "2000"),
        ("stable_within", 0.0, "0"),
        ("stable_within", 1.5, "1.5"),
        ("stop_below_samples_per_s", -1.0, "-1"),
        ("stop_below_samples_per_s", math.nan, "nan"),
        ("min_measured_steps", 1, "1"),
        ("peak_tflops", 0.0, "0"),
    ],
)
def test_a_bad_value_is_refused_alike_from_python_and_from_the_command_line(field, bad, flag_text, capsys):
    spec = next(s for s in PROFILE_OPTIONS if s.field == field)
    with pytest.raises(ValueError, match=re.escape(f"{field} must be {spec.what}")) as info:
        ProfileOptions(**{field: bad}).validate()
    assert "\n" not in str(info.value)
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(["profile", spec.flag, flag_text, "train.py"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert f"expected an integer {spec.what}" in err or f"expected a number {spec.what}" in err
    assert len(err.splitlines()) == 1
