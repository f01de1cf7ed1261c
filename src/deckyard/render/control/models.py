"""The control plane's vocabulary: states and error codes, what a client may ask to be rendered
(`ScreenshotSpec`), and renderers, render requests, attempts and deck pages as plain values."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator
from sqlalchemy import Row

from deckyard.jobs.status import Lifecycle
from deckyard.render.protocol import WaitRules, document_key


class RendererState(StrEnum):
    """Whether a renderer answered its last probe, and whether it is draining.

    `draining`: it answers but takes no new attempts (SIGTERM, or `POST
    /v1/renderers/{id}/drain`) while its in-flight ones finish; `drained`: a draining renderer
    that stopped answering, as it does once its drain is over. A new epoch under the same name
    (its replacement) is `up` again.
    """

    UP = "up"
    DOWN = "down"
    DRAINING = "draining"
    DRAINED = "drained"


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
    INPUT_GONE = "RENDER_INPUT_GONE"
    """A job's page, named by key, is no longer stored (swept after the job ended, then retried)."""


DOCUMENT_PREFIX = "render-documents/"
"""Where a render's document is stored once, by content key, in the artefact store
(`requests.document_object_key`); the sweep reads it back (`store_retention.py`)."""

WAKE_DISPATCH = "render.dispatch"
"""Bus channel of the dispatch loop: a request became due (new, requeued) or a slot was freed."""
WAKE_ATTEMPTS = "render.attempts"
"""Bus channel of the recovery loop: an attempt took a slot under a lease (its expiry is due)."""
WAKE_STOP = "render.stop"
"""Bus channel of the receipt loop: a running request was cancelled and must be stopped."""
WAKE_REQUESTS = "render.requests"
"""Bus channel woken whenever a render request changes state; `wait_for_terminal` listens."""
RENDER_REQUEST_EVENT = "render_request"
"""The job event a job emits once its render request exists (`{"request_id": ...}`)."""


class ScreenshotSpec(BaseModel):
    """A screenshot of a self-contained HTML document or of a URL.

    Exactly one of `html` and `url`. Limits the renderer enforces from its own settings (pixel
    budget, document size) are checked there and come back as `RENDER_INVALID_INPUT`.
    """

    model_config = ConfigDict(extra="forbid")

    html: str | None = Field(None, min_length=1)
    files: dict[str, str] | None = Field(
        None,
        description="With `html`: more files (relative path -> base64) the document may load "
        "from its own origin, e.g. a built site's pages and assets; nothing else loads.",
    )
    url: str | None = Field(None, min_length=1, max_length=8192, validate_default=True)
    width: int = Field(1920, ge=1, le=16384)
    height: int = Field(1080, ge=1, le=16384)
    scale: float = Field(1.0, gt=0, le=4)
    format: Literal["png", "jpeg", "webp", "pdf"] = "png"
    quality: int | None = Field(None, ge=1, le=100)
    full_page: bool = False
    clip_selector: str | None = Field(None, min_length=1, max_length=1000)
    omit_background: bool = False
    media: Literal["screen", "print"] = "screen"
    wait: WaitRules = Field(default_factory=WaitRules)
    fail_on_page_error: bool = False
    pdf_tagged: bool = Field(
        False,
        description="With format pdf: Chromium's tagged PDF (a structure tree for screen "
        "readers); a larger file.",
    )

    layout: bool = Field(
        False,
        description="Also return the page's layout (text, lists, tables, images, code as the "
        "browser laid them out) in the result's `diagnostics.layout`, for an editable export.",
    )
    audit: bool = Field(
        False,
        description="Also audit the page after its capture (axe-core's accessibility rules, "
        "missing glyphs), where the renderer runs the audit (`renderer_page_audit`); the "
        "findings are in the result's diagnostics. A page's validation does; a screenshot "
        "does not unless asked: the audit can take as long as the render itself.",
    )

    @field_validator("url")
    @classmethod
    def _one_source(cls, url: str | None, info: ValidationInfo) -> str | None:
        html = info.data.get("html")
        if url is None and html is None:
            raise ValueError("give html or url")
        if url is not None and html is not None:
            raise ValueError("give either html or url, not both")
        if url is not None and not url.lower().startswith(("http://", "https://")):
            raise ValueError("must be an http or https URL")
        return url

    @field_validator("quality")
    @classmethod
    def _quality_format(cls, quality: int | None, info: ValidationInfo) -> int | None:
        if quality is not None and info.data.get("format") not in ("jpeg", "webp"):
            raise ValueError("applies only to jpeg and webp")
        return quality

    @field_validator("pdf_tagged")
    @classmethod
    def _tagged_pdf(cls, tagged: bool, info: ValidationInfo) -> bool:
        if tagged and info.data.get("format") != "pdf":
            raise ValueError("applies only to pdf")
        return tagged

    @field_validator("clip_selector")
    @classmethod
    def _clip_or_full(cls, selector: str | None, info: ValidationInfo) -> str | None:
        if selector is not None and info.data.get("full_page"):
            raise ValueError("excludes full_page")
        return selector

    def render_input(self, *, capture: bool = True) -> dict[str, Any]:
        """The renderer's `RenderInput` fields (without the per-attempt id and timeout).

        Without `capture` the renderer loads, settles and inspects the page but takes no
        picture: a check whose picture nobody keeps (`POST /v1/validate`).
        """
        data = self.model_dump(mode="json", exclude={"html", "files"})
        if not self.pdf_tagged:
            # left out unless asked: the input hash of every other render stays as it was
            del data["pdf_tagged"]
        if not self.layout:
            del data["layout"]
        if self.audit:
            del data["audit"]
        data["document"] = self.html
        if self.files is not None:
            data["files"] = self.files
        if not capture:
            data["capture"] = False
        return data

    def picture_hash(self) -> str:
        """`input_hash` without the audit: renders that differ only in whether they were
        audited draw the same picture (a screenshot may use the one its validation drew)."""
        return self.model_copy(update={"audit": True}).input_hash()

    def input_hash(self, *, capture: bool = True) -> str:
        """SHA-256 of the canonical render input: the same target and config hash the same.

        The document enters by its content key (`document_key`), as the request's row and the
        renderer call name it: JSON-escaping a ~780 KiB page to hash it cost ~5 ms a call,
        twice per screenshot (the API's dedupe key, the handler's request).
        """
        data = self.render_input(capture=capture)
        document = data.pop("document", None)
        if document is not None:
            data["document_key"] = document_key(document)
        return input_digest(data)


def input_digest(render: dict[str, Any]) -> str:
    """SHA-256 of a render input whose document is named by its `document_key` (what
    `ScreenshotSpec.input_hash` hashes, and a request's input names)."""
    canonical = json.dumps(render, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


SCREENSHOT_KIND = "screenshot"
"""The kind of a one-page render request: a screenshot, a validation, a deck page's check."""
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
    draining_since: datetime | None = None
    """When a drain of its current epoch began; None while it is not draining."""

    @classmethod
    def from_row(cls, row: Row[Any]) -> Renderer:
        """Build from a `renderers` row selected with `store.RENDERER_COLUMNS`."""
        values = row._asdict()
        values["state"] = RendererState(values["state"])
        return cls(**values)

    @property
    def admits(self) -> bool:
        """Whether new attempts may be admitted to it: up, not draining, with a known epoch."""
        return (
            self.state is RendererState.UP
            and self.draining_since is None
            and self.epoch is not None
            and self.slots > 0
        )


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
    """`renderers.id` of the renderer holding the slot (column `renderer_id`)."""
    renderer_epoch: str
    """The renderer's epoch when the slot was taken."""
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
        """Build from a row selected with `store.ATTEMPT_COLUMNS`; maps `renderer_id`."""
        values = row._asdict()
        values["status"] = AttemptState(values["status"])
        values["renderer_row_id"] = values.pop("renderer_id")
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
