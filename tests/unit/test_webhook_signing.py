"""Webhook signatures: what a receiver verifies, including the example in docs/webhooks.md."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from deckyard import tracing
from deckyard.config import Settings
from deckyard.webhooks.delivery import body_bytes, delivery_headers
from deckyard.webhooks.models import RENDER_JOB_KINDS, Signing
from deckyard.webhooks.signing import (
    SIGNATURE_HEADER,
    SignatureError,
    new_secret,
    signature_header,
    verify,
)

DOC = Path(__file__).resolve().parents[2] / "docs" / "webhooks.md"
BODY = body_bytes({"id": "job.finished:1:2", "type": "job.finished", "data": {"x": "é"}})


def documented_verifier() -> Callable[[str, str, bytes], bool]:
    """The receiver's `verify_deckyard` as docs/webhooks.md shows it, run as written."""
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    namespace: dict[str, object] = {}
    exec(next(b for b in blocks if "def verify_deckyard" in b), namespace)
    fn = namespace["verify_deckyard"]
    assert callable(fn)
    return fn  # type: ignore[return-value]


def test_a_signed_body_verifies_and_any_change_does_not() -> None:
    secret, now = new_secret(), int(time.time())
    header = signature_header([secret], now, BODY)
    assert verify(secret, header, BODY, now, 300) == now
    with pytest.raises(SignatureError):
        verify(secret, header, BODY.replace(b"job.finished", b"job.finishet"), now, 300)
    with pytest.raises(SignatureError):
        verify(new_secret(), header, BODY, now, 300)
    forged = header.replace(f"t={now}", f"t={now + 1}")
    with pytest.raises(SignatureError):
        verify(secret, forged, BODY, now, 300)


def test_the_replay_window_refuses_old_and_future_timestamps() -> None:
    secret, now = new_secret(), int(time.time())
    old = signature_header([secret], now - 301, BODY)
    future = signature_header([secret], now + 301, BODY)
    for header in (old, future, "v1=abc", "t=123", ""):
        with pytest.raises(SignatureError):
            verify(secret, header, BODY, now, 300)
    assert verify(secret, signature_header([secret], now - 299, BODY), BODY, now, 300)


def test_during_a_rotation_both_secrets_verify() -> None:
    new, old, now = new_secret(), new_secret(), int(time.time())
    header = signature_header(Signing(new, old).secrets(), now, BODY)
    assert header.count("v1=") == 2
    assert verify(new, header, BODY, now, 300) == now
    assert verify(old, header, BODY, now, 300) == now


def test_the_documented_receiver_accepts_deliveries_and_refuses_forgeries() -> None:
    verify_deckyard = documented_verifier()
    secret = new_secret()
    headers = delivery_headers(Signing(secret), 7, "job.finished", "e1", BODY, time.time())
    assert verify_deckyard(secret, headers[SIGNATURE_HEADER], BODY)
    assert not verify_deckyard(secret, headers[SIGNATURE_HEADER], BODY + b" ")
    assert not verify_deckyard(new_secret(), headers[SIGNATURE_HEADER], BODY)
    stale = delivery_headers(Signing(secret), 7, "job.finished", "e1", BODY, time.time() - 600)
    assert not verify_deckyard(secret, stale[SIGNATURE_HEADER], BODY)


def test_a_delivery_carries_ids_and_the_trace_of_the_job_sending_it() -> None:
    untraced = delivery_headers(Signing("s"), 7, "task.finished", "e9", BODY, time.time())
    assert "traceparent" not in untraced  # tracing off: nothing to carry
    assert tracing.configure(Settings.load(), "api", exporters=[InMemorySpanExporter()])
    try:
        with tracing.span("job webhook.deliver") as span:
            headers = delivery_headers(Signing("s"), 7, "task.finished", "e9", BODY, time.time())
    finally:
        tracing.shutdown()
    trace_id = format(span.get_span_context().trace_id, "032x")
    assert headers["Deckyard-Delivery"] == "7"
    assert headers["Deckyard-Event"] == "task.finished"
    assert headers["Deckyard-Event-Id"] == "e9"
    assert headers["traceparent"].split("-")[1] == trace_id


def test_render_kinds_name_the_real_render_jobs() -> None:
    from deckyard.decks.jobs.names import DeckJobKind

    assert {
        DeckJobKind.PAGE_SCREENSHOT,
        DeckJobKind.DECK_SCREENSHOTS,
        DeckJobKind.DECK_EXPORT,
    } == RENDER_JOB_KINDS
