"""``@autotune.profile``, ``with autotune.profile(...)`` and ``autotune.step()``."""

from __future__ import annotations

import functools
import inspect
import os
import sys
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar, overload

from autotune.knobs import param, param_env_var, used_params
from profilers.contract.json_checks import JsonObject, record_json
from profilers.contract.profile_summary import ProfileSummary
from profilers.runtime.session import ProfileOptions, Session, active_session

F = TypeVar("F", bound=Callable[..., Any])


class Profile:
    """A profiling region: a context manager, and a decorator that profiles each call.

    After the region, ``run_dir`` is the run directory (None if it could not be written),
    ``summary`` the content of its ``summary.json`` and ``figures`` the same as a typed record.
    """

    def __init__(self, options: ProfileOptions) -> None:
        options.validate()
        self.options = options
        self._sessions: list[Session | None] = []
        self.run_dir: Path | None = None
        self._figures: ProfileSummary | None = None
        #: The content of the run's ``summary.json`` (None before the region ended).
        self.summary: JsonObject | None = None

    def __enter__(self) -> Profile:
        self._sessions.append(self._begin(self.options.name or "profile"))
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._end(self._sessions.pop() if self._sessions else None, exc)

    def _begin(self, default_name: str) -> Session | None:
        if active_session() is not None:
            print(
                "autotune: warning: a profile is already active; this nested one measures nothing",
                file=sys.stderr,
            )
            return None
        session = Session(self.options, default_name=default_name)
        try:
            session.start()
        except RuntimeError as exc:  # another thread's profile became active meanwhile
            print(f"autotune: warning: {exc}; this one measures nothing", file=sys.stderr)
            return None
        self.run_dir = session.run_dir

        session.note_params_used(used_params())  # read before the session started
        return session

    @property
    def figures(self) -> ProfileSummary | None:
        """The summary as a typed record (``prof.figures.step_median_s``); None before the region ended."""
        return self._figures

    def ended_by(self, exc: BaseException) -> None:
        """The exception that ended the region, when the caller caught it inside the ``with`` block."""
        if self._sessions and self._sessions[-1] is not None:
            self._sessions[-1].note_exit(exc)

    def _end(self, session: Session | None, exc: BaseException | None = None) -> None:
        if session is None:
            return
        if exc is not None or not session.exit_noted:
            session.note_exit(exc)
        self._figures = session.stop()
        self.summary = None if self._figures is None else record_json(self._figures)
        self.run_dir = session.run_dir

    def __call__(self, fn: F) -> F:
        """Decorate ``fn``: each call runs in its own profiling session.

        In a tuning trial, a keyword parameter of ``fn`` that the trial tunes (its
        ``AUTOTUNE_PARAM_<NAME>`` is set) and the caller did not pass receives the trial's value.
        """
        default_name = getattr(fn, "__name__", "profile")
        tunable = _keyword_params(fn)

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            kwargs = _with_trial_params(tunable, args, kwargs)
            session = self._begin(default_name)
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:
                self._end(session, exc)
                raise
            self._end(session)
            return result

        wrapper.profile = self  # type: ignore[attr-defined]
        return wrapper  # type: ignore[return-value]


def _keyword_params(fn: Callable[..., Any]) -> list[tuple[int | None, str]]:
    """(position or None, name) of each parameter of ``fn`` that can be passed by keyword."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return []
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return [
        (i if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD else None, p.name)
        for i, p in enumerate(params)
        if p.kind in kinds
    ]


def _with_trial_params(
    tunable: list[tuple[int | None, str]], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> dict[str, Any]:
    """``kwargs`` plus the trial's value of each tunable parameter the caller left out."""
    out = dict(kwargs)
    for position, name in tunable:
        given = name in kwargs or (position is not None and position < len(args))
        if not given and param_env_var(name) in os.environ:
            out[name] = param(name)
    return out


@overload
def profile(fn: F) -> F: ...
@overload
def profile(fn: None = None, **options: Any) -> Profile: ...


def profile(fn: Callable[..., Any] | None = None, **options: Any) -> Any:
    """Profile a training function or region without changing its loop body.

    Use bare (``@autotune.profile``), with options (``@autotune.profile(run_dir="runs/x")``), or
    as a context manager (``with autotune.profile(name="gpt") as prof:``). Options are the fields
    of :class:`profilers.runtime.session.ProfileOptions`: ``name``, ``run_dir``, ``runs_root``,
    ``warmup_steps``, ``count_flops``, ``deep_profile``, ``profile_steps``, ``trace_cap_bytes``,
    ``sample_hz``, ``samples_per_step``, ``backend``, ``peak_tflops``, ``nvtx``, ``quiet``,
    ``memory_snapshot`` (CUDA: the allocator's history until the window closes, as a snapshot),
    ``overwrite`` (replace a run already in ``run_dir``; otherwise that run is kept and this one
    is measured in memory only, with a warning).

    >>> import tempfile, torch, autotune
    >>> model = torch.nn.Linear(8, 2)
    >>> opt = torch.optim.SGD(model.parameters(), lr=0.1)
    >>> with autotune.profile(run_dir=tempfile.mkdtemp() + "/run", quiet=True, deep_profile=False) as prof:
    ...     for _ in range(6):
    ...         loss = model(torch.randn(4, 8)).sum()
    ...         opt.zero_grad()
    ...         loss.backward()
    ...         opt.step()
    >>> prof.summary["steps"], prof.summary["outcome"]
    (6, 'finished')
    >>> prof.figures.measured_steps > 0 and prof.figures.step_median_s > 0
    True
    """
    try:
        opts = ProfileOptions(**options)
    except TypeError as exc:
        raise TypeError(f"autotune.profile: {exc}") from None
    prof = Profile(opts)
    if fn is not None:
        if not callable(fn):
            raise TypeError("autotune.profile: the first argument must be the function to profile")
        return prof(fn)
    return prof


def step() -> None:
    """Mark the end of a training step explicitly (a no-op outside a profile)."""
    session = active_session()
    if session is not None:
        session.explicit_step()
