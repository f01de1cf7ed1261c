"""`renderer_differs`: a probe writes a renderer row only when something about it changed."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from deckyard.render.control.models import Renderer, RendererState
from deckyard.render.control.store import RendererSeen, renderer_differs

NOW = datetime(2026, 1, 1, tzinfo=UTC)
KNOWN = Renderer(
    id=1,
    name="r1",
    url="http://r1",
    renderer_id="host:1",
    epoch="e1",
    slots=2,
    state=RendererState.UP,
    error=None,
    created_at=NOW,
    updated_at=NOW,
)


SEEN = RendererSeen("r1", "http://r1", RendererState.UP, renderer_id="host:1", epoch="e1", slots=2)


def test_an_unknown_renderer_is_always_written() -> None:
    assert renderer_differs(None, SEEN)
    assert renderer_differs(None, RendererSeen("r1", "http://r1", RendererState.DOWN))


def test_the_same_answer_writes_nothing() -> None:
    assert not renderer_differs(KNOWN, SEEN)


def test_any_change_the_renderer_reports_is_written() -> None:
    assert renderer_differs(KNOWN, replace(SEEN, epoch="e2"))
    assert renderer_differs(KNOWN, replace(SEEN, slots=3))
    assert renderer_differs(KNOWN, replace(SEEN, renderer_id="host:9"))
    assert renderer_differs(KNOWN, replace(SEEN, url="http://r1-moved"))


def test_a_silent_renderer_changes_only_its_state() -> None:
    down = RendererSeen("r1", "http://r1", RendererState.DOWN, error="unreachable")
    assert renderer_differs(KNOWN, down)
    gone = replace(KNOWN, state=RendererState.DOWN, error="unreachable")
    assert not renderer_differs(gone, down)
