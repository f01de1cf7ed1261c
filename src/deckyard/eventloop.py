"""Which event loop Deckyard's processes run on (setting `event_loop`), and `run()` on it.

uvloop's timers are libuv's: a 5 ms `asyncio.sleep` lasts 5 ms, where the standard selector
loop rounds every epoll timeout up to the next millisecond, and its sockets and callbacks cost
less CPU. `auto` takes uvloop when it is importable and falls back to asyncio's loop otherwise,
so a platform without the wheel still runs.
"""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Callable, Coroutine
from typing import Any, Literal, TypeVar

from deckyard.config import Settings

T = TypeVar("T")

EventLoopChoice = Literal["auto", "asyncio", "uvloop"]


def resolve(choice: EventLoopChoice) -> Literal["asyncio", "uvloop"]:
    """The loop `choice` means here: `auto` is uvloop when it is importable."""
    if choice == "auto":
        return "uvloop" if importlib.util.find_spec("uvloop") is not None else "asyncio"
    return choice


def loop_factory(settings: Settings) -> Callable[[], asyncio.AbstractEventLoop]:
    """A new-loop function for `settings.event_loop`; `uvloop` without the package raises."""
    if resolve(settings.event_loop) == "uvloop":
        import uvloop

        return uvloop.new_event_loop
    return asyncio.new_event_loop


def run(main: Coroutine[Any, Any, T], settings: Settings | None = None) -> T:
    """`asyncio.run(main)` on the loop the settings choose (loaded from the environment if none)."""
    factory = loop_factory(settings if settings is not None else Settings.load())
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)
