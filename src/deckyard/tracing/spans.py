"""The spans of Deckyard's units of work: a job run, a render request, an attempt and its result
on the control plane, and the renderer's capture (docs/tracing.md names them and their
attributes).

Each helper returns before building an attribute while tracing is off. A job or attempt
continues the trace stored with it (`stored_context`), never the context of the task that
happens to start it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind
from opentelemetry.util.types import AttributeValue

from deckyard.tracing.propagation import TRACEPARENT, extract, stored_context
from deckyard.tracing.provider import (
    ERROR_CODE,
    annotate,
    annotate_span,
    enabled,
    note_error,
    span,
    tracer,
)

if TYPE_CHECKING:
    import asyncio

WORKSPACE = "deckyard.workspace.id"
JOB_ID = "deckyard.job.id"
JOB_KIND = "deckyard.job.kind"
JOB_QUEUE = "deckyard.job.queue"
JOB_ATTEMPT = "deckyard.job.attempt"
JOB_PARENT = "deckyard.job.parent_id"
REQUEST_ID = "deckyard.render.request.id"
REQUEST_KIND = "deckyard.render.request.kind"
REQUEST_STATUS = "deckyard.render.request.status"
ATTEMPT_NUMBER = "deckyard.render.attempt.number"
ATTEMPT_ID = "deckyard.render.attempt.id"
ATTEMPT_KEY = "deckyard.render.attempt.key"
ATTEMPT_STATUS = "deckyard.render.attempt.status"
PAGES = "deckyard.render.pages"
RENDERER = "deckyard.renderer.name"
RENDERER_ID = "deckyard.renderer.id"
RENDERER_EPOCH = "deckyard.renderer.epoch"
SLOT = "deckyard.renderer.slot"
ARTIFACT_SIZE = "deckyard.render.artifact.size"
ARTIFACT_FORMAT = "deckyard.render.artifact.format"
COMMITTED = "deckyard.render.committed"
ANSWER_STATUS = "http.response.status_code"
REMEMBERED_ATTEMPTS = 1024

T = TypeVar("T")

_attempts: OrderedDict[str, str] = OrderedDict()
"""Traceparent of the `render.attempt` span that posted each attempt (the last
`REMEMBERED_ATTEMPTS`), so its `render.result` span in this process joins the same trace; a
result another process commits (after a restart, on another node) starts a trace of its own."""


# What the span helpers read of jobs, render requests and attempts: structural types, so that
# this module, which every package may import, imports none of theirs.


class JobLike(Protocol):
    """A job row (`jobs.Job`)."""

    @property
    def id(self) -> int: ...
    @property
    def kind(self) -> str: ...
    @property
    def queue(self) -> str: ...
    @property
    def attempt(self) -> int: ...
    @property
    def workspace_id(self) -> str | None: ...
    @property
    def parent_id(self) -> int | None: ...
    @property
    def payload(self) -> Any: ...


class RequestLike(Protocol):
    """A render request row (`render.control.models.RenderRequest`)."""

    @property
    def id(self) -> int: ...
    @property
    def kind(self) -> str: ...
    @property
    def workspace_id(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def attempts(self) -> int: ...
    @property
    def error_code(self) -> str | None: ...
    @property
    def input(self) -> Any: ...


class AttemptLike(Protocol):
    """A render attempt row (`render.control.models.RenderAttempt`)."""

    @property
    def id(self) -> int: ...
    @property
    def request_id(self) -> int: ...
    @property
    def attempt_key(self) -> str: ...
    @property
    def slot(self) -> int: ...


class RendererLike(Protocol):
    """A renderer row (`render.control.models.Renderer`)."""

    @property
    def name(self) -> str: ...


class AdmittedLike(Protocol):
    """An attempt just admitted (`render.control.coordinator.Admitted`)."""

    @property
    def attempt(self) -> AttemptLike: ...
    @property
    def request(self) -> RequestLike: ...
    @property
    def renderer(self) -> RendererLike: ...
    @property
    def pages(self) -> list[int]: ...


@contextmanager
def job_span(job: JobLike) -> Iterator[None]:
    """`job {kind}`: one run of a job's handler, in the trace its payload carries (`stamped`
    by whoever enqueued it: a screenshot's HTTP request, a deck job), else in a new one."""
    if not enabled():
        yield
        return
    attributes: dict[str, AttributeValue] = {
        JOB_ID: job.id,
        JOB_KIND: job.kind,
        JOB_QUEUE: job.queue,
        JOB_ATTEMPT: job.attempt,
        **({WORKSPACE: job.workspace_id} if job.workspace_id else {}),
        **({JOB_PARENT: job.parent_id} if job.parent_id is not None else {}),
    }
    parent = stored_context(job.payload)
    with span(f"job {job.kind}", parent=parent, kind=SpanKind.CONSUMER, attributes=attributes):
        yield


@contextmanager
def request_span(kind: str, job_id: int) -> Iterator[None]:
    """`render.request`: a job's render request, from opening (or joining) it to its end."""
    with span("render.request", attributes={REQUEST_KIND: kind, JOB_ID: job_id}):
        yield


def note_request(request: RequestLike) -> None:
    """Put a render request's id, state and error on the current (`render.request`) span."""
    if not enabled():
        return
    annotate(
        {
            REQUEST_ID: request.id,
            REQUEST_STATUS: str(request.status),
            WORKSPACE: request.workspace_id,
            ERROR_CODE: request.error_code,
        }
    )


@contextmanager
def attempt_span(item: AdmittedLike) -> Iterator[None]:
    """`render.attempt`: posting one admitted attempt to its renderer, in its request's trace.

    The renderer's `renderer.capture` span is its child (the post carries `traceparent`).
    """
    if not enabled():
        yield
        return
    attempt, request = item.attempt, item.request
    attributes: dict[str, str | int] = {
        REQUEST_ID: request.id,
        REQUEST_KIND: request.kind,
        ATTEMPT_NUMBER: request.attempts + 1,
        ATTEMPT_ID: attempt.id,
        ATTEMPT_KEY: attempt.attempt_key,
        WORKSPACE: request.workspace_id,
        RENDERER: item.renderer.name,
        SLOT: attempt.slot,
    }
    attributes[PAGES] = len(item.pages)
    parent = stored_context(request.input)
    with span("render.attempt", parent=parent, kind=SpanKind.CLIENT, attributes=attributes):
        found: dict[str, str] = {}
        propagate.inject(found)
        if TRACEPARENT in found:
            _attempts[attempt.attempt_key] = found[TRACEPARENT]
            while len(_attempts) > REMEMBERED_ATTEMPTS:
                _attempts.popitem(last=False)
        yield


async def result_span(attempt: AttemptLike, renderer: str, work: Callable[[], Awaitable[T]]) -> T:
    """`render.result`: committing an attempt's newly finished pages (fetched or inline,
    stored, CAS), in the trace of the `render.attempt` that posted it when this process did;
    `deckyard.render.committed` says whether this pass committed a page."""
    if not enabled():
        return await work()
    posted = _attempts.get(attempt.attempt_key)
    parent = stored_context({TRACEPARENT: posted})
    attributes: dict[str, AttributeValue] = {
        REQUEST_ID: attempt.request_id,
        ATTEMPT_ID: attempt.id,
        ATTEMPT_KEY: attempt.attempt_key,
        RENDERER: renderer,
    }
    with span("render.result", parent=parent, attributes=attributes) as current:
        outcome = await work()
        if isinstance(outcome, bool):
            current.set_attribute(COMMITTED, outcome)
        return outcome


class Capture:
    """The renderer's `renderer.capture` span, current while an attempt is admitted (its task
    starts inside it) and ended when that task ends (`follow`)."""

    def __init__(self, current: trace.Span) -> None:
        self.span = current
        self.followed = False

    def follow(
        self, task: asyncio.Future[Any] | None, receipt: Callable[[], Mapping[str, Any]]
    ) -> None:
        """End the span when `task` ends, with what `receipt()` (the attempt's receipt, as
        JSON) then says; with no task, the span ends with the block."""
        if task is None or not enabled():
            return
        self.followed = True

        def ended(_task: asyncio.Future[Any]) -> None:
            try:
                _note_receipt(self.span, receipt())
            finally:
                self.span.end()

        task.add_done_callback(ended)


@contextmanager
def capture_span(
    headers: Mapping[str, str], attempt_key: str, renderer_id: str, epoch: str
) -> Iterator[Capture]:
    """`renderer.capture`: a renderer's side of one attempt, child of the `render.attempt` span
    whose `traceparent` the (signed) submission carried; see `Capture`."""
    if not enabled():
        yield Capture(trace.INVALID_SPAN)
        return
    attributes = {ATTEMPT_KEY: attempt_key, RENDERER_ID: renderer_id, RENDERER_EPOCH: epoch}
    current = tracer().start_span("renderer.capture", extract(headers), SpanKind.SERVER, attributes)
    capture = Capture(current)
    try:
        with trace.use_span(current):
            yield capture
    except Exception as exc:
        note_error(current, exc)
        raise
    finally:
        if not capture.followed:
            current.end()


def _note_receipt(current: trace.Span, receipt: Mapping[str, Any]) -> None:
    """The attempt's outcome on its capture span; the artefacts are its pages' (their total
    size, and their format when they share one), as every attempt is a deck of pages."""
    pages = receipt.get("pages")
    made = [receipt.get("artifact"), *(p.get("artifact") for p in pages or [])]
    artifacts = [a for a in made if a]
    formats = {a.get("format") for a in artifacts}
    annotate_span(
        current,
        {
            ATTEMPT_STATUS: receipt.get("status"),
            SLOT: receipt.get("slot"),
            ERROR_CODE: receipt.get("error_code"),
            ARTIFACT_SIZE: sum(a.get("size") or 0 for a in artifacts) if artifacts else None,
            ARTIFACT_FORMAT: formats.pop() if len(formats) == 1 else None,
            PAGES: len(pages) if pages is not None else None,
        },
    )
