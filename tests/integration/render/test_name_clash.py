"""Two nodes whose renderers answer to one name: the coordinator says so, loudly.

Each node supervises its own renderer but both call it `host-lite-0`; they share the database,
so the renderer row flips between the two processes' epochs on every probe and every render is
lost as "the renderer restarted". Names are unique per process now (item 4 of issue 14), so
this can only come from a misconfiguration, and then it must be an error in the log and a count
in `/metrics` (`deckyard_render_name_clashes`), not silence.
"""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace

import pytest

from deckyard.api.renders import render_metrics
from deckyard.artifacts import ArtifactStore
from deckyard.clock import FakeClock
from deckyard.config import Settings
from deckyard.db import Database
from deckyard.render.control.client import RendererSource, RendererSources
from deckyard.render.control.coordinator import Coordinator
from tests.integration.render.fake_renderer import FakeFleet, FakeRenderer

SECRET = "integration-secret-0123456789"
NAME = "host-lite-0"


def node(db: Database, tmp_path: Path, renderer: FakeRenderer, clock: FakeClock) -> Coordinator:
    sources = RendererSources()
    sources.put(RendererSource(NAME, renderer.url, SECRET))
    store = ArtifactStore(str(tmp_path / "artifacts"))
    transport = FakeFleet(renderer).transport
    return Coordinator(db, Settings.load(), sources, store, clock, transport=transport)


async def test_two_renderers_under_one_name_are_logged_as_a_clash(
    db: Database, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock()
    a = node(db, tmp_path, FakeRenderer("http://node-a", epoch="epoch-a"), clock)
    b = node(db, tmp_path, FakeRenderer("http://node-b", epoch="epoch-b"), clock)
    try:
        with caplog.at_level(logging.ERROR, logger="deckyard.render.control.coordinator"):
            for _ in range(2):
                await a.probe_once()
                await b.probe_once()
        clashes = [r for r in caplog.records if r.levelno >= logging.ERROR and NAME in r.message]
        assert clashes, "a renderer name shared by two processes went unreported"
        assert "used by two renderers" in clashes[0].message
        assert a.name_clashes + b.name_clashes == len(clashes)
        [family] = render_metrics(SimpleNamespace(coordinator=a))()  # type: ignore[arg-type]
        assert family.name == "deckyard_render_name_clashes"
        assert family.samples[0].value == a.name_clashes >= 1
    finally:
        await a.client.aclose()
        await b.client.aclose()


async def test_a_renderer_that_restarts_is_no_clash(
    db: Database, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock()
    renderer = FakeRenderer("http://node-a", epoch="epoch-1")
    a = node(db, tmp_path, renderer, clock)
    try:
        with caplog.at_level(logging.ERROR, logger="deckyard.render.control.coordinator"):
            for epoch in ("epoch-2", "epoch-3"):
                await a.probe_once()
                renderer.restart(epoch)
            await a.probe_once()
        assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []
        assert a.name_clashes == 0
    finally:
        await a.client.aclose()
