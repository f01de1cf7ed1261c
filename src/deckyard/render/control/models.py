"""Renderers, render requests, attempts and deck pages as plain values, and result-commit counts."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Row

from deckyard.render.control.status import AttemptState, RendererState, RequestStatus

DECK_KIND = "deck"
"""The kind of a render request covering every page of a deck version (`render_pages`)."""


@dataclass(frozen=True)
class Renderer:
    """One renderer as the control plane last saw it."""

    id: int
    name: str
    url: str
    renderer_id: str | None
    epoch: str | None
    slots: int
    state: RendererState
    error: str | None
    created_at: datetime
    updated_at: datetime

    @classmethod
    def from_row(cls, row: Row[Any]) -> Renderer:
        """Build from a `render_workers` row selected with `store.RENDERER_COLUMNS`."""
        values = row._asdict()
        values["state"] = RendererState(values["state"])
        return cls(**values)


@dataclass(frozen=True)
class RenderRequest:
    """One render request row."""

    id: int
    kind: str
    workspace_id: str
    input: Any
    input_hash: str
    dedupe_key: str | None
    status: RequestStatus
    attempts: int
    max_attempts: int
    deadline_at: datetime
    retry_after: datetime
    cancel_requested_at: datetime | None
    result: Any
    error_code: str | None
    error_message: str | None
    artifact_key: str | None
    parent_job_id: int | None
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None

    @classmethod
    def from_row(cls, row: Row[Any]) -> RenderRequest:
        """Build from a row selected with `store.REQUEST_COLUMNS`."""
        values = row._asdict()
        values["status"] = RequestStatus(values["status"])
        return cls(**values)

    @property
    def is_terminal(self) -> bool:
        """True once the request can never change again."""
        return self.status.is_terminal

    @property
    def is_deck(self) -> bool:
        """True for a request that renders every page of a deck in one attempt at a time."""
        return self.kind == DECK_KIND

    @property
    def reusable(self) -> bool:
        """True while live or once succeeded: a retry of its job can take it over."""
        return not self.is_terminal or self.status is RequestStatus.SUCCEEDED


@dataclass(frozen=True)
class RenderAttempt:
    """One attempt row."""

    id: int
    request_id: int
    attempt_key: str
    workspace_id: str
    renderer_row_id: int
    """`render_workers.id` of the renderer holding the slot (column `worker_id`)."""
    renderer_epoch: str
    """The renderer's epoch when the slot was taken (column `worker_epoch`)."""
    slot: int
    active_occupancy: int
    status: AttemptState
    timeout_seconds: float
    lease_expires_at: datetime
    last_receipt_at: datetime | None
    last_receipt_status: str | None
    error_code: str | None
    error_message: str | None
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None
    extra_slots: list[int] | None = None
    """More slots of the same renderer a deck attempt holds besides `slot`."""

    @property
    def slots(self) -> list[int]:
        """Every slot the attempt holds (while it holds any)."""
        return [self.slot, *(self.extra_slots or [])]

    @classmethod
    def from_row(cls, row: Row[Any]) -> RenderAttempt:
        """Build from a row selected with `store.ATTEMPT_COLUMNS`; maps `worker_*` columns."""
        values = row._asdict()
        values["status"] = AttemptState(values["status"])
        values["renderer_row_id"] = values.pop("worker_id")
        values["renderer_epoch"] = values.pop("worker_epoch")
        values["extra_slots"] = list(values.get("extra_slots") or []) or None
        return cls(**values)


@dataclass(frozen=True)
class RenderPage:
    """One page of a deck request and, once committed, its result."""

    id: int
    request_id: int
    page_index: int
    status: str
    attempt_id: int | None
    result: Any
    artifact_key: str | None
    error_code: str | None
    error_message: str | None
    committed_at: datetime | None

    @classmethod
    def from_row(cls, row: Row[Any]) -> RenderPage:
        """Build from a `render_pages` row."""
        return cls(**row._asdict())

    @property
    def committed(self) -> bool:
        """True once an attempt's result for this page was committed."""
        return self.status == PAGE_COMMITTED


PAGE_PENDING = "pending"
PAGE_COMMITTED = "committed"


@dataclass
class ResultStats:
    """How result commits went, for metrics and tests."""

    committed: int = 0
    refused: int = 0
    lost: int = 0
    refused_keys: list[str] = field(default_factory=list)
