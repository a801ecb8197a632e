"""Waiting for the dashboard in pilot tests: until it has read the run and its workers are done."""

from __future__ import annotations

import asyncio
import functools
import io
from collections.abc import Callable, Coroutine
from typing import Any

from rich.console import Console
from textual.pilot import Pilot
from textual.widgets import Static


def shown_text(widget: Static) -> str:
    """What a Static shows, as plain text."""
    console = Console(width=200, file=io.StringIO(), record=True)
    console.print(widget.content)
    return console.export_text()


async def settle(pilot: Pilot[Any], polls: int = 1) -> None:
    """Wait until the current screen has read its run ``polls`` times and every worker is done."""
    screen = pilot.app.screen
    for _ in range(1000):
        if getattr(screen, "polls", polls) >= polls and getattr(screen, "scans", 1) >= 1:
            break
        await asyncio.sleep(0.01)
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


async def until(pilot: Pilot[Any], check: Callable[[], bool], timeout: float = 10.0) -> bool:
    """Wait (letting the app run) until ``check()`` is true; whether it became true in time."""
    for _ in range(int(timeout / 0.05)):
        if check():
            return True
        await pilot.pause(0.05)
    return check()


async def press(pilot: Pilot[Any], *keys: str) -> None:
    """Press ``keys``, then wait for the workers they started."""
    await pilot.press(*keys)
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


def sync(test: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    """Run an ``async def`` test in its own event loop (the suite has no asyncio plugin)."""

    @functools.wraps(test)
    def run(*args: Any, **kwargs: Any) -> None:
        asyncio.run(test(*args, **kwargs))

    return run
