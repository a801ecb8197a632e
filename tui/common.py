"""Pieces both screens use: the filter bar and the help screen."""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static

#: (key, what it does), as the help screen lists them.
KEYS: tuple[tuple[str, str], ...] = (
    ("1 2 3 4", "Live, Trials, Advice, Run"),
    ("tab / shift+tab", "next / previous screen"),
    ("r", "refresh now (and rebuild the advice on the Advice screen)"),
    ("e", "write the HTML report to RUN_DIR/report.html"),
    ("s", "sort the trial table (or the run list) by the next column; click a header to sort by it"),
    ("/", "filter the trials, the recommendations or the run list; enter keeps it, escape clears it"),
    ("enter", "open the selected run (run list)"),
    ("escape", "close the filter; back to the run list"),
    ("?", "this help"),
    ("q", "quit"),
)

HELP_TEXT = (
    "The dashboard only reads the run directory. A run still being written is followed live: each "
    "refresh (about once a second) reads only the steps and samples added since the last one. For a "
    "tuning study, Live follows the trial running now (the newest trials/trial-NNNN), Trials shows "
    "every finished trial from summary.json."
)


class FilterBar(Input):
    """The ``/`` filter: hidden until asked for, docked at the bottom of its screen."""

    DEFAULT_CSS = """
    FilterBar { dock: bottom; display: none; margin-bottom: 1; }
    FilterBar.-open { display: block; }
    """

    def __init__(self) -> None:
        super().__init__(placeholder="filter: text to match (enter: keep, escape: clear)", id="filter")

    def open(self, value: str) -> None:
        """Show the bar with ``value`` and focus it."""
        self.value = value
        self.add_class("-open")
        self.focus()

    def close(self) -> None:
        """Hide the bar."""
        self.remove_class("-open")

    @property
    def is_open(self) -> bool:
        """Whether the bar is shown."""
        return self.has_class("-open")


class HelpScreen(ModalScreen[None]):
    """The keys, and how the dashboard reads a run."""

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > Vertical {
        width: 90; height: auto; border: thick $primary; background: $surface; padding: 1 2;
    }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss", "Close"),
        Binding("question_mark", "dismiss", "Close", show=False),
        Binding("q", "dismiss", "Close", show=False),
    ]

    def compose(self) -> ComposeResult:
        """The key table and a paragraph."""
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold cyan", no_wrap=True)
        table.add_column()
        for key, what in KEYS:
            table.add_row(key, what)
        with Vertical():
            yield Static(Text("autotune dashboard: keys", style="bold"))
            yield Static(table, id="help-keys")
            yield Static(Text("\n" + HELP_TEXT, style="dim"))

    async def action_dismiss(self, result: None = None) -> None:
        """Close the help."""
        self.dismiss(result)
