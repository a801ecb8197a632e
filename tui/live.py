"""The Live screen: the followed run's progress, step time, throughput, phases and devices."""

from __future__ import annotations

from autotune.fmt import format_bytes, format_pct, format_rate, format_seconds, format_si
from profilers.contract.load import load_line
from profilers.contract.outcome import outcome_sentence, stop_reason_words
from profilers.contract.profile_summary import ProfileSummary
from rich.text import Text
from textual.app import ComposeResult, RenderResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.css.query import NoMatches
from textual.reactive import reactive
from textual.widget import Widget
from textual.widgets import Label, ProgressBar, Sparkline, Static

from tui.draw import STATE_STYLES, key_value_table, phase_bar
from tui.model import DeviceView, LiveInfo

#: (field, row label) of a GPU panel and of a host panel.
GPU_ROWS = (
    ("gpu_util_pct", "util"),
    ("mem_used_bytes", "memory"),
    ("power_mw", "power"),
    ("sm_clock_mhz", "clock"),
)
HOST_ROWS = (
    ("cpu_util_pct", "cpu"),
    ("process_cpu_pct", "process"),
    ("rss_bytes", "rss"),
    ("host_mem_used_bytes", "memory"),
)


def metric_text(field: str, value: float | None, total: float | None) -> str:
    """A device reading in its unit (power in W, clocks in Hz, memory against the total)."""
    if value is None:
        return "n/a"
    if field in ("gpu_util_pct", "cpu_util_pct", "process_cpu_pct"):
        return format_pct(value / 100)
    if field == "power_mw":  # already in W in the view
        return format_si(value, "W")
    if field == "sm_clock_mhz":
        return format_si(value * 1e6, "Hz")
    if field in ("mem_used_bytes", "host_mem_used_bytes") and total:
        return f"{format_bytes(value)} / {format_bytes(total)}"
    return format_bytes(value)


def summary_items(summary: ProfileSummary | None) -> list[tuple[str, str]]:
    """The headline figures of a finished run's summary.json, formatted."""
    if summary is None:
        return []
    step = summary.step_time
    items = [
        ("steps", f"{summary.steps} ({summary.measured_steps} measured)"),
        (
            "step time",
            f"{format_seconds(step.median_s)} median, "
            f"{format_seconds(step.p10_s)} – {format_seconds(step.p90_s)} p10–p90",
        ),
        ("throughput", format_rate(summary.throughput.samples_per_s, "samples/s")),
        ("peak memory", format_bytes(summary.peak_memory_bytes)),
        ("precision", summary.precision or "n/a"),
        ("MFU", format_pct(summary.mfu)),
        ("wall time", format_seconds(summary.wall_time_s)),
    ]
    if summary.throughput.tokens_per_s is not None:
        items.insert(3, ("tokens", format_rate(summary.throughput.tokens_per_s, "tokens/s")))
    load = load_line(summary.load)
    if load is not None:
        items.append(("machine load", load))
    outcome = outcome_sentence(summary)
    if outcome is not None:
        items.insert(0, ("outcome", outcome))
    elif summary.stop_reason:
        items.append(("stopped", stop_reason_words(summary.stop_reason)))
    return items


class MetricRow(Horizontal):
    """A label, a sparkline of the values over the run, and the latest value."""

    DEFAULT_CSS = """
    MetricRow { height: 1; }
    MetricRow > .metric-name { width: 8; color: $text-muted; }
    MetricRow > Sparkline { width: 1fr; }
    MetricRow > .metric-value { width: 24; text-align: right; }
    """

    def __init__(self, field: str, name: str) -> None:
        super().__init__(classes=f"metric-{field.replace('_', '-')}")
        self.field = field
        self.label = name
        self._shown: tuple[tuple[float, ...], str] = ((), "")

    def compose(self) -> ComposeResult:
        """The label, the sparkline, the value."""
        yield Label(self.label, classes="metric-name")
        yield Sparkline([], summary_function=max)
        yield Label("", classes="metric-value")

    def on_mount(self) -> None:
        """Draw what was shown before the row's own widgets existed."""
        self._draw()

    def show(self, values: tuple[float, ...], text: str) -> None:
        """Draw ``values`` and the latest ``text`` (once the row is composed, if it is not yet).

        The panel draws its rows from its own ``on_mount``, which may run before a row has composed
        its sparkline and labels; the row then draws them from its own.
        """
        self._shown = (values, text)
        self._draw()

    def _draw(self) -> None:
        try:
            sparkline, value = self.query_one(Sparkline), self.query_one(".metric-value", Label)
        except NoMatches:
            return
        sparkline.data = list(self._shown[0])
        value.update(self._shown[1])


class DevicePanel(Vertical):
    """One device's metrics over the run (a GPU: util, memory, power, clock; a host: CPU and memory)."""

    DEFAULT_CSS = """
    DevicePanel { height: auto; border: round $primary-darken-1; padding: 0 1; }
    """

    def __init__(self, view: DeviceView) -> None:
        super().__init__()
        self.view = view
        self.border_title = view.label

    def compose(self) -> ComposeResult:
        """One row per metric."""
        for field, name in GPU_ROWS if self.view.kind == "gpu" else HOST_ROWS:
            yield MetricRow(field, name)

    def on_mount(self) -> None:
        """Draw the view given at construction."""
        self.show(self.view)

    def show(self, view: DeviceView) -> None:
        """Draw ``view``."""
        self.view = view
        self.border_title = view.label
        for row in self.query(MetricRow):
            total = view.mem_total_bytes if row.field in ("mem_used_bytes", "host_mem_used_bytes") else None
            row.show(
                view.series.get(row.field, ()), metric_text(row.field, view.latest.get(row.field), total)
            )


class SeriesBox(Vertical):
    """A titled sparkline (a series over the steps) with its figures in the border."""

    DEFAULT_CSS = """
    SeriesBox { height: 1fr; min-height: 5; border: round $secondary; padding: 0 1; }
    SeriesBox > Sparkline { height: 1fr; }
    """

    def __init__(self, title: str, id: str) -> None:
        super().__init__(id=id)
        self.border_title = title

    def compose(self) -> ComposeResult:
        """The sparkline."""
        yield Sparkline([], summary_function=max)

    def show(self, values: tuple[float, ...], caption: str) -> None:
        """Draw ``values`` with ``caption`` under them."""
        self.query_one(Sparkline).data = list(values)
        self.border_subtitle = caption


class PhaseBar(Widget):
    """The phases of the recent steps as one stacked bar, with a legend."""

    DEFAULT_CSS = """
    PhaseBar { height: auto; border: round $secondary; padding: 0 1; }
    """

    phases: reactive[tuple[tuple[str, float], ...]] = reactive(())

    def render(self) -> RenderResult:
        """The bar at the widget's width."""
        return phase_bar(self.phases, max(10, self.content_size.width))


class LivePane(Vertical):
    """The Live screen; set :attr:`info` to redraw it (None: only :attr:`placeholder` is shown)."""

    DEFAULT_CSS = """
    LivePane.-empty > #live-body, LivePane.-empty > #live-progress, LivePane.-empty > #live-message {
        display: none;
    }
    """

    info: reactive[LiveInfo | None] = reactive(None)
    #: What the screen says while there is nothing to draw (no run yet, or it cannot be read).
    placeholder: reactive[str] = reactive("loading…")

    def compose(self) -> ComposeResult:
        """Status line, progress, step series and phases on the left, devices on the right."""
        yield Static("loading…", id="live-status")
        yield ProgressBar(id="live-progress", show_eta=False)
        yield Static("", id="live-message")
        with Horizontal(id="live-body"):
            with Vertical(id="live-steps"):
                yield SeriesBox("Step time", id="step-time")
                yield SeriesBox("Throughput", id="throughput")
                yield PhaseBar(id="live-phases")
                yield Static("", id="live-warnings")
            with Vertical(id="live-right"):
                yield VerticalScroll(id="live-devices")
                yield Static("", id="live-summary")

    def watch_info(self, info: LiveInfo | None) -> None:
        """Redraw from ``info``."""
        self.set_class(info is None, "-empty")
        if info is None:
            self.watch_placeholder(self.placeholder)
            return
        status = Text()
        if info.following:
            status.append("following ", style="dim")
            status.append(f"{info.following}\n", style="bold")
        status.append(f"● {info.state}", style=STATE_STYLES.get(info.state, "bold"))
        facts = [
            (
                "step",
                f"{info.step:,}" + (f" of {info.max_steps:,}" if info.max_steps else "")
                if info.step
                else "—",
            ),
            ("rate", format_rate(info.steps_per_s, "steps/s")),
            ("throughput", format_rate(info.samples_per_s, "samples/s")),
            ("elapsed", format_seconds(info.elapsed_s)),
            ("last step", format_seconds(info.last_step_s)),
        ]
        for label, value in facts:
            status.append(f"   {label} ", style="dim")
            status.append(value, style="bold")
        self.query_one("#live-status", Static).update(status)
        progress = self.query_one("#live-progress", ProgressBar)
        progress.display = info.max_steps is not None
        if info.max_steps:
            progress.update(total=info.max_steps, progress=min(info.step or 0, info.max_steps))
        message = self.query_one("#live-message", Static)
        message.display = info.message is not None
        message.update(Text(info.message or "", style="italic yellow"))
        steps = info.step_time_s
        self.query_one("#step-time", SeriesBox).show(
            steps, f"last {format_seconds(info.last_step_s)} · max {format_seconds(max(steps, default=None))}"
        )
        rates = info.samples_per_s_series
        recent = format_rate(info.samples_per_s, "samples/s")
        peak = format_rate(max(rates, default=None), "samples/s")
        caption = f"{info.samples_per_s_over} {recent} · peak of the chart {peak}"  # the header's figure
        self.query_one("#throughput", SeriesBox).show(rates, caption)
        phases = self.query_one("#live-phases", PhaseBar)
        phases.border_title = f"Phases · mean of the last {info.recent_steps} steps"
        phases.phases = info.phases_s
        warnings = self.query_one("#live-warnings", Static)
        warnings.display = bool(info.warnings)
        warnings.update(Text("\n".join(info.warnings), style="yellow"))
        self._show_devices(info.devices)
        box = self.query_one("#live-summary", Static)
        box.border_title = "summary.json"
        items = summary_items(info.summary)
        box.update(
            key_value_table(items)
            if items
            else Text("not written yet: the run has not finished", style="dim")
        )

    def watch_placeholder(self, text: str) -> None:
        """Say ``text`` while there is no run to draw."""
        if self.info is None:
            self.query_one("#live-status", Static).update(Text(text, style="italic"))

    def _show_devices(self, views: tuple[DeviceView, ...]) -> None:
        box = self.query_one("#live-devices", VerticalScroll)
        panels = list(box.query(DevicePanel))
        if [p.view.label for p in panels] == [v.label for v in views]:
            for panel, view in zip(panels, views, strict=True):
                panel.show(view)
            return
        box.remove_children()
        if views:
            box.mount_all(DevicePanel(v) for v in views)
        else:
            box.mount(Static(Text("no device samples yet", style="dim")))
