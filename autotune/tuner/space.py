"""The search space: ``Int``, ``Float``, ``Choice`` parameters and the ``Space`` that names them.

Declared in Python (``Space(batch_size=Int(4, 512, log=True), precision=Choice("fp32", "bf16"))``)
or read from a TOML file with ``Space.from_toml`` (``[space.NAME]`` tables, see ``from_dict``).
Each parameter may also say how an unmodified script receives it: ``arg`` (a command-line template
such as ``"--batch_size={value}"``) and/or ``env`` (an environment variable name).

Pure Python: scikit-optimize is imported only inside ``to_skopt``.
"""

from __future__ import annotations

import itertools
import math
import random
import re
import string
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ChoiceValue = str | int | float | bool
Value = int | float | str | bool

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _check_delivery(arg: str | None, env: str | None) -> None:
    """Validate an ``arg`` template and an ``env`` name (both optional)."""
    if arg is not None:
        if not isinstance(arg, str) or not arg.strip():
            raise ValueError(f"arg must be a non-empty template string such as '--x={{value}}', got {arg!r}")
        try:
            fields = [f for _, f, _, _ in string.Formatter().parse(arg) if f is not None]
        except ValueError as exc:
            raise ValueError(f"arg template {arg!r} is not a valid format string: {exc}") from None
        if not fields or any(f != "value" for f in fields):
            raise ValueError(f"arg template {arg!r} must contain '{{value}}' and no other '{{...}}' field")
    if env is not None and (not isinstance(env, str) or not _ENV_NAME.match(env)):
        raise ValueError(f"env must be an environment variable name like 'BATCH_SIZE', got {env!r}")


def _is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_number(x: object) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def _is_power_of_two(n: int) -> bool:
    return n >= 1 and n & (n - 1) == 0


def _check_range(where: str, low: float, high: float, log: object) -> None:
    """The checks an Int and a Float share: a non-empty, non-inverted range; log needs low > 0."""
    if not isinstance(log, bool):
        raise ValueError(f"{where}: log must be True or False")
    if low >= high:
        kind = "inverted" if low > high else "empty"
        raise ValueError(f"{where}: {kind} range, low must be below high (a fixed value is no search)")
    if log and low <= 0:
        raise ValueError(f"{where}: a log scale needs low > 0")


@dataclass(frozen=True)
class Int:
    """An integer in ``[low, high]`` (both inclusive).

    ``log``: sampled and modelled on a log scale (needs ``low > 0``). ``power_of_two``: only powers
    of two between the bounds, which must themselves be powers of two (``Int(8, 512,
    power_of_two=True)`` is 8, 16, ..., 512).
    """

    low: int
    high: int
    log: bool = False
    power_of_two: bool = False
    arg: str | None = field(default=None, kw_only=True)
    env: str | None = field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        where = f"Int(low={self.low!r}, high={self.high!r})"
        if not (_is_int(self.low) and _is_int(self.high)):
            raise ValueError(f"{where}: low and high must be integers")
        _check_range(where, self.low, self.high, self.log)
        if not isinstance(self.power_of_two, bool):
            raise ValueError(f"{where}: power_of_two must be True or False")
        bad = [b for b in (self.low, self.high) if self.power_of_two and not _is_power_of_two(b)]
        if bad:
            raise ValueError(f"{where}: power_of_two needs powers of two as bounds ({bad[0]} is not)")
        _check_delivery(self.arg, self.env)

    def values(self) -> list[int]:
        """Every value of the parameter, in increasing order."""
        if self.power_of_two:
            return [2**e for e in range(self.low.bit_length() - 1, self.high.bit_length())]
        return list(range(self.low, self.high + 1))

    @property
    def size(self) -> int:
        """Number of distinct values."""
        if self.power_of_two:
            return self.high.bit_length() - self.low.bit_length() + 1
        return self.high - self.low + 1

    def contains(self, value: object) -> bool:
        """Whether ``value`` is an integer this parameter can take."""
        if not _is_int(value) or not self.low <= value <= self.high:  # type: ignore[operator]
            return False
        return not self.power_of_two or _is_power_of_two(value)  # type: ignore[arg-type]

    def sample(self, rng: random.Random) -> int:
        """One value drawn from the prior (uniform, or log-uniform when ``log``/``power_of_two``)."""
        if self.power_of_two:
            return 2 ** rng.randint(self.low.bit_length() - 1, self.high.bit_length() - 1)
        if self.log:
            drawn = round(math.exp(rng.uniform(math.log(self.low), math.log(self.high))))
            return min(max(drawn, self.low), self.high)
        return rng.randint(self.low, self.high)

    def grid(self, points: int) -> list[int]:
        """At most ``points`` values spread over the range (log-spaced when ``log``)."""
        if self.size <= points:
            return self.values()
        if self.power_of_two:
            values = self.values()
            return [values[round(i * (len(values) - 1) / (points - 1))] for i in range(points)]
        if self.log:
            lo, hi = math.log(self.low), math.log(self.high)
            raw = [round(math.exp(lo + i * (hi - lo) / (points - 1))) for i in range(points)]
        else:
            raw = [round(self.low + i * (self.high - self.low) / (points - 1)) for i in range(points)]
        return sorted(set(raw))


@dataclass(frozen=True)
class Float:
    """A real number in ``[low, high]``; ``log`` samples and models it on a log scale (``low > 0``)."""

    low: float
    high: float
    log: bool = False
    arg: str | None = field(default=None, kw_only=True)
    env: str | None = field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        where = f"Float(low={self.low!r}, high={self.high!r})"
        if not (_is_number(self.low) and _is_number(self.high)):
            raise ValueError(f"{where}: low and high must be numbers")
        if not (math.isfinite(self.low) and math.isfinite(self.high)):
            raise ValueError(f"{where}: low and high must be finite")
        _check_range(where, self.low, self.high, self.log)
        _check_delivery(self.arg, self.env)
        object.__setattr__(self, "low", float(self.low))
        object.__setattr__(self, "high", float(self.high))

    @property
    def size(self) -> None:
        """A float range has no finite number of values."""
        return None

    def contains(self, value: object) -> bool:
        """Whether ``value`` is a number within the bounds."""
        return _is_number(value) and self.low <= value <= self.high  # type: ignore[operator]

    def sample(self, rng: random.Random) -> float:
        """One value drawn from the prior (uniform, or log-uniform when ``log``)."""
        if self.log:
            drawn = math.exp(rng.uniform(math.log(self.low), math.log(self.high)))
            return min(max(drawn, self.low), self.high)
        return rng.uniform(self.low, self.high)

    def grid(self, points: int) -> list[float]:
        """``points`` values evenly spaced over the range (geometrically when ``log``)."""
        if self.log:
            lo, hi = math.log(self.low), math.log(self.high)
            raw = [math.exp(lo + i * (hi - lo) / (points - 1)) for i in range(points)]
            raw[0], raw[-1] = self.low, self.high  # exact bounds, not exp(log(x))
            return raw
        return [self.low + i * (self.high - self.low) / (points - 1) for i in range(points)]


@dataclass(frozen=True, init=False)
class Choice:
    """One of a fixed set of values (str, int, float or bool), unordered."""

    choices: tuple[ChoiceValue, ...]
    arg: str | None = None
    env: str | None = None

    def __init__(self, *values: ChoiceValue, arg: str | None = None, env: str | None = None) -> None:
        where = f"Choice({', '.join(map(repr, values))})"
        if not values:
            raise ValueError(f"{where}: needs at least one value")
        for i, v in enumerate(values):
            if not isinstance(v, str | int | float | bool) or (isinstance(v, float) and not math.isfinite(v)):
                raise ValueError(
                    f"{where}: unsupported value {v!r} ({type(v).__name__}); choices are str, int, "
                    "finite float or bool"
                )
            for earlier in values[:i]:
                if earlier == v:
                    raise ValueError(f"{where}: duplicate choice {v!r} (equal to {earlier!r})")
        _check_delivery(arg, env)
        object.__setattr__(self, "choices", tuple(values))
        object.__setattr__(self, "arg", arg)
        object.__setattr__(self, "env", env)

    def values(self) -> list[ChoiceValue]:
        """Every choice, in declaration order."""
        return list(self.choices)

    @property
    def size(self) -> int:
        """Number of choices."""
        return len(self.choices)

    def index(self, value: object) -> int:
        """Position of ``value`` among the choices (same type and value); ValueError if absent."""
        for i, v in enumerate(self.choices):
            if type(v) is type(value) and v == value:
                return i
        raise ValueError(f"{value!r} is not one of {list(self.choices)!r}")

    def contains(self, value: object) -> bool:
        """Whether ``value`` is one of the choices (with the same type: ``1`` is not ``True``)."""
        return any(type(v) is type(value) and v == value for v in self.choices)

    def sample(self, rng: random.Random) -> ChoiceValue:
        """One choice, uniformly."""
        return self.choices[rng.randrange(len(self.choices))]

    def grid(self, points: int) -> list[ChoiceValue]:
        """Every choice (a grid never drops one)."""
        return list(self.choices)


Param = Int | Float | Choice


@dataclass(frozen=True, init=False)
class Space:
    """Named parameters to search, in declaration order: ``Space(batch_size=Int(4, 64), ...)``."""

    params: Mapping[str, Param]

    def __init__(self, **params: Param) -> None:
        if not params:
            raise ValueError("Space() needs at least one parameter, e.g. Space(batch_size=Int(4, 64))")
        for name, p in params.items():
            if not isinstance(p, Int | Float | Choice):
                raise ValueError(
                    f"parameter {name!r}: unknown parameter type {type(p).__name__} ({p!r}); "
                    "use autotune.Int, autotune.Float or autotune.Choice"
                )
        object.__setattr__(self, "params", dict(params))

    def __iter__(self) -> Iterator[str]:
        return iter(self.params)

    def __len__(self) -> int:
        return len(self.params)

    def __getitem__(self, name: str) -> Param:
        return self.params[name]

    @property
    def names(self) -> tuple[str, ...]:
        """Parameter names in declaration order."""
        return tuple(self.params)

    # ------------------------------------------------------------------ points

    @property
    def size(self) -> int | None:
        """Number of distinct configurations, or None when a ``Float`` makes it infinite."""
        sizes = [p.size for p in self.params.values()]
        return None if None in sizes else math.prod(s for s in sizes if s is not None)

    def contains(self, params: Mapping[str, object]) -> bool:
        """Whether ``params`` names exactly this space's parameters, each with a value it can take."""
        return set(params) == set(self.params) and all(p.contains(params[n]) for n, p in self.params.items())

    def check_names(self, params: Mapping[str, object]) -> None:
        """ValueError unless ``params`` has exactly this space's parameter names."""
        missing, extra = set(self.params) - set(params), set(params) - set(self.params)
        if missing or extra:
            raise ValueError(
                f"parameters do not match the space: missing {sorted(missing)}, unknown {sorted(extra)}"
            )

    def key(self, params: Mapping[str, Any]) -> tuple[Any, ...]:
        """A hashable identity of a configuration (values in declaration order)."""
        return tuple(params[n] for n in self.params)

    def sample(self, rng: random.Random) -> dict[str, Value]:
        """One configuration drawn from every parameter's prior."""
        return {n: p.sample(rng) for n, p in self.params.items()}

    def points(self) -> Iterator[dict[str, Value]]:
        """Every configuration of a finite space (ValueError if a ``Float`` makes it infinite)."""
        if self.size is None:
            raise ValueError("a space with a Float parameter has no finite list of points")
        per_param = [p.values() for p in self.params.values() if not isinstance(p, Float)]
        for combo in itertools.product(*per_param):
            yield dict(zip(self.params, combo, strict=True))

    def grid(self, points_per_dim: int) -> list[dict[str, Value]]:
        """A full-factorial grid: at most ``points_per_dim`` values of each Int/Float, every choice.

        Order: the first parameter varies slowest. Log-scaled parameters get log-spaced points.
        """
        if not _is_int(points_per_dim) or points_per_dim < 2:
            raise ValueError(f"points_per_dim must be an integer >= 2, got {points_per_dim!r}")
        axes = [p.grid(points_per_dim) for p in self.params.values()]
        return [dict(zip(self.params, combo, strict=True)) for combo in itertools.product(*axes)]

    # ------------------------------------------------------------------ delivery

    def command_args(self, params: Mapping[str, Value]) -> list[str]:
        """Command-line arguments for the parameters that have an ``arg`` template.

        The template is split on whitespace first, so ``"--bs {value}"`` gives two arguments and
        ``"--bs={value}"`` one; a value is never split or passed through a shell.
        """
        args: list[str] = []
        for name, p in self.params.items():
            if p.arg is not None:
                args.extend(token.format(value=params[name]) for token in p.arg.split())
        return args

    def environ(self, params: Mapping[str, Value]) -> dict[str, str]:
        """Environment variables for the parameters that have an ``env`` name."""
        return {p.env: str(params[n]) for n, p in self.params.items() if p.env is not None}

    # ------------------------------------------------------------------ scikit-optimize

    def to_skopt(self) -> list[Any]:
        """scikit-optimize dimensions, one per parameter (imports skopt).

        Power-of-two integers become an ``Integer`` over the exponent, choices a ``Categorical``
        over their indices; ``to_skopt_point``/``from_skopt_point`` convert configurations.
        """
        from skopt.space import Categorical, Integer, Real  # type: ignore[import-untyped]

        dims: list[Any] = []
        for name, p in self.params.items():
            if isinstance(p, Int) and p.power_of_two:
                dims.append(Integer(p.low.bit_length() - 1, p.high.bit_length() - 1, name=name))
            elif isinstance(p, Int):
                dims.append(Integer(p.low, p.high, prior="log-uniform" if p.log else "uniform", name=name))
            elif isinstance(p, Float):
                dims.append(Real(p.low, p.high, prior="log-uniform" if p.log else "uniform", name=name))
            else:
                dims.append(Categorical(list(range(p.size)), name=name))
        return dims

    def to_skopt_point(self, params: Mapping[str, Value]) -> list[Any]:
        """A configuration as a point of ``to_skopt()``'s dimensions."""
        point: list[Any] = []
        for name, p in self.params.items():
            v = params[name]
            if isinstance(p, Int) and p.power_of_two:
                point.append(int(v).bit_length() - 1)
            elif isinstance(p, Choice):
                point.append(p.index(v))
            else:
                point.append(v)
        return point

    def from_skopt_point(self, point: list[Any]) -> dict[str, Value]:
        """A point of ``to_skopt()``'s dimensions as a configuration of plain Python values."""
        params: dict[str, Value] = {}
        for (name, p), v in zip(self.params.items(), point, strict=True):
            if isinstance(p, Int):
                params[name] = 2 ** int(v) if p.power_of_two else int(v)
            elif isinstance(p, Float):
                params[name] = min(max(float(v), p.low), p.high)
            else:
                params[name] = p.choices[int(v)]
        return params

    # ------------------------------------------------------------------ serialisation

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """The ``[space.NAME]`` tables of the TOML format, as a dict (``from_dict`` reads it back)."""
        out: dict[str, dict[str, Any]] = {}
        for name, p in self.params.items():
            if isinstance(p, Int):
                table: dict[str, Any] = {"type": "int", "low": p.low, "high": p.high, "log": p.log}
                table["power_of_two"] = p.power_of_two
            elif isinstance(p, Float):
                table = {"type": "float", "low": p.low, "high": p.high, "log": p.log}
            else:
                table = {"type": "choice", "choices": list(p.choices)}
            table.update({k: v for k, v in (("arg", p.arg), ("env", p.env)) if v is not None})
            out[name] = table
        return out

    @classmethod
    def from_toml(cls, path: str | Path) -> Space:
        """Read the ``[space.NAME]`` tables of a TOML file (other top-level tables are ignored).

        ValueError naming the file, the table and the key for anything wrong.
        """
        from autotune.tuner.space_toml import space_from_toml

        return space_from_toml(path)

    @classmethod
    def from_dict(cls, tables: object, source: str = "<dict>") -> Space:
        """Build a space from ``{name: {"type": "int"|"float"|"choice", ...}}`` (the TOML tables).

        Keys: int: low, high, log, power_of_two; float: low, high, log; choice: choices; all: arg,
        env. ``source`` names the origin (a file path) in error messages.
        """
        from autotune.tuner.space_toml import space_from_dict

        return space_from_dict(tables, source)
