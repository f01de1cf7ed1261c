"""`RetryPolicy`: exponential backoff, jitter within its bounds, which codes earn a retry."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deckyard.jobs import RetryPolicy


def test_backoff_doubles_from_the_base_delay_up_to_the_maximum() -> None:
    p = RetryPolicy(base_delay=1.0, max_delay=10.0, jitter=0.0)
    assert [p.backoff(a) for a in range(1, 7)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    assert p.backoff(0) == 1.0


@given(attempt=st.integers(min_value=1, max_value=40), jitter=st.floats(0.0, 1.0))
def test_jitter_stays_within_its_bounds(attempt: int, jitter: float) -> None:
    p = RetryPolicy(base_delay=0.5, max_delay=60.0, jitter=jitter)
    raw = min(60.0, 0.5 * 2 ** (attempt - 1))
    delay = p.backoff(attempt)
    assert raw * (1 - jitter) - 1e-9 <= delay <= raw * (1 + jitter) + 1e-9
    assert delay >= 0.0


def test_jitter_actually_varies_the_delay() -> None:
    p = RetryPolicy(base_delay=1.0, jitter=0.5)
    assert len({p.backoff(3) for _ in range(50)}) > 1


@pytest.mark.parametrize(
    ("policy", "code", "attempt", "expected"),
    [
        (RetryPolicy(), "HANDLER_ERROR", 1, True),
        (RetryPolicy(), "HANDLER_ERROR", 3, False),
        (RetryPolicy(non_retryable=frozenset({"BAD_INPUT"})), "BAD_INPUT", 1, False),
        (RetryPolicy(non_retryable=frozenset({"BAD_INPUT"})), "OTHER", 1, True),
        (RetryPolicy(retryable=frozenset({"FLAKY"})), "FLAKY", 1, True),
        (RetryPolicy(retryable=frozenset({"FLAKY"})), "OTHER", 1, False),
        (
            RetryPolicy(retryable=frozenset({"FLAKY"}), non_retryable=frozenset({"FLAKY"})),
            "FLAKY",
            1,
            False,
        ),
    ],
)
def test_which_failures_earn_another_attempt(
    policy: RetryPolicy, code: str, attempt: int, expected: bool
) -> None:
    assert policy.should_retry(code, attempt, max_attempts=3) is expected
