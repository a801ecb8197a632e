"""Search space: validation messages, TOML parsing (good and bad files), grids, skopt round trips."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

import autotune
from autotune.search import Choice, Float, Int, Space

# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Int(64, 4), r"Int\(low=64, high=4\): inverted range"),
        (lambda: Int(4, 4), r"Int\(low=4, high=4\): empty range"),
        (lambda: Int(0, 64, log=True), r"a log scale needs low > 0"),
        (lambda: Int(3, 64, power_of_two=True), r"powers of two as bounds \(3 is not\)"),
        (lambda: Int(4, 48, power_of_two=True), r"\(48 is not\)"),
        (lambda: Int(1.5, 4), r"low and high must be integers"),
        (lambda: Int(True, 4), r"low and high must be integers"),
        (lambda: Float(1.0, 0.5), r"Float\(low=1.0, high=0.5\): inverted range"),
        (lambda: Float(0.5, 0.5), r"empty range"),
        (lambda: Float(0.0, 1.0, log=True), r"a log scale needs low > 0"),
        (lambda: Float(0.0, float("inf")), r"must be finite"),
        (lambda: Float("0", 1), r"must be numbers"),
        (lambda: Choice(), r"Choice\(\): needs at least one value"),
        (lambda: Choice("fp32", "bf16", "fp32"), r"duplicate choice 'fp32'"),
        (lambda: Choice(1, True), r"duplicate choice True \(equal to 1\)"),
        (lambda: Choice("a", [1, 2]), r"unsupported value \[1, 2\] \(list\)"),
        (lambda: Choice(float("nan")), r"unsupported value nan"),
        (lambda: Int(4, 64, arg="--batch_size"), r"must contain '\{value\}'"),
        (lambda: Int(4, 64, arg="--{name}={value}"), r"no other"),
        (lambda: Int(4, 64, env="BATCH SIZE"), r"environment variable name"),
        (lambda: Space(), r"at least one parameter"),
        (lambda: Space(batch_size=(4, 64)), r"parameter 'batch_size': unknown parameter type tuple"),
    ],
)
def test_invalid_parameters_raise_one_clear_message(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_parameters_are_frozen_and_typed():
    p = Int(8, 512, power_of_two=True, arg="--bs={value}")
    with pytest.raises(AttributeError):
        p.low = 2  # type: ignore[misc]
    assert p.values() == [8, 16, 32, 64, 128, 256, 512] and p.size == 7
    assert Float(1, 2).low == 1.0 and isinstance(Float(1, 2).low, float)
    assert Choice("a", "b").choices == ("a", "b")
    assert Int(4, 8).contains(5) and not Int(4, 8).contains(5.0) and not Int(4, 8).contains(True)
    assert not Int(8, 64, power_of_two=True).contains(24)
    assert Choice(1, "1").contains(1) and not Choice(1, "x").contains(True)


def test_delivery_args_and_environment():
    space = Space(
        batch_size=Int(4, 64, arg="--batch_size={value}", env="BS"),
        lr=Float(1e-4, 1e-2, arg="--lr {value}"),
        precision=Choice("fp32", "bf16", env="PRECISION"),
        layers=Int(1, 4),
    )
    params = {"batch_size": 16, "lr": 0.001, "precision": "bf16", "layers": 2}
    assert space.command_args(params) == ["--batch_size=16", "--lr", "0.001"]
    assert space.environ(params) == {"BS": "16", "PRECISION": "bf16"}
    # a value with spaces stays one argument: no shell, no re-splitting
    one = Space(name=Choice("a b", arg="--name={value}"))
    assert one.command_args({"name": "a b"}) == ["--name=a b"]


def test_lazy_exports_do_not_import_skopt_or_numpy():
    code = (
        "import sys, autotune; autotune.Space, autotune.Study, autotune.Int; "
        "print(sorted(m for m in ('skopt', 'numpy', 'scipy', 'sklearn') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    assert autotune.Space is Space


# --------------------------------------------------------------------------- TOML

GOOD_TOML = """
[space.batch_size]
type = "int"            # int | float | choice
low = 4
high = 64
log = true
arg = "--batch_size={value}"   # how an unmodified script receives it

[space.precision]
type = "choice"
choices = ["fp32", "bf16"]
env = "PRECISION"

[space.lr]
type = "float"
low = 1e-4
high = 0.1
log = true

[space.micro_batch]
type = "int"
low = 1
high = 32
power_of_two = true

[tune]
trials = 12   # other tables are ignored by the space
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "space.toml"
    path.write_text(text)
    return path


def test_toml_example_from_the_issue(tmp_path):
    space = Space.from_toml(write(tmp_path, GOOD_TOML))
    assert space.names == ("batch_size", "precision", "lr", "micro_batch")
    assert space["batch_size"] == Int(4, 64, log=True, arg="--batch_size={value}")
    assert space["precision"] == Choice("fp32", "bf16", env="PRECISION")
    assert space["lr"] == Float(1e-4, 0.1, log=True)
    assert space["micro_batch"] == Int(1, 32, power_of_two=True)
    # to_dict is the same tables: a round trip through JSON gives the same space
    assert Space.from_dict(json.loads(json.dumps(space.to_dict()))) == space


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[space.bs]\ntype = "int"\nlow = "4"\nhigh = 64\n',
            r"\[space.bs\]: key 'low' must be an integer, got string '4'",
        ),
        (
            '[space.bs]\ntype = "int"\nlow = 4.0\nhigh = 64\n',
            r"\[space.bs\]: key 'low' must be an integer, got float 4.0",
        ),
        ('[space.bs]\ntype = "int"\nlow = 4\n', r"\[space.bs\]: missing key 'high'"),
        (
            '[space.bs]\ntype = "int"\nlow = 64\nhigh = 4\n',
            r"\[space.bs\]: Int\(low=64, high=4\): inverted range",
        ),
        ('[space.bs]\ntype = "int"\nlow = 4\nhigh = 64\nlog = "yes"\n', r"key 'log' must be true or false"),
        (
            '[space.bs]\ntype = "int"\nlow = 4\nhigh = 64\nhgh = 9\n',
            r"\[space.bs\]: unknown key 'hgh' for type 'int'",
        ),
        ("[space.bs]\nlow = 4\nhigh = 64\n", r"\[space.bs\]: key 'type' must be .* \(missing\)"),
        ('[space.bs]\ntype = "integer"\n', r"\[space.bs\]: key 'type' .* \(got 'integer'\)"),
        (
            '[space.p]\ntype = "choice"\nchoices = []\n',
            r"\[space.p\]: key 'choices' must be a non-empty array",
        ),
        (
            '[space.p]\ntype = "choice"\nchoices = "fp32"\n',
            r"key 'choices' must be a non-empty array, got string",
        ),
        ('[space.p]\ntype = "choice"\nchoices = ["a", "a"]\n', r"\[space.p\]: Choice\('a', 'a'\): duplicate"),
        ('[space.p]\ntype = "choice"\nchoices = ["a"]\nenv = 3\n', r"key 'env' must be a string"),
        (
            '[space.lr]\ntype = "float"\nlow = 0\nhigh = 1\nlog = true\n',
            r"\[space.lr\]: .*log scale needs low > 0",
        ),
        ('[space.lr]\ntype = "float"\nlow = 0\nhigh = true\n', r"key 'high' must be a number, got boolean"),
        ("[space]\nbs = 4\n", r"\[space.bs\]: must be a table, got integer 4"),
        ('[space."batch-size"]\ntype = "int"\nlow = 1\nhigh = 2\n', r"must be a Python identifier"),
        ("[tune]\ntrials = 3\n", r"no \[space.NAME\] tables"),
        ("[space\n", r"not valid TOML"),
    ],
)
def test_bad_toml_names_file_table_and_key(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(ValueError, match=message) as info:
        Space.from_toml(path)
    assert str(info.value).startswith(str(path))


# --------------------------------------------------------------------------- grid, points, sampling


def test_grid_full_factorial_first_parameter_slowest():
    space = Space(b=Int(8, 64, power_of_two=True), p=Choice("fp32", "bf16"))
    grid = space.grid(4)
    assert grid == [{"b": b, "p": p} for b in (8, 16, 32, 64) for p in ("fp32", "bf16")]
    assert space.size == 8 and list(space.points()) == grid


def test_grid_spacing():
    assert Int(1, 100).grid(5) == [1, 26, 50, 75, 100]
    assert Int(1, 3).grid(5) == [1, 2, 3]  # never more points than values
    assert Int(1, 1024, log=True).grid(3) == [1, 32, 1024]
    assert Int(1, 1024, power_of_two=True).grid(3) == [1, 32, 1024]
    assert Float(0, 1).grid(3) == [0.0, 0.5, 1.0]
    assert Float(1e-4, 1e-2, log=True).grid(3) == pytest.approx([1e-4, 1e-3, 1e-2])
    assert Float(1e-4, 1e-2, log=True).grid(3)[-1] == 1e-2  # bounds exact
    assert Choice("a", "b", "c").grid(2) == ["a", "b", "c"]  # a grid never drops a choice
    with pytest.raises(ValueError, match="points_per_dim must be an integer >= 2"):
        Space(x=Int(1, 9)).grid(1)
    assert Space(x=Float(0, 1)).size is None
    with pytest.raises(ValueError, match="no finite list of points"):
        list(Space(x=Float(0, 1)).points())


def test_samples_stay_inside_and_follow_the_prior():
    space = Space(
        b=Int(4, 512, log=True),
        e=Int(8, 256, power_of_two=True),
        lr=Float(1e-5, 1e-1, log=True),
        p=Choice(1, "x"),
    )
    rng = random.Random(0)
    samples = [space.sample(rng) for _ in range(2000)]
    assert all(space.contains(s) for s in samples)
    # log-uniform: about half of the draws below the geometric middle sqrt(4 * 512) ~ 45
    below = sum(s["b"] <= 45 for s in samples) / len(samples)
    assert 0.4 < below < 0.6
    assert {s["e"] for s in samples} == {8, 16, 32, 64, 128, 256}


def test_skopt_round_trip():
    space = Space(
        b=Int(4, 512, log=True),
        e=Int(8, 256, power_of_two=True),
        lr=Float(1e-5, 1e-1, log=True),
        p=Choice("fp32", True),
    )
    dims = space.to_skopt()
    assert [d.name for d in dims] == ["b", "e", "lr", "p"]
    rng = random.Random(1)
    for _ in range(50):
        params = space.sample(rng)
        point = space.to_skopt_point(params)
        assert all(v in d for v, d in zip(point, dims, strict=True))
        back = space.from_skopt_point(point)
        assert back == params and [type(v) for v in back.values()] == [type(v) for v in params.values()]


def test_contains_and_names():
    space = Space(b=Int(4, 8), p=Choice("a", "b"))
    assert space.contains({"b": 4, "p": "a"})
    assert not space.contains({"b": 9, "p": "a"})
    assert not space.contains({"b": 4})
    with pytest.raises(ValueError, match=r"missing \['p'\], unknown \['q'\]"):
        space.check_names({"b": 4, "q": 1})
