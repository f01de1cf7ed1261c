"""Periodic jobs: cron tick arithmetic, missed ticks, and the job one tick enqueues."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from deckyard.jobs import Periodic

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def every(minutes: int) -> Periodic:
    return Periodic(
        name="sweep", cron=f"*/{minutes} * * * *", kind="k", queue="q", payload={}, max_attempts=2
    )


def test_next_tick_is_strictly_after_and_previous_tick_strictly_before() -> None:
    p = every(5)
    assert p.next_tick(T0) == T0 + timedelta(minutes=5)
    assert p.next_tick(T0 + timedelta(seconds=1)) == T0 + timedelta(minutes=5)
    assert p.previous_tick(T0 + timedelta(minutes=7)) == T0 + timedelta(minutes=5)
    assert p.previous_tick(T0) == T0 - timedelta(minutes=5)


def test_a_tick_is_due_only_once_its_time_came() -> None:
    p = every(5)
    assert p.due_tick(T0, T0 - timedelta(seconds=1)) is None
    assert p.due_tick(T0, T0) == T0
    assert p.due_tick(T0, T0 + timedelta(minutes=4)) == T0


def test_after_a_pause_only_the_latest_missed_tick_runs() -> None:
    p = every(5)
    assert p.due_tick(T0, T0 + timedelta(minutes=23)) == T0 + timedelta(minutes=20)


def test_each_tick_has_its_own_dedupe_key() -> None:
    p = every(5)
    job = p.job(T0)
    assert (job.kind, job.queue, job.max_attempts, job.run_at) == ("k", "q", 2, T0)
    assert job.dedupe_key == f"periodic:sweep:{T0.isoformat()}"
    assert p.job(p.next_tick(T0)).dedupe_key != job.dedupe_key


def test_an_invalid_cron_expression_is_refused() -> None:
    with pytest.raises(ValueError, match="invalid cron"):
        Periodic(name="x", cron="every tuesday", kind="k", queue="q", payload={}, max_attempts=1)


def ticks_enqueued(p: Periodic, scheduled: datetime, now: datetime) -> list[datetime]:
    """What the periodic loop enqueues at `now`, ticking until nothing more is due."""
    enqueued: list[datetime] = []
    while (tick := p.due_tick(scheduled, now)) is not None:
        enqueued.append(tick)
        scheduled = p.next_tick(tick)
    return enqueued


def test_a_pause_that_ends_exactly_on_a_tick_enqueues_that_tick_once() -> None:
    p = every(5)
    assert ticks_enqueued(p, T0, T0 + timedelta(minutes=20)) == [T0 + timedelta(minutes=20)]
    assert ticks_enqueued(p, T0, T0 + timedelta(minutes=23)) == [T0 + timedelta(minutes=20)]
    assert ticks_enqueued(p, T0, T0) == [T0]
