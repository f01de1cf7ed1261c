"""Traces across the API, jobs and renderers (OpenTelemetry); docs/tracing.md.

Every process sets up its tracer provider once at start (`configure`: `deckyard serve`, each of
its `--workers`, every renderer); tracing is off unless a collector or a spans file is set. What
crosses a process boundary carries the W3C `traceparent` header (`inject`, `extract`: the
signed renderer API, webhook deliveries); what waits in the database for another task or
process carries it in its JSON (`stamped`: a job's payload, a render request's
input). The spans of the units of work (`job_span`, `request_span`, `attempt_span`,
`result_span`, `capture_span`) are made here, so the code they wrap gains a line, not a block.

- `provider`: `configure`, `shutdown`, `tracer`, and `span` for a block;
- `propagation`: the `traceparent` in headers and in stored JSON;
- `spans`: the spans of jobs, render requests, attempts and captures;
- `export`: `JsonLinesExporter`, finished spans as JSON lines (`otel_spans_file`).

Nothing here imports another Deckyard package (their rows are read through protocols), so any
package may import it.
"""

from deckyard.tracing.export import JsonLinesExporter, span_record
from deckyard.tracing.propagation import (
    TRACEPARENT,
    extract,
    inject,
    stamped,
    stored_context,
    unstamped,
)
from deckyard.tracing.provider import (
    ERROR_CODE,
    NODE,
    OTLP_EXPORTER,
    ROLE,
    TRACER_NAME,
    TracingSetupError,
    annotate,
    configure,
    enabled,
    shutdown,
    span,
    tracer,
)
from deckyard.tracing.spans import (
    ANSWER_STATUS,
    Capture,
    attempt_span,
    capture_span,
    job_span,
    note_request,
    request_span,
    result_span,
)

__all__ = [
    "ANSWER_STATUS",
    "ERROR_CODE",
    "NODE",
    "OTLP_EXPORTER",
    "ROLE",
    "TRACEPARENT",
    "TRACER_NAME",
    "Capture",
    "JsonLinesExporter",
    "TracingSetupError",
    "annotate",
    "attempt_span",
    "capture_span",
    "configure",
    "enabled",
    "extract",
    "inject",
    "job_span",
    "note_request",
    "request_span",
    "result_span",
    "shutdown",
    "span",
    "span_record",
    "stamped",
    "stored_context",
    "tracer",
    "unstamped",
]
