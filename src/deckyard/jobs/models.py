"""Jobs and job events as plain values."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Row

from deckyard.jobs.status import JobStatus


@dataclass(frozen=True)
class Job:
    """One job row."""

    id: int
    queue: str
    kind: str
    payload: Any
    status: JobStatus
    priority: int
    run_at: datetime
    attempt: int
    max_attempts: int
    lease_owner: str | None
    lease_expires_at: datetime | None
    dedupe_key: str | None
    workspace_id: str | None
    parent_id: int | None
    deadline_at: datetime | None
    cancel_requested_at: datetime | None
    result: Any
    error_code: str | None
    error_message: str | None
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    actor_token_id: int | None = None

    @classmethod
    def from_row(cls, row: Row[Any], **missing: Any) -> Job:
        """Build from a row selected with `jobs.schema.JOB_COLUMNS`; `missing` gives the
        columns the select left out (`payload=None`)."""
        values = {**row._asdict(), **missing}
        values["status"] = JobStatus(values["status"])
        return cls(**values)

    @property
    def is_terminal(self) -> bool:
        """True once the job can never run again."""
        return not self.status.is_active

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly dict."""
        out: dict[str, Any] = {}
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            out[name] = value.isoformat() if isinstance(value, datetime) else value
        out["status"] = self.status.value
        return out


@dataclass(frozen=True)
class JobEvent:
    """One entry of a job's event log."""

    id: int
    job_id: int
    created_at: datetime
    type: str
    data: Any

    @classmethod
    def from_row(cls, row: Row[Any]) -> JobEvent:
        """Build from a row selected with `jobs.schema.EVENT_COLUMNS`."""
        return cls(**row._asdict())

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly dict."""
        return {
            "id": self.id,
            "job_id": self.job_id,
            "created_at": self.created_at.isoformat(),
            "type": self.type,
            "data": self.data,
        }
