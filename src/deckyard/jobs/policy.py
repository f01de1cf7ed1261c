"""Retry and recovery policies."""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass(frozen=True)
class RetryPolicy:
    """How a queue retries failed attempts: attempt bound, backoff with jitter, which errors.

    `max_attempts` counts executions: 3 means the handler runs at most three times, ever.
    Error codes in `non_retryable` fail the job at once; when `retryable` is not empty only
    those codes are retried.
    """

    max_attempts: int = 3
    base_delay: float = 1.0
    max_delay: float = 300.0
    jitter: float = 0.2
    retryable: frozenset[str] = field(default_factory=frozenset)
    non_retryable: frozenset[str] = field(default_factory=frozenset)

    def backoff(self, attempt: int) -> float:
        """Seconds to wait before the attempt after `attempt` (1-based), with +-jitter."""
        raw = min(self.max_delay, self.base_delay * 2 ** max(attempt - 1, 0))
        if self.jitter:
            raw *= 1 + random.uniform(-self.jitter, self.jitter)
        return float(max(raw, 0.0))

    def should_retry(self, code: str, attempt: int, max_attempts: int) -> bool:
        """True when a failure with `code` on `attempt` earns another attempt."""
        if attempt >= max_attempts or code in self.non_retryable:
            return False
        return not self.retryable or code in self.retryable


@dataclass(frozen=True)
class RecoveryPolicy:
    """What `recover_expired` does with a job whose lease ran out."""

    backoff: float = 1.0
    batch_size: int = 500
