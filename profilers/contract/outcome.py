"""How a profiled region ended: ``summary.json``'s ``outcome`` and ``error``.

One of :data:`OUTCOMES`: ``finished`` (the code returned), ``stopped`` (a step budget, a stop rule or
Ctrl-C ended it), ``crashed`` (it raised; ``error`` holds the exception's type, message and the step it
was raised in) and ``no_steps`` (no training step was seen, whatever the ending; ``seen`` says what was:
optimizer steps, a model's forward). Decided once, here, from the exception that left the region.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from profilers.contract.figures import RunError, SeenFacts
from profilers.contract.profile_summary import ProfileSummary

#: Every value of summary.json's ``outcome``.
OUTCOMES = ("finished", "stopped", "crashed", "no_steps")
#: A message longer than this is cut (the exception's own text can be a page).
MAX_MESSAGE_CHARS = 500


@dataclass(frozen=True)
class Exit:
    """The exception that left the profiled region (None fields: it returned)."""

    type_name: str | None = None
    message: str = ""
    exit_code: int | None = None  # SystemExit's status
    step: int | None = None  # the 1-based step in progress when it was raised (None: before any)


def exit_of(exc: BaseException | None, steps_closed: int) -> Exit:
    """What ``exc`` (None: a normal return) says of the ending, in the step after ``steps_closed``."""
    if exc is None:
        return Exit()
    code: int | None = None
    if isinstance(exc, SystemExit):
        raw = exc.code
        code = 0 if raw is None else raw if isinstance(raw, int) else 1
    message = str(exc)
    if len(message) > MAX_MESSAGE_CHARS:
        message = message[: MAX_MESSAGE_CHARS - 1] + "…"
    return Exit(type(exc).__name__, message, code, steps_closed + 1)


@dataclass(frozen=True)
class Ending:
    """How a run ended, as its summary says: ``outcome``, ``error`` and, for ``no_steps``, ``seen``."""

    outcome: str
    error: RunError | None = None
    seen: SeenFacts = field(default=SeenFacts())


def outcome_fields(
    end: Exit, steps: int, stop_reason: str | None, optimizer_steps: int, model_forward: bool
) -> Ending:
    """The ending of a run of ``steps`` steps that left its region as ``end``."""
    error: RunError | None = None
    stopped = stop_reason is not None or end.type_name in ("StepBudgetReached", "KeyboardInterrupt")
    if end.type_name is None:
        raised = False
    elif end.exit_code is not None:  # SystemExit: only a nonzero status is a failure
        raised = end.exit_code != 0
    else:
        raised = not stopped
    if raised:
        error = RunError(end.type_name, end.message, end.step, end.exit_code)
    if steps == 0:
        return Ending("no_steps", error, SeenFacts(optimizer_steps, model_forward))
    if error is not None:
        return Ending("crashed", error)
    return Ending("stopped" if stopped else "finished")


def interrupted_reason(end: Exit) -> str | None:
    """``stop_reason`` for an ending no step budget named: "interrupted" for Ctrl-C, else None."""
    return "interrupted" if end.type_name == "KeyboardInterrupt" else None


#: A ``stop_reason`` in words.
STOPPED_BY = {
    "max_steps": "stopped at --max-steps",
    "stable": "stopped once the step time was stable",
    "below_threshold": "stopped early: below --stop-below",
    "non_finite_loss": "stopped at a NaN/inf loss",
    "interrupted": "stopped by Ctrl-C",
    "killed": "killed before its end (its summary rebuilt from run.db)",
}


def stopped_by(stop_reason: str | None) -> str | None:
    """A ``stop_reason`` in words ("stopped at --max-steps"); None for none, or one this version lacks."""
    return STOPPED_BY.get(str(stop_reason))


def stop_reason_words(stop_reason: str | None, column: bool = False) -> str:
    """A ``stop_reason`` as every renderer shows it: its words, "" for none.

    One this version lacks (a newer run's) is shown with spaces for its underscores, never raw.
    ``column``: for a column headed "stop", without the words' leading "stopped" ("once the step
    time was stable").
    """
    if not stop_reason:
        return ""
    words = stopped_by(stop_reason) or str(stop_reason).replace("_", " ")
    return words.removeprefix("stopped ") if column else words


def error_text(error: RunError | None) -> str:
    """``Type: message`` of a summary's ``error`` (the exit status for ``SystemExit``)."""
    if error is None:
        return ""
    if error.type == "SystemExit":
        return f"the script exited with status {error.exit_code}"
    message = error.message.strip().splitlines()
    return f"{error.type}: {message[0]}" if message else str(error.type)


def outcome_sentence(summary: ProfileSummary) -> str | None:
    """How the run ended, in one line for people; None for a summary that does not say (older runs).

    The terminal, the report and the dashboard all say a run's ending with this line.
    """
    outcome, error = summary.outcome, summary.error
    if outcome not in OUTCOMES:
        return None
    if outcome == "finished":
        return "finished"
    if outcome == "stopped":
        return stopped_by(summary.stop_reason) or "stopped"
    if outcome == "crashed":
        at = f" in step {error.step}" if error is not None and error.step else ""
        return f"crashed{at}: {error_text(error)}"
    forward = "a model's forward was seen" if summary.seen.model_forward else "no forward of a model"
    line = f"no training step was seen (no optimizer step; {forward})"
    if error is not None:
        line += f"; {error_text(error)}"
    return line
