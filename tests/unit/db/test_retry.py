"""`WriteRetryPolicy`: full-jitter backoff within its exponential bound."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from deckyard.db import WriteRetryPolicy


@given(attempt=st.integers(min_value=1, max_value=30))
def test_delay_is_within_the_exponential_bound(attempt: int) -> None:
    p = WriteRetryPolicy(attempts=8, base_delay=0.01, max_delay=0.5)
    delay = p.delay(attempt)
    assert 0.0 <= delay <= min(0.5, 0.01 * 2 ** (attempt - 1))
