"""`JsonLinesExporter`: finished spans as JSON lines in a file (`otel_spans_file`)."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export import SpanExportResult


def span_record(done: ReadableSpan) -> dict[str, Any]:
    """One finished span as the JSON object `JsonLinesExporter` writes (docs/tracing.md)."""
    context = done.context
    parent = done.parent
    return {
        "name": done.name,
        "trace_id": f"{context.trace_id:032x}" if context else None,
        "span_id": f"{context.span_id:016x}" if context else None,
        "parent_span_id": f"{parent.span_id:016x}" if parent else None,
        "kind": done.kind.name,
        "start_time_unix_nano": done.start_time,
        "end_time_unix_nano": done.end_time,
        "status": done.status.status_code.name,
        "status_description": done.status.description,
        "attributes": dict(done.attributes or {}),
        "events": [
            {"name": e.name, "time_unix_nano": e.timestamp, "attributes": dict(e.attributes or {})}
            for e in done.events
        ],
        "links": [
            {"trace_id": f"{link.context.trace_id:032x}", "span_id": f"{link.context.span_id:016x}"}
            for link in done.links
        ],
        "resource": dict(done.resource.attributes),
    }


class JsonLinesExporter:
    """Appends every finished span as one JSON line to a file.

    For debugging without a collector, and how tests read a renderer's spans: each export is
    written with one `write` on a file opened for appending, so several processes may share the
    file without interleaving within a line. It has the SDK's `SpanExporter` methods without
    subclassing it, so importing `deckyard.tracing` does not import the SDK. The write blocks
    the span's thread (the event loop) for a local append: a debugging aid, not a pipeline.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Write `spans`, one line each."""
        from opentelemetry.sdk.trace.export import SpanExportResult

        lines = "".join(json.dumps(span_record(s), default=str) + "\n" for s in spans)
        try:
            with self._lock:
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                try:
                    os.write(fd, lines.encode("utf-8"))
                finally:
                    os.close(fd)
        except OSError:
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        """Nothing to close: the file is opened per export."""

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Nothing is buffered."""
        return True
