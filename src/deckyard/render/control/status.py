"""States of renderers, render requests and attempts, and the control plane's own error codes."""

from __future__ import annotations

from enum import StrEnum

from deckyard.jobs.status import Lifecycle


class RendererState(StrEnum):
    """Whether a renderer answered its last probe."""

    UP = "up"
    DOWN = "down"


RequestStatus = Lifecycle
"""A render request's status: the lifecycle jobs and tasks share (`jobs.status`)."""


class AttemptState(StrEnum):
    """Where one attempt of a request on one renderer slot is.

    `admitted` holds a slot but has not been confirmed by a receipt yet; `running` was confirmed
    by at least one real receipt. Every other state has released its slot.
    """

    ADMITTED = "admitted"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    LOST = "lost"
    CANCELLED = "cancelled"
    REFUSED = "refused"


ACTIVE_ATTEMPT = (AttemptState.ADMITTED.value, AttemptState.RUNNING.value)


class ControlErrorCode(StrEnum):
    """Error codes the control plane itself raises (the renderer's live in `render.protocol`)."""

    QUEUE_FULL = "RENDER_QUEUE_FULL"
    NO_RENDERER = "RENDER_NO_RENDERER"


WAKE_RENDER = "render"
"""Bus channel that wakes the coordinator: a request arrived, was cancelled or was requeued."""
WAKE_REQUESTS = "render.requests"
"""Bus channel woken whenever a render request changes state; `wait_for_terminal` listens."""
