"""`GET /metrics` in the Prometheus text format.

State is gathered asynchronously at scrape time (one read for job counts), then exposed through
a throwaway registry with a custom collector, so nothing is kept twice and nothing polls.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
    SummaryMetricFamily,
)
from prometheus_client.registry import Collector

from deckyard.api.state import loops_of
from deckyard.jobs import Runtime
from deckyard.loop import Loop
from deckyard.render.control.store import request_counts

router = APIRouter(tags=["operations"])

ExtraCollect = Callable[[], Iterator[Metric]]


@dataclass
class Snapshot:
    """Everything one scrape reports."""

    job_counts: list[tuple[str, str, int]]
    render_counts: list[tuple[str, str, int]]
    renderers: list[dict[str, Any]]
    runtime: Runtime
    loops: list[Loop]
    write_conflicts: int
    sql: dict[str, dict[str, Any]] | None
    extra: list[ExtraCollect] = field(default_factory=list)


def worker_slots(runtime: Runtime) -> Iterator[Metric]:
    """Each worker's slots, the jobs holding one, and the jobs waiting without one."""
    labels = ["worker"]
    slots = GaugeMetricFamily("deckyard_job_worker_slots", "Worker slots.", labels=labels)
    occupied = GaugeMetricFamily(
        "deckyard_job_worker_occupied", "Running jobs holding a worker slot.", labels=labels
    )
    suspended = GaugeMetricFamily(
        "deckyard_job_worker_suspended",
        "Running jobs waiting for children without a slot (their leases still held).",
        labels=labels,
    )
    suspensions = CounterMetricFamily(
        "deckyard_job_worker_suspensions", "Waits that gave their slot back.", labels=labels
    )
    for w in runtime.workers:
        name = [",".join(w.queues)]
        slots.add_metric(name, w.concurrency)
        occupied.add_metric(name, w.occupied)
        suspended.add_metric(name, len(w.suspended))
        suspensions.add_metric(name, w.stats.suspensions)
    yield from (slots, occupied, suspended, suspensions)


class SnapshotCollector(Collector):
    """Turns a `Snapshot` into metric families."""

    def __init__(self, snap: Snapshot) -> None:
        self.snap = snap

    def collect(self) -> Iterator[Metric]:
        snap = self.snap
        m = snap.runtime.metrics
        jobs_g = GaugeMetricFamily(
            "deckyard_jobs", "Jobs by queue and status.", labels=["queue", "status"]
        )
        for queue, status, n in snap.job_counts:
            jobs_g.add_metric([queue, status], n)
        yield jobs_g
        claims = CounterMetricFamily("deckyard_job_claims", "Jobs claimed by this process.")
        claims.add_metric([], m.claims)
        yield claims
        done = CounterMetricFamily(
            "deckyard_job_completions", "Attempts settled, by outcome.", labels=["outcome"]
        )
        for outcome, n in sorted(m.completions.items()):
            done.add_metric([outcome], n)
        yield done
        lost = CounterMetricFamily("deckyard_job_lost_cas", "Finishes refused by the CAS.")
        lost.add_metric([], m.lost_cas)
        yield lost
        rec = CounterMetricFamily(
            "deckyard_job_recoveries", "Expired leases recovered.", labels=["outcome"]
        )
        for outcome, n in sorted(m.recoveries.items()):
            rec.add_metric([outcome], n)
        yield rec
        h = m.claim_latency
        cumulative, buckets = 0, []
        for bound, count in zip([*h.buckets, float("inf")], h.counts, strict=True):
            cumulative += count
            buckets.append((str(bound) if bound != float("inf") else "+Inf", cumulative))
        lat = HistogramMetricFamily(
            "deckyard_job_claim_latency_seconds", "From due (run_at) to claimed."
        )
        lat.add_metric([], buckets, sum_value=h.total)
        yield lat
        yield from worker_slots(snap.runtime)
        ticks = SummaryMetricFamily(
            "deckyard_loop_tick_seconds", "Loop tick durations (recent window).", labels=["loop"]
        )
        errors = CounterMetricFamily("deckyard_loop_errors", "Failed ticks.", labels=["loop"])
        alive = GaugeMetricFamily("deckyard_loop_alive", "1 while the loop runs.", labels=["loop"])
        for loop in snap.loops:
            d = loop.stats.durations
            ticks.add_metric([loop.name], count_value=len(d), sum_value=sum(d))
            errors.add_metric([loop.name], loop.stats.errors)
            alive.add_metric([loop.name], 1 if loop.alive else 0)
        yield ticks
        yield errors
        yield alive
        conflicts = CounterMetricFamily(
            "deckyard_db_write_conflicts", "Transient write conflicts retried."
        )
        conflicts.add_metric([], snap.write_conflicts)
        yield conflicts
        renders = GaugeMetricFamily(
            "deckyard_render_requests",
            "Render requests by status and error code.",
            labels=["status", "error_code"],
        )
        for status, code, n in snap.render_counts:
            renders.add_metric([status, code], n)
        yield renders
        slots = GaugeMetricFamily(
            "deckyard_render_slots", "Renderer slots.", labels=["renderer", "state"]
        )
        used = GaugeMetricFamily(
            "deckyard_render_occupancy", "Renderer slots in use.", labels=["renderer"]
        )
        for w in snap.renderers:
            slots.add_metric([str(w["name"]), str(w["state"])], int(w["slots"] or 0))
            used.add_metric([str(w["name"])], int(w["occupancy"]))
        yield slots
        yield used
        if snap.sql is not None:
            sql = CounterMetricFamily(
                "deckyard_sql_statements",
                "SQL statements by loop and kind.",
                labels=["loop", "kind"],
            )
            for loop_name, c in sorted(snap.sql.items()):
                for kind in ("reads", "writes", "zero_row_writes", "write_transactions"):
                    sql.add_metric([loop_name, kind], c[kind])
            yield sql
        for extra in snap.extra:
            yield from extra()


@router.get("/metrics", response_class=Response)
async def metrics(request: Request) -> Response:
    """Prometheus exposition of jobs, loops, SQL counters, conflicts and render figures."""
    state = request.app.state
    runtime: Runtime = state.runtime
    counts = await runtime.counts()
    async with state.db.read_connection() as conn:
        render_counts = await request_counts(conn)
    render = getattr(state, "render", None)
    renderers = await render.renderers() if render is not None else []
    loops = loops_of(state)
    snap = Snapshot(
        job_counts=counts,
        render_counts=render_counts,
        renderers=renderers,
        runtime=runtime,
        loops=loops,
        write_conflicts=state.db.stats.write_conflicts,
        sql=state.db.counter.snapshot() if state.db.counter is not None else None,
        extra=list(getattr(state, "metric_sources", [])),
    )
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(snap))
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
