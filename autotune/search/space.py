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
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autotune.search.params import Choice, ChoiceValue, Float, Int, Param, Value, is_int
from autotune.search.space_toml import params_from_dict, space_tables
from profilers.contract.json_checks import JsonObject

__all__ = [
    "Choice",
    "ChoiceValue",
    "Float",
    "Int",
    "Param",
    "Space",
    "Value",
    "batch_param",
    "study_batch_param",
]


@dataclass(frozen=True, init=False)
class Space:
    """Named parameters to search, in declaration order: ``Space(batch_size=Int(4, 64), ...)``.

    Each parameter reaches a script as a command-line argument (``arg``), an environment variable
    (``env``), or through :func:`autotune.param` when it has neither.

    >>> from autotune import Choice, Int, Space
    >>> space = Space(
    ...     batch_size=Int(8, 128, power_of_two=True, arg="--batch-size={value}"),
    ...     precision=Choice("fp32", "bf16"),
    ... )
    >>> space.size  # 5 batch sizes x 2 precisions
    10
    >>> space.command_args({"batch_size": 32, "precision": "bf16"})
    ['--batch-size=32']
    """

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
        if not is_int(points_per_dim) or points_per_dim < 2:
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

    def to_dict(self) -> JsonObject:
        """The ``[space.NAME]`` tables of the TOML format, as a dict (``from_dict`` reads it back)."""
        out: JsonObject = {}
        for name, p in self.params.items():
            if isinstance(p, Int):
                table: JsonObject = {"type": "int", "low": p.low, "high": p.high, "log": p.log}
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
        tables, source = space_tables(path)
        return cls(**params_from_dict(tables, source))

    @classmethod
    def from_dict(cls, tables: object, source: str = "<dict>") -> Space:
        """Build a space from ``{name: {"type": "int"|"float"|"choice", ...}}`` (the TOML tables).

        Keys: int: low, high, log, power_of_two; float: low, high, log; choice: choices; all: arg,
        env. ``source`` names the origin (a file path) in error messages.
        """
        return cls(**params_from_dict(tables, source))


def batch_param(space: Space) -> str | None:
    """The space's batch parameter, or None when it has none.

    ``micro_batch``, else the first whose name holds "batch", taking whole numbers (integers, or a
    choice of integers). What the tuner's memory model scales peak memory against, the plan prior
    traces in, and the report and advice show a study by.
    """

    def whole(name: str) -> bool:
        p = space[name]
        if isinstance(p, Choice):
            return all(isinstance(c, int) and not isinstance(c, bool) for c in p.choices)
        return isinstance(p, Int)

    if "micro_batch" in space.names and whole("micro_batch"):
        return "micro_batch"
    return next((n for n in space.names if "batch" in n.lower() and whole(n)), None)


def study_batch_param(space: Mapping[str, Any]) -> str | None:
    """A study's batch parameter (``space``: its summary's, as :meth:`Space.to_dict` wrote it).

    None for no or an unreadable space.
    """
    try:
        return batch_param(Space.from_dict(dict(space)))
    except (ValueError, TypeError):
        return None
