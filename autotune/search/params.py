"""Search parameters: ``Int``, ``Float`` and ``Choice``, with how a script receives each (``arg``, ``env``).

:mod:`autotune.search.space` names them in a ``Space``; :mod:`autotune.search.space_toml` reads them
from TOML tables. Pure Python.
"""

from __future__ import annotations

import math
import random
import re
import string
from dataclasses import dataclass, field

from profilers.contract.schema import ParamValue

ChoiceValue = ParamValue
Value = ParamValue

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


def is_int(x: object) -> bool:
    """An int that is not a bool."""
    return isinstance(x, int) and not isinstance(x, bool)


def is_number(x: object) -> bool:
    """An int or float that is not a bool."""
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
        if not (is_int(self.low) and is_int(self.high)):
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
        if not is_int(value) or not self.low <= value <= self.high:  # type: ignore[operator]
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
        if not (is_number(self.low) and is_number(self.high)):
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
        return is_number(value) and self.low <= value <= self.high  # type: ignore[operator]

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
