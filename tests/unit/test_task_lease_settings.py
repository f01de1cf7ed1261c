"""Task lease settings: the lease must cover at least three heartbeats, like the jobs lease."""

from __future__ import annotations

import pytest

from deckyard.config import Settings, SettingsError


def test_task_lease_shorter_than_three_heartbeats_is_refused() -> None:
    with pytest.raises(SettingsError, match="DECKYARD_TASK_LEASE_SECONDS"):
        Settings.load(task_lease_seconds=10, task_heartbeat_interval_seconds=5)


def test_task_lease_of_three_heartbeats_is_accepted() -> None:
    s = Settings.load(task_lease_seconds=15, task_heartbeat_interval_seconds=5)
    assert (s.task_lease_seconds, s.task_heartbeat_interval_seconds) == (15, 5)
