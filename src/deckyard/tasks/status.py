"""Task states."""

from __future__ import annotations

from enum import StrEnum


class TaskStatus(StrEnum):
    """Where a task is in its life."""

    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


RESUMABLE = (TaskStatus.PENDING.value, TaskStatus.RUNNING.value)
TERMINAL = (TaskStatus.SUCCEEDED.value, TaskStatus.FAILED.value, TaskStatus.CANCELLED.value)
