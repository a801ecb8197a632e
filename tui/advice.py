"""The Advice screen (the report's recommendations) and the Run screen (environment and devices)."""

from __future__ import annotations

from typing import Any

from autotune.fmt import format_bytes, format_si
from rich.console import Group
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.reactive import reactive
from textual.widgets import DataTable, Static

from tui.draw import key_value_table, recommendation_text
from tui.model import RunFacts
from tui.report import REPORT_NAME


def matches(rec: Any, text: str) -> bool:
    """Whether a recommendation's rule, title, evidence or actions contain ``text`` (any case)."""
    needle = text.strip().lower()
    haystack = " ".join([rec.rule, rec.severity, rec.title, *rec.evidence, *rec.actions]).lower()
    return not needle or needle in haystack


class AdvicePane(VerticalScroll):
    """The Advice screen: ``make_report(run_dir).advice``, drawn; set :attr:`report` or :attr:`problem`."""

    report: reactive[Any] = reactive(None)
    problem: reactive[str | None] = reactive(None)
    loading: reactive[bool] = reactive(False)
    filter_text: reactive[str] = reactive("")

    def compose(self) -> ComposeResult:
        """A heading line and the recommendations."""
        yield Static("", id="advice-head")
        yield Static("", id="advice-body")

    def watch_report(self) -> None:
        """Redraw."""
        self._redraw()

    def watch_problem(self) -> None:
        """Redraw."""
        self._redraw()

    def watch_loading(self) -> None:
        """Redraw."""
        self._redraw()

    def watch_filter_text(self) -> None:
        """Redraw with the recommendations that match."""
        self._redraw()

    def _redraw(self) -> None:
        if not self.is_mounted:
            return
        head = self.query_one("#advice-head", Static)
        body = self.query_one("#advice-body", Static)
        if self.problem is not None:
            head.update(Text(f"Advice unavailable: {self.problem}", style="bold red"))
            body.update("")
            return
        if self.report is None:
            text = (
                "building the advice (the same rules as `autotune report`)…"
                if self.loading
                else ("the advice is built when this screen is shown (r: refresh)")
            )
            head.update(Text(text, style="italic dim"))
            body.update("")
            return
        advice = self.report.advice
        recs = [r for r in advice.recommendations if matches(r, self.filter_text)]
        count = len(advice.recommendations)
        line = Text(f"{count} recommendation{'s' if count != 1 else ''}", style="bold")
        line.append(
            f" for {self.report.name}, from the same rules as `autotune report`", style="dim"
        )
        if self.filter_text:
            line.append(f" · filter '{self.filter_text}': {len(recs)} shown", style="dim")
        if self.loading:
            line.append(" · refreshing…", style="italic dim")
        head.update(line)
        parts: list[Any] = []
        for rec in recs:
            parts += [recommendation_text(rec), Text("")]
        if not advice.recommendations:
            parts.append(Text("No recommendation: every rule that could be checked passed.", style="green"))
        if advice.rules_checked:
            rules = Text()
            rules.append("Rules checked: ", style="bold dim")
            rules.append(
                "; ".join(
                    f"{t.title} ({t.metric} {t.limit_text()})" for t in advice.rules_checked
                ),
                style="dim",
            )
            parts.append(rules)
        for why in advice.not_checked:
            parts.append(Text(f"not checked: {why}", style="dim"))
        body.update(Group(*parts))


class RunPane(VerticalScroll):
    """The Run screen: the environment (the report's section), the devices, the run directory."""

    facts: reactive[RunFacts | None] = reactive(None)
    environment: reactive[tuple[tuple[str, str], ...] | None] = reactive(None)

    def compose(self) -> ComposeResult:
        """The environment table, the devices table and the export hint."""
        yield Static("", id="run-env")
        yield DataTable(id="run-devices", show_cursor=False)
        yield Static("", id="run-hint")

    def on_mount(self) -> None:
        """The devices table's columns."""
        table = self.query_one("#run-devices", DataTable)
        table.border_title = "Devices"
        table.add_columns("rank", "device", "name", "memory", "power limit", "max SM clock")

    def watch_facts(self) -> None:
        """Redraw."""
        self._redraw()

    def watch_environment(self) -> None:
        """Redraw."""
        self._redraw()

    def _redraw(self) -> None:
        if not self.is_mounted or self.facts is None:
            return
        facts = self.facts
        items: list[tuple[str, str]] = [("name", facts.name), ("kind", facts.kind), ("state", facts.state)]
        if self.environment is None:
            items.append(("run directory", facts.run_dir))
        else:
            items += list(self.environment)
        if facts.trial_dir:
            items.append(("followed trial", facts.trial_dir))
        items += [("warning", w) for w in facts.warnings]
        env = self.query_one("#run-env", Static)
        env.border_title = "Run"
        env.update(key_value_table(items))
        table = self.query_one("#run-devices", DataTable)
        table.clear()
        for d in facts.devices:
            power, clock = d.info.power_limit_mw, d.info.max_sm_clock_mhz
            table.add_row(
                str(d.rank),
                f"{d.kind} {d.index}",
                d.info.name,
                format_bytes(d.info.mem_total_bytes),
                format_si(power / 1000, "W") if power is not None else "n/a",
                format_si(clock * 1e6, "Hz") if clock is not None else "n/a",
            )
        hint = Text("e", style="bold")
        hint.append(f": write the HTML report to {facts.run_dir}/{REPORT_NAME}", style="dim")
        self.query_one("#run-hint", Static).update(hint)
