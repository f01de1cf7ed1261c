"""Slot choice: the least busy renderer's lowest free slot, per renderer epoch."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from deckyard.config import Settings
from deckyard.render.control.coordinator import free_slot, workspace_slot_cap
from deckyard.render.control.models import Renderer, RendererState
from deckyard.render.control.requests import RenderQueueFull, queue_check

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def renderer(row_id: int, slots: int, epoch: str = "e1") -> Renderer:
    return Renderer(
        id=row_id,
        name=f"r{row_id}",
        url=f"http://r{row_id}",
        renderer_id=f"host:{row_id}",
        epoch=epoch,
        slots=slots,
        state=RendererState.UP,
        error=None,
        created_at=NOW,
        updated_at=NOW,
    )


def test_lowest_free_slot_of_the_least_busy_renderer() -> None:
    one, two = renderer(1, 3), renderer(2, 3)
    taken = {(1, "e1"): {0}, (2, "e1"): {0, 1}}
    assert free_slot([one, two], taken) == (one, 1)
    assert free_slot([two, one], taken) == (one, 1)


def test_a_tie_goes_to_the_first_renderer_listed() -> None:
    one, two = renderer(1, 2), renderer(2, 2)
    assert free_slot([one, two], {}) == (one, 0)


def test_slots_held_under_an_old_epoch_do_not_count() -> None:
    restarted = renderer(1, 1, epoch="e2")
    assert free_slot([restarted], {(1, "e1"): {0}}) == (restarted, 0)


def test_none_when_every_slot_is_held() -> None:
    one, empty = renderer(1, 2), renderer(2, 0)
    assert free_slot([one, empty], {(1, "e1"): {0, 1}}) is None
    assert free_slot([], {}) is None


def test_queue_check_refuses_at_the_global_then_the_workspace_limit() -> None:
    s = Settings.load(render_queue_limit=10, render_workspace_queue_limit=3)
    queue_check(s, "a", total=9, mine=2)
    with pytest.raises(RenderQueueFull, match="10 screenshots are queued") as full:
        queue_check(s, "a", total=10, mine=0)
    assert full.value.retry_after == s.render_retry_after_seconds
    with pytest.raises(RenderQueueFull, match="workspace a has 3 screenshots queued"):
        queue_check(s, "a", total=5, mine=3)


@pytest.mark.parametrize(
    ("share", "slots", "cap", "expected"),
    [
        (0.5, [2], 4, 1),
        (0.5, [3, 1], 4, 2),
        (0.5, [5], 4, 2),
        (0.5, [1], 4, 1),
        (0.1, [4], 4, 1),
        (1.0, [8], 4, 4),
        (1.0, [3], 4, 3),
        (0.5, [], 4, 1),
    ],
)
def test_a_workspace_gets_its_share_of_the_usable_slots(
    share: float, slots: list[int], cap: int, expected: int
) -> None:
    settings = Settings.load(
        render_workspace_slot_share=share, render_workspace_cap=cap, render_global_cap=16
    )
    renderers = [renderer(i + 1, n) for i, n in enumerate(slots)]
    assert workspace_slot_cap(settings, renderers) == expected


def test_a_page_that_spends_its_budget_is_answered_before_its_check_gives_up() -> None:
    defaults = Settings.load()
    assert defaults.deck_validate_render_timeout_seconds > defaults.render_attempt_timeout_seconds
    assert defaults.deck_api_wait_seconds > defaults.deck_validate_render_timeout_seconds
