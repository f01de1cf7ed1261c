"""Task states: the lifecycle jobs and render requests share (`jobs.status`)."""

from __future__ import annotations

from deckyard.jobs.status import ACTIVE, Lifecycle

TaskStatus = Lifecycle
"""A task's status."""

RESUMABLE = ACTIVE
"""Statuses of a task that is not over: driving it again continues where it was."""
