"""Leases keep up with the pace of receipt passes, as a long deck attempt needs on a loaded box.

A lease is renewed from a live receipt once less than `render_lease_renew_fraction` of it is
left, or less than two passes' time: when passes come seconds apart (a busy machine, a receipt
of many pages), a lease just above the fraction would expire before the next pass could renew
it, and the attempt, a deck in the middle of its pages, would be lost. SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from deckyard.db import Database
from tests.integration.render.fake_renderer import FakeRenderer
from tests.integration.render.test_control import Plane, make_plane


@pytest.fixture
async def plane(db: Database, tmp_path: Path) -> AsyncIterator[Plane]:
    p = make_plane(db, tmp_path, FakeRenderer("http://r1", slots=2), render_lease_seconds=6.0)
    yield p
    await p.coordinator.client.aclose()


async def test_slow_receipt_passes_renew_before_the_lease_runs_out(plane: Plane) -> None:
    p = plane
    await p.request()
    await p.coordinator.probe_once()
    await p.coordinator.dispatch_once()
    p.renderers[0].set_all("running")
    await p.coordinator.receipts_once()
    [first] = await p.active()
    assert first.last_receipt_at == p.clock.now()
    # passes 2.5 s apart and then 3.6 s: each sees more than half of the 6 s lease left
    for gap in (2.5, 3.6):
        p.clock.advance(gap)
        await p.coordinator.receipts_once()
        await p.coordinator.recover_once()
        [attempt] = await p.active()
        assert attempt.id == first.id, "the attempt was lost between two passes"
        assert attempt.last_receipt_at == p.clock.now(), f"no renewal after {gap} s"


async def test_passes_at_a_quick_pace_still_renew_at_the_fraction(plane: Plane) -> None:
    p = plane
    await p.request()
    await p.coordinator.probe_once()
    await p.coordinator.dispatch_once()
    p.renderers[0].set_all("running")
    await p.coordinator.receipts_once()
    [first] = await p.active()
    p.clock.advance(0.5)
    await p.coordinator.receipts_once()
    [attempt] = await p.active()
    assert attempt.lease_expires_at == first.lease_expires_at, "renewed with most of it left"
