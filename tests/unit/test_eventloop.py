"""`deckyard.eventloop`: the `event_loop` setting picks the loop `run()` and `serve` use."""

from __future__ import annotations

import asyncio

import uvloop

from deckyard.config import Settings
from deckyard.eventloop import resolve, run


async def _loop_class() -> type:
    return type(asyncio.get_running_loop())


def test_auto_is_uvloop_when_installed() -> None:
    assert resolve("auto") == "uvloop"
    assert run(_loop_class(), Settings.load(event_loop="auto")) is uvloop.Loop


def test_asyncio_is_the_standard_loop() -> None:
    assert resolve("asyncio") == "asyncio"
    assert not issubclass(run(_loop_class(), Settings.load(event_loop="asyncio")), uvloop.Loop)
