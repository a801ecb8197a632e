"""What a study prints as it runs: one line per trial on stderr, the search order, the verdict.

Used by ``autotune tune`` and ``autotune demo``; rich is imported when a study first prints.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from autotune.fmt import NA, format_number
from autotune.search.records import Trial
from autotune.search.space import Value
from autotune.tuner.early_stop import STOPPED_LOSING, best_result, stop_words
from autotune.tuner.host_load import machine_cores
from autotune.tuner.trial_facts import facts, metrics
from autotune.tuner.tune import Tuner
from autotune.tuner.tune_summary import trial_ratio
from profilers.contract.json_checks import JsonObject
from profilers.contract.load import too_busy
from profilers.contract.schema import TrialStatus
from profilers.contract.study.spread import ratio_span
from profilers.contract.study.summary import SearchPrior, TuningSummary
from profilers.contract.study.trials import placement_line, starved_line
from profilers.contract.study.verdict import VerdictStatus, verdict_of


def _number(value: float | None) -> str:
    """A measured value for people: thousands separated above 100, four digits below."""
    if value is None:
        return NA

    return f"{value:,.0f}" if abs(value) >= 100 else format_number(value, 4)


def _load(cores: float | None, over: int | None = None) -> str:
    """" · other processes 1.3 of 2 cores" when the machine was shared enough to move a figure.

    ``over``: the cores the figure is over (a trial pinned to its slot's), else the machine's.
    """
    if cores is None or cores < 0.25:
        return ""

    total = over or machine_cores()
    return f" [dim]· other processes {cores:.1f} of {total} core{'s' if total != 1 else ''}[/dim]"


def _spread(ci: Any, rate: float | None) -> str:
    if not ci or not rate:
        return "no interval"
    if ci[1] is None:
        return f"95% interval from {_number(ci[0])} samples/s up, open-ended"
    return f"±{100 * (ci[1] - ci[0]) / 2 / rate:.0f}% at 95%"


def prior_line(prior: SearchPrior | None) -> str | None:
    """How the search was ordered, and how far the plan's predictions were from the trials."""
    if prior is None or not prior.note:
        return None
    line = f"Search: {prior.note}"
    median = prior.median_error()
    if median is not None:
        line += f"; predictions within {100 * median[0]:.0f}% of {median[1]} trials (median)"
    return line


def verdict_line(summary: TuningSummary | JsonObject) -> str:
    """The study's verdict for people (:func:`profilers.contract.study.verdict.study_verdict`), marked up."""
    from rich.markup import escape

    verdict = verdict_of(summary)
    colour = "bold green" if verdict.status == VerdictStatus.CONFIRMED else "yellow"
    if verdict.status in (VerdictStatus.SLOWER, VerdictStatus.NO_RESULT):
        colour = "red"
    line = f"[{colour}]Verdict[/{colour}]: {escape(verdict.headline)}"
    if verdict.firmer:
        line += f"\n  for a firmer answer, {escape(verdict.firmer)}"
    return line


def _format_params(params: dict[str, Value]) -> str:
    return " ".join(f"{k}={v}" for k, v in params.items()) or "baseline (the script's own defaults)"


class Progress:
    """One line per trial on stderr: what runs, then how it ended and the best so far."""

    def __init__(self, quiet: bool = False) -> None:
        from rich.console import Console

        self.console = Console(stderr=True, highlight=False, soft_wrap=True)
        self.quiet = quiet
        self.metric = ""
        self._started = time.monotonic()
        self._tuner: Tuner | None = None

    def header(self, config: Any, run_dir: Path, resumed: bool) -> None:
        """The study's settings in one line."""
        self.metric = config.scoring.metric
        if self.quiet:
            return
        s = config.settings
        what = "resuming" if resumed else "tuning"
        where = " · on Ray" if config.executor == "ray" else ""
        at_once = f" · {config.parallel} at once" if config.parallel > 1 else ""
        self.console.print(
            f"autotune tune: {what} {' '.join([s.script, *s.script_args])} · objective "
            f"{config.scoring.objective} ({config.scoring.metric}) · {config.n_trials} trials{at_once}"
            f"{where} · {config.searcher} seed {config.seed} · {run_dir}"
        )

    def started(self, trial_id: int, position: int, n_trials: int, params: dict[str, Value]) -> None:
        """A trial starts: the ``position``-th of ``n_trials`` that run (skipped ones take ids too)."""
        if not self.quiet:
            self.console.print(
                f"[dim]trial {trial_id:>3} (run {position} of {n_trials}) {_format_params(params)} …[/dim]"
            )

    def tuner(self, config: Any, run_dir: Path, resume: bool = False) -> Tuner:
        """The study's tuner, reporting here as it goes."""
        self._tuner = Tuner(
            config,
            run_dir,
            resume=resume,
            on_start=self.started,
            on_trial=self.finished,
            on_confirm=self.confirming,
            on_note=self.note,
        )
        return self._tuner

    def note(self, line: str) -> None:
        """What the study is doing between trials (the plan's predictions before the search)."""
        if not self.quiet:
            self.console.print(f"[dim]{line}[/dim]")

    def confirming(self, run: Any, round_: int, role: str, rounds: int) -> None:
        """A re-measurement of the baseline or the best starts (``run`` None) or ends."""
        if self.quiet:
            return
        what = f"confirm {round_ + 1} of {rounds}: {role}"
        if run is None:
            self.console.print(f"[dim]{what} …[/dim]")
        elif run.status == TrialStatus.OK and run.samples_per_s:
            load = _load(run.other_load_cores, run.load_cores)
            self.console.print(f"{what}: {_number(run.samples_per_s)} samples/s{load}")
        else:
            why = run.error or "no samples/s measured"
            self.console.print(f"{what}: [yellow]{run.status}[/yellow]: {why}")

    def finished(self, study: Any, trial: Trial) -> None:
        """A trial ended: its outcome and the best so far."""
        if self.quiet:
            return
        rate, fact = metrics(trial).samples_per_s, facts(trial)
        if trial.ok:
            ratio = self._ratio(trial)
            top = best_result(study.trials, study.direction == "maximize")
            highest = top is not None and top.id == trial.id
            best = " [bold green]highest so far[/bold green]" if highest else ""
            memory = metrics(trial).peak_memory_bytes
            mem = f" · peak {memory / 2**20:,.0f} MiB" if memory else ""
            value = _number(trial.value)
            line = f"ok {value} {self.metric}{ratio}{mem} · {trial.duration_s:.1f} s{best}"
            if fact.stop_reason == STOPPED_LOSING:
                why = stop_words(fact.stop_floor, fact.stop_rule, fact.stop_best_id, fact.measured_steps)
                line += f" [dim]({why})[/dim]"
            elif fact.stable is False:
                line += f" [yellow](not stable: {_spread(fact.throughput_ci95, rate)})[/yellow]"
            line += _load(fact.other_load_cores, fact.load_cores)
            if too_busy(fact.starved_share):  # the baseline: kept, as a study needs one
                line += f" [yellow](short of CPU in {fact.starved_share:.0%} of its steps)[/yellow]"
            elif fact.busy_before is not None:
                again = f"measured again once calmer: short of CPU in {fact.busy_before:.0%} before"
                line += f" [dim]({again})[/dim]"
        else:
            error = (trial.error or "").strip().splitlines()
            line = f"[yellow]{trial.status}[/yellow]: {error[0] if error else ''}"
        self.console.print(f"trial {trial.id:>3} {_format_params(trial.params)}: {line}")

    def _ratio(self, trial: Trial) -> str:
        """" ×2.12 vs baseline (95% 0.40–11.20× across processes)": against the nearest anchor."""
        if self._tuner is None:
            return ""

        found = trial_ratio(trial, self._tuner.anchors())
        if found.ratio is None:
            return ""
        if found.ci95 is None:
            return f" ×{found.ratio:.2f} vs baseline"
        return f" ×{found.ratio:.2f} vs baseline (95% {ratio_span(found.ci95)} across processes)"

    def result(self, summary: TuningSummary) -> None:
        """The best configuration against the baseline."""
        best, base = summary.best, summary.baseline
        elapsed = time.monotonic() - self._started
        statuses = summary.status_counts
        counts = ", ".join(f"{n} {s}" for s, n in statuses.items())
        confirmations = len(summary.confirmations)
        again = f", {confirmations} re-measurements" if confirmations else ""
        skipped = statuses.get(TrialStatus.SKIPPED)
        note = f"; the {skipped} skipped took trial ids but never ran" if skipped else ""
        runs = f"{summary.trials_run} trials run ({counts}){again}"
        self.console.print(f"{runs} in {elapsed:.0f} s{note}")

        s = summary
        placement = placement_line(s.trials, s.parallel, s.executor, s.threads_per_rank)
        if placement:
            self.console.print(f"How: {placement}")
        starved = starved_line(s)
        if starved:
            self.console.print(f"[yellow]Busy machine[/yellow]: {starved}")
        prior = prior_line(summary.search_prior)
        if prior:
            self.console.print(prior)
        if summary.process_spread is not None and summary.process_spread.processes:
            self.console.print(f"Baseline: {summary.process_spread.sentence()}")
        if summary.bill is not None:
            self.console.print(f"Cost: {summary.bill.sentence()}")

        verdict = verdict_of(summary)
        if verdict.status == VerdictStatus.NO_EFFECT:
            self.console.print("[yellow]No best[/yellow]: nothing the study tuned changed what was measured")
            self.console.print("  " + verdict_line(summary))
            return
        if best is None:
            self.console.print("[red]No trial finished ok.[/red]")
            return
        label = verdict.best_label
        self.console.print(f"[bold]{label}[/bold] (trial {best.id}): {_format_params(best.params)}")
        parts = [f"{summary.metric} {_number(best.objective)} in the search"]
        if base is not None and base.samples_per_s:
            parts.append(f"baseline {_number(base.samples_per_s)} samples/s")
        if best.cost_saving_vs_baseline is not None:
            parts.append(f"{100 * best.cost_saving_vs_baseline:.0f}% cheaper per sample")
        self.console.print("  " + verdict_line(summary))
        if summary.pareto:
            front = list(summary.pareto)
            self.console.print(f"  Pareto front (throughput, peak memory, cost): trials {front}")
