"""Settings and helpers for runtime tests: short cadences so hundreds of ticks happen quickly."""

from __future__ import annotations

from typing import Any

from deckyard.config import Settings

FAST: dict[str, Any] = {
    "job_poll_interval_seconds": 0.05,
    "job_idle_poll_ceiling_seconds": 0.2,
    "job_claim_idle_ceiling_seconds": 0.2,
    "job_lease_seconds": 1.5,
    "job_heartbeat_interval_seconds": 0.3,
    "job_retry_base_delay_seconds": 0.02,
    "job_retry_max_delay_seconds": 0.1,
    "job_recovery_backoff_seconds": 0.0,
    "job_stop_grace_seconds": 2.0,
    "loop_error_backoff_seconds": 0.05,
    "job_periodic_check_seconds": 0.05,
    "renderers": 0,
}


def fast_settings(**over: Any) -> Settings:
    """Settings with test cadences (environment ignored for these fields)."""
    return Settings.load(**{**FAST, **over})
