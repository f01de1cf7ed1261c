"""The W3C `traceparent` across process boundaries and through stored rows.

What crosses a process boundary (the signed renderer API, webhook deliveries) carries it as a
header: `inject` writes it into outgoing headers from the current span, `extract` reads it into
a context for the span on the far side. What waits in the database for another task or process
carries it as a `traceparent` key in its JSON (`stamped`, read back by `stored_context`).
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import propagate

from deckyard.tracing.provider import enabled

TRACEPARENT = "traceparent"
"""The key under which stored JSON (a job payload, a render request input) carries its trace."""


def inject(headers: MutableMapping[str, str]) -> None:
    """Write the current span's `traceparent` (and `tracestate`) into outgoing `headers`."""
    if enabled():
        propagate.inject(headers)


def extract(headers: Mapping[str, str]) -> otel_context.Context:
    """The trace context an incoming request's headers carry (empty when they carry none)."""
    return propagate.extract(headers)


def stamped(data: dict[str, Any]) -> dict[str, Any]:
    """`data` with the current span's traceparent under `traceparent`, for a row that another
    task or process picks up later; `data` itself when there is no span to continue."""
    if not enabled():
        return data
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    found = carrier.get(TRACEPARENT)
    return {**data, TRACEPARENT: found} if found else data


def unstamped(data: dict[str, Any]) -> dict[str, Any]:
    """`data` without the traceparent `stamped` put there (what goes on to a renderer)."""
    if TRACEPARENT not in data:
        return data
    return {k: v for k, v in data.items() if k != TRACEPARENT}


def stored_context(data: Any) -> otel_context.Context:
    """The trace a stamped dict continues; with none, an empty context: a new trace.

    Never the current context: a task inherits the context it was created in (a worker's next
    job starts from the task of the one that just ended, a long-poll from the attempt that
    began it), so only what was stored tells whose trace a job or attempt belongs to.
    """
    found = data.get(TRACEPARENT) if isinstance(data, dict) else None
    return propagate.extract({TRACEPARENT: found} if isinstance(found, str) else {})
