"""`deckyard.tracing` and the API's tracing middleware, on the SDK's in-memory exporter."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.responses import JSONResponse
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from deckyard import tracing
from deckyard.api.tracing import TracingMiddleware
from deckyard.config import Settings, SettingsError

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{CALLER_SPAN}-01"


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Tracing on for the test, every finished span kept in memory; off again afterwards."""
    memory = InMemorySpanExporter()
    assert tracing.configure(Settings.load(), "api", node_id="test-node", exporters=[memory])
    yield memory
    tracing.shutdown()


def tiny_app() -> FastAPI:
    app = FastAPI()

    @app.get("/v1/things/{thing_id}")
    async def thing(thing_id: int) -> dict[str, Any]:
        return {"id": thing_id, "traceparent": tracing.stamped({}).get("traceparent")}

    @app.get("/v1/broken")
    async def broken() -> JSONResponse:
        return JSONResponse({"error": {"code": "INTERNAL"}}, status_code=503)

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    app.add_middleware(TracingMiddleware)
    return app


async def get(path: str, headers: dict[str, str] | None = None) -> httpx.Response:
    transport = httpx.ASGITransport(app=tiny_app())
    async with httpx.AsyncClient(transport=transport, base_url="http://deckyard.test") as client:
        return await client.get(path, headers=headers)


async def test_an_incoming_traceparent_is_continued(spans: InMemorySpanExporter) -> None:
    answer = await get("/v1/things/7", {"traceparent": TRACEPARENT})
    assert answer.status_code == 200
    [server] = spans.get_finished_spans()
    assert server.name == "GET /v1/things/{thing_id}"
    assert server.kind is trace.SpanKind.SERVER
    assert server.context is not None and server.parent is not None
    assert f"{server.context.trace_id:032x}" == TRACE_ID
    assert f"{server.parent.span_id:016x}" == CALLER_SPAN
    assert server.parent.is_remote
    assert server.attributes is not None
    assert server.attributes["http.route"] == "/v1/things/{thing_id}"
    assert server.attributes["http.response.status_code"] == 200
    assert server.attributes["url.path"] == "/v1/things/7"
    assert server.resource.attributes["deckyard.process.role"] == "api"
    assert server.resource.attributes["deckyard.node.id"] == "test-node"
    # What the handler stores for later (a job payload) names the server span.
    assert answer.json()["traceparent"] == f"00-{TRACE_ID}-{server.context.span_id:016x}-01"


async def test_a_request_without_traceparent_starts_a_trace(spans: InMemorySpanExporter) -> None:
    await get("/v1/things/1")
    await get("/v1/broken")
    await get("/healthz")
    first, broken = spans.get_finished_spans()  # no span for the probe
    assert first.parent is None and broken.parent is None
    assert first.context is not None and broken.context is not None
    assert first.context.trace_id != broken.context.trace_id
    assert f"{first.context.trace_id:032x}" != TRACE_ID
    assert broken.status.status_code is trace.StatusCode.ERROR


async def test_tracing_is_off_without_an_exporter() -> None:
    assert tracing.configure(Settings.load(), "api") is False
    assert not tracing.enabled()
    assert isinstance(tracing.tracer(), trace.NoOpTracer)
    assert (await get("/v1/things/1", {"traceparent": TRACEPARENT})).json()["traceparent"] is None
    payload = {"render": {"html": "<p>"}}
    assert tracing.stamped(payload) is payload
    headers: dict[str, str] = {}
    tracing.inject(headers)
    assert headers == {}


class CodedError(Exception):
    """An error with a `code`, as `JobError` has."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


@dataclass(frozen=True)
class FakeJob:
    id: int
    kind: str
    queue: str
    attempt: int
    workspace_id: str | None
    parent_id: int | None
    payload: Any


def test_a_job_continues_the_trace_its_payload_carries(spans: InMemorySpanExporter) -> None:
    with tracing.span("POST /v1/decks/{deck_id}/export"):
        payload = tracing.stamped({"deck_id": 3})
    assert tracing.unstamped(payload) == {"deck_id": 3}
    job = FakeJob(5, "deck.export", "decks", 1, "alice", None, payload)
    with pytest.raises(CodedError), tracing.job_span(job):
        raise CodedError("RENDER_UNAVAILABLE")
    http, run = spans.get_finished_spans()
    assert run.name == "job deck.export"
    assert run.context is not None and http.context is not None and run.parent is not None
    assert run.context.trace_id == http.context.trace_id
    assert run.parent.span_id == http.context.span_id
    assert run.attributes is not None
    assert run.attributes["deckyard.job.id"] == 5
    assert run.attributes["deckyard.workspace.id"] == "alice"
    assert run.attributes["deckyard.error.code"] == "RENDER_UNAVAILABLE"
    assert run.status.status_code is trace.StatusCode.ERROR


@dataclass(frozen=True)
class FakeRequest:
    id: int
    kind: str
    workspace_id: str
    status: str
    attempts: int
    error_code: str | None
    input: Any


@dataclass(frozen=True)
class FakeAttempt:
    id: int
    request_id: int
    attempt_key: str
    slot: int


@dataclass(frozen=True)
class FakeRenderer:
    name: str


@dataclass(frozen=True)
class FakeAdmitted:
    attempt: FakeAttempt
    request: FakeRequest
    renderer: FakeRenderer
    pages: list[int]


async def test_a_render_attempt_continues_the_trace_its_request_input_carries(
    spans: InMemorySpanExporter,
) -> None:
    # A screenshot is a render request, no job: the API request stamps the request's input,
    # and the control plane's attempt (another task, later) continues that trace.
    with tracing.span("POST /v1/screenshots"):
        stamped = tracing.stamped({"html": "<p>"})
    with tracing.span("unrelated"):  # the task that dispatches has a context of its own
        request = FakeRequest(8, "screenshot", "alice", "pending", 0, None, stamped)
        attempt = FakeAttempt(21, 8, "key-21", 0)
        with tracing.attempt_span(FakeAdmitted(attempt, request, FakeRenderer("r1"), [0])):
            headers: dict[str, str] = {}
            tracing.inject(headers)  # what the post to the renderer carries
        committed = await tracing.result_span(attempt, "r1", fake_commit)
    assert committed is True
    http, sent, result, unrelated = spans.get_finished_spans()
    assert (sent.name, result.name) == ("render.attempt", "render.result")
    assert http.context is not None and sent.context is not None and result.context is not None
    assert sent.parent is not None and sent.parent.span_id == http.context.span_id
    assert unrelated.context is not None
    assert sent.context.trace_id == http.context.trace_id != unrelated.context.trace_id
    assert sent.kind is trace.SpanKind.CLIENT
    assert sent.attributes is not None
    assert sent.attributes["deckyard.render.request.id"] == 8
    assert sent.attributes["deckyard.render.request.kind"] == "screenshot"
    assert sent.attributes["deckyard.render.attempt.number"] == 1
    assert sent.attributes["deckyard.render.attempt.key"] == "key-21"
    assert sent.attributes["deckyard.workspace.id"] == "alice"
    assert sent.attributes["deckyard.render.pages"] == 1  # a screenshot is a request of one page
    _, trace_id, span_id, _flags = headers["traceparent"].split("-")
    assert (trace_id, span_id) == (f"{sent.context.trace_id:032x}", f"{sent.context.span_id:016x}")
    assert result.parent is not None and result.parent.span_id == sent.context.span_id
    assert (result.attributes or {})["deckyard.render.committed"] is True


async def fake_commit() -> bool:
    return True


def test_spans_file_holds_one_json_line_per_span(tmp_path: Path) -> None:
    path = tmp_path / "spans.jsonl"
    assert tracing.configure(Settings.load(otel_spans_file=path), "renderer", node_id="r1")
    try:
        with tracing.span("outer", attributes={"deckyard.render.pages": 3}), tracing.span("in"):
            pass
    finally:
        tracing.shutdown()
    inner, outer = (json.loads(line) for line in path.read_text().splitlines())
    assert (inner["name"], outer["name"]) == ("in", "outer")
    assert inner["trace_id"] == outer["trace_id"] and len(inner["trace_id"]) == 32
    assert inner["parent_span_id"] == outer["span_id"] and outer["parent_span_id"] is None
    assert outer["attributes"] == {"deckyard.render.pages": 3}
    assert outer["resource"]["deckyard.process.role"] == "renderer"
    assert outer["resource"]["service.name"] == "deckyard"
    assert outer["end_time_unix_nano"] >= outer["start_time_unix_nano"]


def test_an_otlp_endpoint_without_the_extra_fails_at_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.http", None)
    with pytest.raises(SettingsError) as caught:
        Settings.load(otel_exporter_otlp_endpoint="http://127.0.0.1:4318")
    [problem] = caught.value.problems
    assert problem.startswith("DECKYARD_OTEL_EXPORTER_OTLP_ENDPOINT: ")
    assert "deckyard[otlp]" in problem
    # Past the settings check (a broken install), `configure` says the same.
    monkeypatch.setitem(sys.modules, tracing.OTLP_EXPORTER, None)
    settings = Settings.model_construct(otel_exporter_otlp_endpoint="http://127.0.0.1:4318")
    with pytest.raises(tracing.TracingSetupError, match="otlp"):
        tracing.configure(settings, "api")
    assert not tracing.enabled()
