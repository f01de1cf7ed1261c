"""This process's tracer provider (`configure`), and spans made current for a block (`span`).

Tracing is on only when it has somewhere to send spans: an OTLP collector
(`otel_exporter_otlp_endpoint`, the optional `otlp` extra, imported only then) or a file of JSON
lines (`otel_spans_file`). Off, `tracer()` is OpenTelemetry's no-op tracer, the SDK is never
imported, and `span` yields without building anything.

The provider is this module's, not OpenTelemetry's global one (which can be set only once per
process): a test configures it with an in-memory exporter and `shutdown` takes it down again.
"""

from __future__ import annotations

import importlib
import os
import socket
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, cast

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind
from opentelemetry.util.types import Attributes

from deckyard.tracing.export import JsonLinesExporter

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter

    from deckyard.config import Settings

TRACER_NAME = "deckyard"
OTLP_EXPORTER = "opentelemetry.exporter.otlp.proto.http.trace_exporter"
"""The optional `otlp` extra's exporter, imported only when a collector is configured."""
OTLP_MISSING = (
    "DECKYARD_OTEL_EXPORTER_OTLP_ENDPOINT is set but the OTLP exporter is not installed: "
    "install deckyard with the `otlp` extra (pip install 'deckyard[otlp]')"
)
ROLE = "deckyard.process.role"
NODE = "deckyard.node.id"
ERROR_CODE = "deckyard.error.code"

_provider: TracerProvider | None = None
_tracer: trace.Tracer = trace.NoOpTracer()


class TracingSetupError(Exception):
    """Tracing is asked for but cannot be set up (the OTLP exporter is not installed)."""


def configure(
    settings: Settings,
    role: str,
    *,
    node_id: str | None = None,
    exporters: Sequence[SpanExporter] | None = None,
) -> bool:
    """Set up this process's tracer provider; True when tracing is on.

    `role` (`api`, `renderer`) and `node_id` (default `host:pid`) become resource attributes.
    `exporters` replaces those the settings name (tests pass an in-memory one). With none at
    all, tracing stays off. Raises `TracingSetupError` when the OTLP exporter is asked for but
    not installed. A second call replaces the first provider (shut down, its spans flushed).
    """
    global _provider, _tracer
    batched: list[SpanExporter] = []
    if exporters is not None:
        simple = list(exporters)
    else:
        batched, simple = _exporters_of(settings)
    shutdown()
    if not batched and not simple:
        return False
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

    from deckyard import __version__

    node = node_id or f"{socket.gethostname()}:{os.getpid()}"
    resource = Resource.create(
        {
            "service.name": settings.otel_service_name,
            "service.version": __version__,
            "service.instance.id": node,
            "host.name": socket.gethostname(),
            "process.pid": os.getpid(),
            ROLE: role,
            NODE: node,
        }
    )
    provider = TracerProvider(
        resource=resource,
        sampler=ParentBased(TraceIdRatioBased(settings.otel_traces_sample_ratio)),
    )
    # A collector gets batches from a background thread, off the event loop; a file (or
    # memory) takes each span as it ends, so what it holds is complete at any moment.
    for exporter in batched:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    for exporter in simple:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    _provider, _tracer = provider, provider.get_tracer(TRACER_NAME)
    return True


def _exporters_of(settings: Settings) -> tuple[list[SpanExporter], list[SpanExporter]]:
    """The exporters the settings name: (batched ones, ones that take each span at once)."""
    batched: list[SpanExporter] = []
    simple: list[SpanExporter] = []
    if settings.otel_exporter_otlp_endpoint:
        try:
            otlp = importlib.import_module(OTLP_EXPORTER)
        except ImportError:
            raise TracingSetupError(OTLP_MISSING) from None
        endpoint = settings.otel_exporter_otlp_endpoint.rstrip("/") + "/v1/traces"
        batched.append(otlp.OTLPSpanExporter(endpoint=endpoint))
    if settings.otel_spans_file is not None:
        simple.append(cast("SpanExporter", JsonLinesExporter(settings.otel_spans_file)))
    return batched, simple


def shutdown() -> None:
    """Flush and drop the provider; tracing is off afterwards."""
    global _provider, _tracer
    provider, _provider, _tracer = _provider, None, trace.NoOpTracer()
    if provider is not None:
        provider.shutdown()


def enabled() -> bool:
    """Whether this process records spans."""
    return _provider is not None


def tracer() -> trace.Tracer:
    """Deckyard's tracer (a no-op one until `configure` turns tracing on)."""
    return _tracer


@contextmanager
def span(
    name: str,
    *,
    parent: otel_context.Context | None = None,
    kind: SpanKind = SpanKind.INTERNAL,
    attributes: Attributes = None,
) -> Iterator[trace.Span]:
    """A span current for the block (child of `parent`, else of the current span).

    An exception ending the block is recorded with an error status and, when it has a string
    `code` (a `JobError`, an `ApiError`), that code as `deckyard.error.code`.
    """
    if _provider is None:
        yield trace.INVALID_SPAN
        return
    with _tracer.start_as_current_span(name, parent, kind, attributes) as current:
        try:
            yield current
        except Exception as exc:
            note_error(current, exc)
            raise


def annotate(attributes: Mapping[str, str | int | float | bool | None]) -> None:
    """Set attributes on the current span (None values are left out)."""
    if _provider is not None:
        annotate_span(trace.get_current_span(), attributes)


def annotate_span(current: trace.Span, attributes: Mapping[str, Any]) -> None:
    """Set attributes on `current` (None values are left out)."""
    for key, value in attributes.items():
        if value is not None:
            current.set_attribute(key, value)


def note_error(current: trace.Span, exc: BaseException) -> None:
    """Put the error code an exception carries (`code`, a string) on `current`."""
    code = getattr(exc, "code", None)
    if isinstance(code, str):
        current.set_attribute(ERROR_CODE, code)
