"""The renderer's wire protocol: request, receipt and capabilities models, error codes, headers,
and the HMAC signature every control-API request carries.

Both sides import this module and nothing else of each other: the control plane
(`render.control`) and the renderer process (`render.renderer`), as well as `decks` for the
diagnostics a validation reads. Pydantic checks shapes; `check_limits` checks the bounds that come
from settings (dimensions, pixels, scale, document size, timeout), so both produce a 422 naming
the offending field.

Error codes say who is to blame. The control plane retries infrastructure failures on another
attempt and never retries content failures; a cancellation is neither. Keeping the split in one
table means the two kinds cannot be confused by a caller matching on strings.

The signature (`sign`, `HmacAuth` on the client, `SignatureVerifier` on the renderer) covers the
method, the raw path with its query string, a Unix timestamp and the SHA-256 of the body, so a
captured request cannot be replayed against another path or with another body. It can be
replayed unchanged within the skew window; every renderer call is idempotent (submitting the same
attempt twice, cancelling twice), which is what makes that acceptable.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Generator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal

import httpx
from pydantic import BaseModel, ConfigDict, Field, model_validator

from deckyard.clock import SYSTEM_CLOCK, Clock
from deckyard.config import Settings

ATTEMPT_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"
DOCUMENT_KEY_PATTERN = r"^[0-9a-f]{64}$"
"""A document key: the lowercase hex SHA-256 of the document's UTF-8 bytes."""
IMAGE_FORMATS = ("png", "jpeg", "webp", "pdf")
DEFAULT_WIDTH = 1920
DEFAULT_HEIGHT = 1080
SIGNATURE_HEADER = "X-Deckyard-Signature"
"""`v1=<hex>` HMAC of the request; see `sign`."""
TIMESTAMP_HEADER = "X-Deckyard-Timestamp"
"""Unix seconds the signature was made at, checked against a clock-skew window."""
ARTIFACT_SHA256_HEADER = "X-Deckyard-Artifact-Sha256"
"""SHA-256 of an artefact body, sent with `GET /v1/attempts/{id}/pages/{index}/artifact`."""
ARTIFACT_SIZE_HEADER = "X-Deckyard-Artifact-Size"
"""Byte size of an artefact body."""
ATTEMPT_ID_HEADER = "X-Deckyard-Attempt-Id"
"""The attempt an artefact or error response belongs to."""

CONTENT_TYPES = {
    "png": "image/png",
    "jpeg": "image/jpeg",
    "webp": "image/webp",
    "pdf": "application/pdf",
}


class AttemptStatus(StrEnum):
    """Where an attempt is in its life, as reported in receipts."""

    ACCEPTED = "accepted"
    RUNNING = "running"
    CLEANING = "cleaning"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    UNKNOWN = "unknown"

    @property
    def terminal(self) -> bool:
        """Whether the attempt will not change any more."""
        return self in (AttemptStatus.SUCCEEDED, AttemptStatus.FAILED, AttemptStatus.CANCELLED)


def document_key(document: str) -> str:
    """The content key of `document`: the hex SHA-256 of its UTF-8 bytes."""
    return hashlib.sha256(document.encode("utf-8")).hexdigest()


class WaitRules(BaseModel):
    """What to wait for before capturing; `document.fonts.ready` is always awaited too."""

    model_config = ConfigDict(extra="forbid")

    until: Literal["load", "domcontentloaded", "networkidle"] = "load"
    selector: str | None = Field(None, min_length=1, max_length=1000)
    expression: str | None = Field(None, min_length=1, max_length=10_000)
    delay_ms: int = Field(0, ge=0)


class RenderInput(BaseModel):
    """One render: a self-contained HTML document or a URL, and how to capture it."""

    model_config = ConfigDict(extra="forbid")

    document: str | None = None
    document_key: str | None = Field(
        None,
        pattern=DOCUMENT_KEY_PATTERN,
        description="Instead of `document`: the SHA-256 of a document this renderer was sent "
        "before (it keeps them by key); an unknown key is refused with 422 "
        "`RENDER_DOCUMENT_UNKNOWN` and its `missing` keys, and the caller sends the document.",
    )
    files: dict[str, str] | None = Field(
        None,
        description="With `document` or `document_key`: more files (relative path -> base64) "
        "served from the document's own origin, e.g. a static site's pages and assets. "
        "Nothing else loads.",
    )
    url: str | None = Field(None, min_length=1, max_length=8192)
    width: int = Field(DEFAULT_WIDTH, ge=1)
    height: int = Field(DEFAULT_HEIGHT, ge=1)
    scale: float = Field(1.0, gt=0)
    full_page: bool = False
    clip_selector: str | None = Field(None, min_length=1, max_length=1000)
    format: Literal["png", "jpeg", "webp", "pdf"] = "png"
    quality: int | None = Field(None, ge=1, le=100)
    omit_background: bool = False
    media: Literal["screen", "print"] = "screen"
    wait: WaitRules = Field(default_factory=WaitRules)
    timeout_seconds: float | None = Field(None, gt=0)
    fail_on_page_error: bool = False
    pdf_tagged: bool = Field(
        False, description="With format pdf: Chromium's tagged PDF (`page.pdf(tagged=True)`)."
    )
    layout: bool = Field(
        False,
        description="Also return the page's layout as the browser laid it out (text blocks "
        "and their runs, lists, tables, images, code, and what else paints), bounded, in "
        "`diagnostics.layout`: an editable export rebuilds the slide from it.",
    )
    audit: bool = Field(
        True,
        description="False: skip the page audit (axe-core's accessibility rules, missing "
        "glyphs) even where the renderer runs it (`renderer_page_audit`): a render for an "
        "export, whose page was checked when it was validated.",
    )
    capture: bool = Field(
        True,
        description="False: load, settle and inspect the page only, for its diagnostics (a "
        "validation that keeps no picture); the page succeeds without an artefact and "
        "`format` is not used.",
    )

    tenant: str | None = Field(
        None,
        max_length=200,
        description="Who the render is for (the control plane sends the workspace). A document "
        "render that runs no script and brings no files leaves its tab to the next render "
        "of the same tenant without the reset between them; a render of another tenant, or "
        "without one, gets a reset tab as always.",
    )

    @model_validator(mode="after")
    def _one_source(self) -> RenderInput:
        given = [self.document, self.document_key, self.url]
        if sum(value is not None for value in given) != 1:
            raise ValueError("give exactly one of document, document_key or url")
        if self.files is not None:
            if self.url is not None:
                raise ValueError("files go with document, not with url")
            for path in self.files:
                if not bundle_path_ok(path):
                    raise ValueError(f"files: {path!r} must be a relative path without '..'")
        if self.quality is not None and self.format not in ("jpeg", "webp"):
            raise ValueError("quality applies only to jpeg and webp")
        if self.clip_selector is not None and self.full_page:
            raise ValueError("clip_selector and full_page exclude each other")
        if self.pdf_tagged and self.format != "pdf":
            raise ValueError("pdf_tagged applies only to pdf")
        return self

    def fingerprint(self) -> str:
        """SHA-256 of the canonical JSON form, to tell a resubmission from a different input."""
        return hashlib.sha256(self.model_dump_json().encode("utf-8")).hexdigest()


class DeckPage(RenderInput):
    """One page of a deck attempt: its render and its index in the deck."""

    index: int = Field(ge=0)


class DeckAttemptRequest(BaseModel):
    """`POST /v1/deck-attempts`: render pages under one attempt id, `parallel` at a time.

    The renderer's only unit of work: a single render is a deck attempt of one page (index 0).
    Every page has its own `timeout_seconds`; `deadline_seconds` bounds the whole attempt. A
    page's result shows up in the attempt's receipt (`pages`) as soon as that page is done; a
    page with `capture` false succeeds with its diagnostics and no artefact.
    """

    model_config = ConfigDict(extra="forbid")

    attempt_id: str = Field(pattern=ATTEMPT_ID_PATTERN)
    pages: list[DeckPage] = Field(min_length=1)
    parallel: int = Field(1, ge=1)
    deadline_seconds: float | None = Field(None, gt=0)

    @model_validator(mode="after")
    def _distinct(self) -> DeckAttemptRequest:
        if len({p.index for p in self.pages}) != len(self.pages):
            raise ValueError("pages: every index once")
        return self

    def fingerprint(self) -> str:
        """SHA-256 of the canonical JSON form, to tell a resubmission from a different input."""
        return hashlib.sha256(self.model_dump_json().encode("utf-8")).hexdigest()


class RequestProblem(BaseModel):
    """A request that failed or was blocked, with the reason."""

    url: str
    reason: str


class AccessibilityProblem(BaseModel):
    """An axe-core rule a document broke: the rule id, its impact, where, and what is wrong."""

    rule: str
    impact: str | None = None
    target: str
    message: str


class GlyphProblem(BaseModel):
    """Text drawn without a glyph (tofu) or in a font the page never named (fallback).

    `characters` are the characters concerned (missing glyphs only), `requested` the
    `font-family` the element asked for, `drawn_with` the fonts Chromium actually used.
    """

    element: str
    text: str
    characters: str = ""
    requested: str
    drawn_with: list[str] = Field(default_factory=list)


class Timings(BaseModel):
    """Milliseconds spent per phase; `capture` includes Chromium's own encoding."""

    navigate_ms: float = 0.0
    settle_ms: float = 0.0
    capture_ms: float = 0.0
    audit_ms: float = 0.0
    encode_ms: float = 0.0
    total_ms: float = 0.0


class Diagnostics(BaseModel):
    """What the page did wrong or oddly while rendering; lists are capped by settings."""

    console_errors: list[str] = Field(default_factory=list)
    page_errors: list[str] = Field(default_factory=list)
    failed_requests: list[RequestProblem] = Field(default_factory=list)
    blocked_requests: list[RequestProblem] = Field(default_factory=list)
    broken_images: list[str] = Field(default_factory=list)
    fonts_not_loaded: list[str] = Field(default_factory=list)
    overflow: list[str] = Field(default_factory=list)
    invisible_text: list[str] = Field(default_factory=list)
    accessibility: list[AccessibilityProblem] = Field(default_factory=list)
    missing_glyphs: list[GlyphProblem] = Field(default_factory=list)
    font_fallbacks: list[GlyphProblem] = Field(default_factory=list)
    document_width: int | None = None
    document_height: int | None = None
    truncated: bool = False
    timings: Timings = Field(default_factory=Timings)
    layout: dict[str, Any] | None = Field(
        None, description="The page's layout, when the render asked for it (`layout`)."
    )


class ArtifactInfo(BaseModel):
    """The stored result of a succeeded attempt."""

    format: str
    content_type: str
    size: int
    sha256: str


class PageReceipt(BaseModel):
    """One finished page of an attempt: its artefact, or why it has none (a page that
    succeeded without one did not ask for a picture: `capture` false)."""

    index: int
    status: AttemptStatus
    error_code: str | None = None
    error_kind: str | None = None
    retryable: bool | None = None
    message: str | None = None
    diagnostics: Diagnostics | None = None
    artifact: ArtifactInfo | None = None


class Receipt(BaseModel):
    """An attempt's state as the renderer knows it now; `pages` lists its finished pages.

    Every attempt is an attempt of N pages: each page carries its own diagnostics and
    artefact. An attempt whose pages all got a verdict succeeds even if a page failed on its
    content: the attempt's `error_code` is a page's infrastructure failure or what stopped it
    (its deadline, a cancel, a drain).
    """

    attempt_id: str
    status: AttemptStatus
    renderer_id: str
    epoch: str
    slot: int | None = None
    error_code: str | None = None
    error_kind: str | None = None
    retryable: bool | None = None
    message: str | None = None
    pages: list[PageReceipt] | None = None
    changes: int | None = None
    """On a submission's answer: the renderer's change count (`GET /v1/changes`) just before
    this attempt could end, so a long-poll begun from it misses no ending and waits for one."""


class ChangesAnswer(BaseModel):
    """`GET /v1/changes`: the count of attempt endings, busy slots, epoch, and with
    `receipts=1` the receipts of the attempts that ended past `after`.

    An attempt "ended" here when it ended or finished a page, so `receipts` holds live
    attempts too, each listing the pages it has finished. `complete` says `receipts` holds every
    attempt that ended past `after` (the renderer keeps the last few hundred endings;
    `after=-1` gets none). `artifacts` carries the artefacts of succeeded pages among them,
    base64, keyed `"{attempt_id}/{index}"` (an attempt id has no slash), each page's once (the
    first answer it fits in), up to `renderer_changes_inline_max_bytes` in all: the control
    plane commits those pages without an artefact round trip.
    """

    changes: int
    busy: int
    epoch: str
    receipts: list[Receipt] = Field(default_factory=list)
    complete: bool = False
    artifacts: dict[str, str] = Field(default_factory=dict)


class Capabilities(BaseModel):
    """`GET /v1/capabilities`: who this renderer is and what it can do."""

    renderer_id: str
    epoch: str
    slots: int
    free_slots: int
    browser_version: str
    browser_generation: int
    formats: list[str]
    max_dimension: int
    max_pixels: int
    max_scale: float
    max_timeout_seconds: float


@dataclass(frozen=True)
class FieldProblem:
    """One invalid input field and what is wrong with it."""

    field: str
    message: str


def bundle_path_ok(path: str) -> bool:
    """True for a plain relative path inside the bundle (no escape, no scheme, no backslash)."""
    if not path or len(path) > 500 or path.startswith("/") or "\\" in path or ":" in path:
        return False
    return all(part not in ("", ".", "..") for part in path.split("/"))


def check_limits(render: RenderInput, settings: Settings) -> list[FieldProblem]:
    """Bounds from settings that pydantic cannot know; an empty list means the input is fine."""
    problems: list[FieldProblem] = []
    top = settings.renderer_max_dimension
    for name, value in (("width", render.width), ("height", render.height)):
        if value > top:
            problems.append(FieldProblem(name, f"must be at most {top}"))
    if render.scale > settings.renderer_max_scale:
        problems.append(FieldProblem("scale", f"must be at most {settings.renderer_max_scale}"))
    device_pixels = render.width * render.height * render.scale * render.scale
    if device_pixels > settings.renderer_max_pixels:
        problems.append(
            FieldProblem(
                "width",
                f"width x height x scale^2 must be at most {settings.renderer_max_pixels}",
            )
        )
    if render.document is not None:
        size = len(render.document.encode("utf-8"))
        size += sum(len(v) * 3 // 4 for v in (render.files or {}).values())
        if size > settings.renderer_max_document_bytes:
            problems.append(
                FieldProblem(
                    "document", f"must be at most {settings.renderer_max_document_bytes} bytes"
                )
            )
    timeout = render.timeout_seconds
    if timeout is not None and timeout > settings.renderer_max_timeout_seconds:
        problems.append(
            FieldProblem(
                "timeout_seconds", f"must be at most {settings.renderer_max_timeout_seconds}"
            )
        )
    if render.wait.delay_ms / 1000 > settings.renderer_max_timeout_seconds:
        problems.append(FieldProblem("wait.delay_ms", "must be shorter than the maximum timeout"))
    return problems


class ErrorKind(StrEnum):
    """Who is to blame for a failed render."""

    INFRASTRUCTURE = "infrastructure"
    CONTENT = "content"
    CANCELLED = "cancelled"


class RenderErrorCode(StrEnum):
    """Every error code a renderer can report in a receipt or an HTTP error body."""

    SERVICE_UNAVAILABLE = "RENDER_SERVICE_UNAVAILABLE"
    NO_FREE_SLOT = "RENDER_NO_FREE_SLOT"
    RESULT_LOST = "RENDER_RESULT_LOST"
    DEADLINE_EXCEEDED = "RENDER_DEADLINE_EXCEEDED"
    PAGE_BUDGET_EXCEEDED = "RENDER_PAGE_BUDGET_EXCEEDED"
    BROWSER_CRASHED = "RENDER_BROWSER_CRASHED"
    WORKER_STOPPED = "RENDER_WORKER_STOPPED"
    INTERNAL_ERROR = "RENDER_INTERNAL_ERROR"
    UNAUTHORIZED = "RENDER_UNAUTHORIZED"
    CANCELLED = "RENDER_CANCELLED"
    PAGE_ERROR = "RENDER_PAGE_ERROR"
    NAVIGATION_FAILED = "RENDER_NAVIGATION_FAILED"
    NAVIGATION_BLOCKED = "RENDER_NAVIGATION_BLOCKED"
    SSRF_BLOCKED = "RENDER_SSRF_BLOCKED"
    INVALID_INPUT = "RENDER_INVALID_INPUT"
    SELECTOR_NOT_FOUND = "RENDER_SELECTOR_NOT_FOUND"
    WAIT_FAILED = "RENDER_WAIT_FAILED"
    OUTPUT_TOO_LARGE = "RENDER_OUTPUT_TOO_LARGE"
    ATTEMPT_CONFLICT = "RENDER_ATTEMPT_CONFLICT"
    DOCUMENT_UNKNOWN = "RENDER_DOCUMENT_UNKNOWN"


_KIND: dict[RenderErrorCode, ErrorKind] = {
    RenderErrorCode.SERVICE_UNAVAILABLE: ErrorKind.INFRASTRUCTURE,
    RenderErrorCode.NO_FREE_SLOT: ErrorKind.INFRASTRUCTURE,
    RenderErrorCode.RESULT_LOST: ErrorKind.INFRASTRUCTURE,
    RenderErrorCode.DEADLINE_EXCEEDED: ErrorKind.INFRASTRUCTURE,
    RenderErrorCode.PAGE_BUDGET_EXCEEDED: ErrorKind.CONTENT,
    RenderErrorCode.BROWSER_CRASHED: ErrorKind.INFRASTRUCTURE,
    RenderErrorCode.WORKER_STOPPED: ErrorKind.INFRASTRUCTURE,
    RenderErrorCode.INTERNAL_ERROR: ErrorKind.INFRASTRUCTURE,
    RenderErrorCode.UNAUTHORIZED: ErrorKind.INFRASTRUCTURE,
    RenderErrorCode.CANCELLED: ErrorKind.CANCELLED,
    RenderErrorCode.PAGE_ERROR: ErrorKind.CONTENT,
    RenderErrorCode.NAVIGATION_FAILED: ErrorKind.CONTENT,
    RenderErrorCode.NAVIGATION_BLOCKED: ErrorKind.CONTENT,
    RenderErrorCode.SSRF_BLOCKED: ErrorKind.CONTENT,
    RenderErrorCode.INVALID_INPUT: ErrorKind.CONTENT,
    RenderErrorCode.SELECTOR_NOT_FOUND: ErrorKind.CONTENT,
    RenderErrorCode.WAIT_FAILED: ErrorKind.CONTENT,
    RenderErrorCode.OUTPUT_TOO_LARGE: ErrorKind.CONTENT,
    RenderErrorCode.ATTEMPT_CONFLICT: ErrorKind.CONTENT,
    RenderErrorCode.DOCUMENT_UNKNOWN: ErrorKind.INFRASTRUCTURE,
}

_NOT_RETRYABLE_INFRASTRUCTURE = frozenset({RenderErrorCode.UNAUTHORIZED})


def error_kind(code: RenderErrorCode | str) -> ErrorKind:
    """The kind of `code`; an unrecognised code counts as infrastructure, the safe guess."""
    try:
        return _KIND[RenderErrorCode(code)]
    except ValueError:
        return ErrorKind.INFRASTRUCTURE


def is_infrastructure(code: RenderErrorCode | str) -> bool:
    """Whether `code` blames the renderer or its surroundings rather than the page."""
    return error_kind(code) is ErrorKind.INFRASTRUCTURE


def is_retryable(code: RenderErrorCode | str) -> bool:
    """Whether another attempt could succeed: infrastructure failures except bad credentials.

    A deadline counts as retryable (the renderer was too slow to get to the page); a document
    whose own load, settle and capture outlast its budget is `RENDER_PAGE_BUDGET_EXCEEDED`, a
    content failure that no retry would fix.
    """
    if not is_infrastructure(code):
        return False
    try:
        return RenderErrorCode(code) not in _NOT_RETRYABLE_INFRASTRUCTURE
    except ValueError:
        return True


# --- the signature -------------------------------------------------------------------------------
SIGNATURE_SCHEME = "v1"


class SignatureProblem(StrEnum):
    """Why a request's signature was refused."""

    MISSING = "missing signature or timestamp"
    MALFORMED = "malformed signature or timestamp"
    STALE = "timestamp outside the allowed clock skew"
    MISMATCH = "signature does not match"


def sign(secret: str, method: str, target: bytes, timestamp: str, body: bytes) -> str:
    """The `v1=<hex>` signature of a request; `target` is the raw path plus `?query` if any."""
    message = b"\n".join(
        (
            method.upper().encode("ascii"),
            target,
            timestamp.encode("ascii"),
            hashlib.sha256(body).hexdigest().encode("ascii"),
        )
    )
    digest = hmac.new(secret.encode("utf-8"), message, hashlib.sha256).hexdigest()
    return f"{SIGNATURE_SCHEME}={digest}"


class HmacAuth(httpx.Auth):
    """Signs every httpx request with the shared secret; use as `httpx.AsyncClient(auth=...)`."""

    requires_request_body = True

    def __init__(self, secret: str, clock: Clock = SYSTEM_CLOCK) -> None:
        self._secret = secret
        self._clock = clock

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        """Add the timestamp and signature headers, then send the request once."""
        timestamp = str(int(self._clock.now().timestamp()))
        request.headers[TIMESTAMP_HEADER] = timestamp
        request.headers[SIGNATURE_HEADER] = sign(
            self._secret, request.method, request.url.raw_path, timestamp, request.content
        )
        yield request


class SignatureVerifier:
    """Checks a request's signature with a constant-time compare and a clock-skew window."""

    def __init__(self, secret: str, skew_seconds: float, clock: Clock = SYSTEM_CLOCK) -> None:
        self._secret = secret
        self._skew = skew_seconds
        self._clock = clock

    def verify(
        self, method: str, target: bytes, headers: Mapping[str, str], body: bytes
    ) -> SignatureProblem | None:
        """Return None when the request is authentic and fresh, else the problem found."""
        given = headers.get(SIGNATURE_HEADER.lower()) or headers.get(SIGNATURE_HEADER)
        timestamp = headers.get(TIMESTAMP_HEADER.lower()) or headers.get(TIMESTAMP_HEADER)
        if not given or not timestamp:
            return SignatureProblem.MISSING
        if not timestamp.isascii() or not timestamp.isdigit() or len(timestamp) > 12:
            return SignatureProblem.MALFORMED
        if abs(self._clock.now().timestamp() - int(timestamp)) > self._skew:
            return SignatureProblem.STALE
        expected = sign(self._secret, method, target, timestamp, body)
        if not hmac.compare_digest(expected.encode("ascii"), given.encode("utf-8", "replace")):
            return SignatureProblem.MISMATCH
        return None
