"""In-memory counters and histograms of the job runtime, exposed later by `/metrics`."""

from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass, field

LATENCY_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


@dataclass
class Histogram:
    """A cumulative-bucket histogram in the Prometheus style."""

    buckets: tuple[float, ...] = LATENCY_BUCKETS
    counts: list[int] = field(default_factory=lambda: [0] * (len(LATENCY_BUCKETS) + 1))
    total: float = 0.0
    n: int = 0

    def observe(self, value: float) -> None:
        """Record one observation."""
        self.counts[bisect.bisect_left(self.buckets, value)] += 1
        self.total += value
        self.n += 1


@dataclass
class RuntimeMetrics:
    """Counters a runtime keeps; all monotonic."""

    claims: int = 0
    completions: Counter[str] = field(default_factory=Counter)
    lost_cas: int = 0
    recoveries: Counter[str] = field(default_factory=Counter)
    retries: int = 0
    heartbeats: int = 0
    pruned: int = 0
    periodic_enqueued: int = 0
    claim_latency: Histogram = field(default_factory=Histogram)
