"""Measuring `deckyard baseline`: the whole instrumented server, SQL per loop (seed 000 §6.2).

A `Node` runs in this process under the API app (so every loop it normally runs, the API's
housekeeping included), with statement instrumentation on.
After a warm-up the counters are reset; an idle window is measured, then (with `--mixed`) a
mixed load driven through the HTTP API in process. The idle figure for writes must be 0.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import psutil
from fastapi import FastAPI

from deckyard.api.app import create_app
from deckyard.config import Settings
from deckyard.node import Node

MixedLoad = Callable[[FastAPI, httpx.AsyncClient, float], Awaitable[dict[str, Any]]]


@dataclass
class WindowReport:
    """Figures for one measured window."""

    name: str
    seconds: float
    loops: list[dict[str, Any]]
    locked_errors: int
    rss_bytes: int
    tree_pss_bytes: int
    extra: dict[str, Any]

    def total(self, field: str) -> float:
        """A column summed over loops."""
        return float(sum(row[field] for row in self.loops))


def _memory() -> tuple[int, int]:
    """(this process's RSS, the proportional set size of it and all its children).

    PSS splits shared pages between the processes sharing them, so summing it over Chromium's
    many processes does not count the same library pages again and again, as RSS would.
    """
    me = psutil.Process()
    rss = int(me.memory_info().rss)
    pss = 0
    for proc in [me, *me.children(recursive=True)]:
        try:
            pss += int(proc.memory_full_info().pss)
        except psutil.Error:
            continue
    return rss, pss


def _percentile(values: list[float], p: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


async def _window(
    node: Node, name: str, seconds: float, load: Callable[[], Awaitable[dict[str, Any]]] | None
) -> WindowReport:
    db = node.db
    assert db.counter is not None
    loops = node.loops
    before_ticks = {lp.name: lp.stats.ticks for lp in loops}
    before_locked = db.stats.locked_errors
    db.counter.reset()
    started = time.perf_counter()
    extra: dict[str, Any] = {}
    if load is not None:
        extra = await load()
    remaining = seconds - (time.perf_counter() - started)
    if remaining > 0:
        await asyncio.sleep(remaining)
    elapsed = time.perf_counter() - started
    counts = db.counter.snapshot()
    rows = []
    names = sorted({lp.name for lp in loops} | set(counts))
    by_name = {lp.name: lp for lp in loops}
    for loop_name in names:
        c = counts.get(loop_name, {})
        lp = by_name.get(loop_name)
        ticks = (lp.stats.ticks - before_ticks.get(loop_name, 0)) if lp else 0
        durations = list(lp.stats.durations)[-ticks:] if lp and ticks else []
        rows.append(
            {
                "loop": loop_name,
                "reads_per_s": c.get("reads", 0) / elapsed,
                "writes_per_s": c.get("writes", 0) / elapsed,
                "write_tx_per_s": c.get("write_transactions", 0) / elapsed,
                "writes": c.get("writes", 0),
                "zero_row_writes": c.get("zero_row_writes", 0),
                "ticks": ticks,
                "tick_p50_ms": _percentile(durations, 50) * 1000,
                "tick_p95_ms": _percentile(durations, 95) * 1000,
            }
        )
    rss, pss = _memory()
    return WindowReport(
        name, elapsed, rows, db.stats.locked_errors - before_locked, rss, pss, extra
    )


async def run_baseline(
    settings: Settings, idle_seconds: float, mixed: MixedLoad | None, mixed_seconds: float
) -> list[WindowReport]:
    """Start the instrumented node and app, measure an idle window and optionally a mixed one."""
    instrumented = settings.model_copy(update={"instrument_sql": True})
    node = Node(instrumented)
    app = create_app(instrumented, node=node)
    reports = []
    async with app.router.lifespan_context(app):
        await asyncio.sleep(min(2.0, idle_seconds / 4))
        reports.append(await _window(node, "idle", idle_seconds, None))
        if mixed is not None:
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://baseline") as c:

                async def load() -> dict[str, Any]:
                    return await mixed(app, c, mixed_seconds)

                reports.append(await _window(node, "mixed", mixed_seconds, load))
    return reports


def as_dict(reports: list[WindowReport]) -> list[dict[str, Any]]:
    """Reports as plain data for `--json`."""
    return [
        {
            "window": r.name,
            "seconds": round(r.seconds, 2),
            "locked_errors": r.locked_errors,
            "rss_bytes": r.rss_bytes,
            "tree_pss_bytes": r.tree_pss_bytes,
            "totals": {
                "reads_per_s": r.total("reads_per_s"),
                "writes_per_s": r.total("writes_per_s"),
                "write_tx_per_s": r.total("write_tx_per_s"),
                "writes": r.total("writes"),
                "zero_row_writes": r.total("zero_row_writes"),
            },
            "loops": r.loops,
            **r.extra,
        }
        for r in reports
    ]


def median_or_zero(values: list[float]) -> float:
    """The median, or 0 for no values."""
    return statistics.median(values) if values else 0.0
