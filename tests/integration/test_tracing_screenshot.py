"""One screenshot is one trace, from the HTTP request through its render request to the
renderer process.

The API and the control plane run in this process and export to the SDK's in-memory exporter;
the supervised renderer is a separate process, which inherits `DECKYARD_OTEL_SPANS_FILE` and
writes its spans there as JSON lines. No job wraps the screenshot, and the control plane
dispatches from its own loop, so the trace reaches the attempt only through what was stored:
the render request's input (`tracing.stamped`); it reaches the renderer only through the
`traceparent` header of the signed submission.
"""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from deckyard import tracing
from deckyard.render.control.service import RenderService
from tests.helpers.api import make_token, running_app
from tests.helpers.eventually import eventually
from tests.helpers.runtime import fast_settings

pytestmark = [pytest.mark.chromium, pytest.mark.processes]

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
CALLER_SPAN = "b7ad6b7169203331"
PAGE = "<!doctype html><html><body style='margin:0;background:#0a0'>traced</body></html>"
CONTROL_PLANE = ("render.attempt", "render.result")


def renderer_spans(path: Path) -> list[dict[str, Any]]:
    """The spans the renderer process finished so far."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def ids(span: ReadableSpan) -> tuple[str, str, str | None]:
    """(trace id, span id, parent span id) as hex."""
    assert span.context is not None
    parent = f"{span.parent.span_id:016x}" if span.parent is not None else None
    return f"{span.context.trace_id:032x}", f"{span.context.span_id:016x}", parent


async def test_one_screenshot_is_one_trace_across_processes(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spans_file = tmp_path / "renderer-spans.jsonl"
    monkeypatch.setenv("DECKYARD_OTEL_SPANS_FILE", str(spans_file))
    memory = InMemorySpanExporter()
    assert tracing.configure(fast_settings(), "api", exporters=[memory])
    try:
        async with running_app(db_url, renderers=1) as (app, client):
            alice = await make_token(app, "alice")
            body = {"html": PAGE, "width": 200, "height": 100}
            caller = {**alice, "traceparent": f"00-{TRACE_ID}-{CALLER_SPAN}-01"}
            created = await client.post("/v1/screenshots", json=body, headers=caller)
            assert created.status_code == 202, created.text
            service: RenderService = app.state.render
            # Waited for in process, not through the API: a GET would be a trace of its own.
            done = await service.wait_for_terminal(created.json()["id"], timeout=90)
            assert done.status == "succeeded", (done.error_code, done.error_message)

            def finished() -> dict[str, ReadableSpan]:
                return {s.name: s for s in memory.get_finished_spans()}

            async def everything() -> tuple[dict[str, ReadableSpan], list[dict[str, Any]]]:
                mine = finished()
                theirs = [s for s in renderer_spans(spans_file) if s["name"] == "renderer.capture"]
                # the HTTP span ends when its answer is sent: it may end after the render
                wanted = {"POST /v1/screenshots", *CONTROL_PLANE}
                return (mine, theirs) if wanted <= set(mine) and theirs else ({}, [])

            mine, captures = await eventually(everything, timeout=30, what="every span")
            every = memory.get_finished_spans()
    finally:
        tracing.shutdown()

    http = mine["POST /v1/screenshots"]
    chain = [http, *(mine[name] for name in CONTROL_PLANE)]
    assert ids(http) == (TRACE_ID, ids(http)[1], CALLER_SPAN)
    for parent, child in itertools.pairwise(chain):
        assert ids(child)[0] == TRACE_ID, child.name
        assert ids(child)[2] == ids(parent)[1], f"{child.name} is not a child of {parent.name}"
    attempt = mine["render.attempt"]
    assert attempt.attributes is not None
    assert attempt.attributes["http.response.status_code"] == 202
    assert (mine["render.result"].attributes or {}).get("deckyard.render.committed") is True
    assert {ids(s)[0] for s in every} == {TRACE_ID}  # nothing of it started a trace of its own
    # no job runs a screenshot any more, and a one-page request has no `render.request` span
    assert not [s.name for s in every if s.name.startswith("job ")]
    assert "render.request" not in {s.name for s in every}

    [capture] = captures  # one render, one capture, in the renderer process
    assert capture["trace_id"] == TRACE_ID
    assert capture["parent_span_id"] == ids(attempt)[1]
    assert capture["kind"] == "SERVER"
    assert capture["resource"]["deckyard.process.role"] == "renderer"
    assert capture["resource"]["process.pid"] != os.getpid()
    key = attempt.attributes["deckyard.render.attempt.key"]
    assert capture["attributes"]["deckyard.render.attempt.key"] == key
    assert capture["attributes"]["deckyard.render.attempt.status"] == "succeeded"
    assert capture["attributes"]["deckyard.render.artifact.format"] == "png"
