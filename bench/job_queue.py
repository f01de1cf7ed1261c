"""Queue benchmark: throughput, enqueue->start latency, idle statements, on SQLite and PostgreSQL.

Run: .venv/bin/python bench/job_queue.py [--jobs 20000] [--reps 3] [--idle 60] [--write-docs]

Each figure is measured on this machine in this run; nothing is copied from elsewhere.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from deckyard.config import Settings  # noqa: E402
from deckyard.db import Database  # noqa: E402
from deckyard.db.migrate import upgrade  # noqa: E402
from deckyard.jobs import EnqueueSpec, JobContext, Runtime  # noqa: E402

PG_URL = os.environ.get("TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test")


class Target:
    """A fresh database for one measurement: a SQLite file or a PostgreSQL schema."""

    def __init__(self, dialect: str) -> None:
        self.dialect = dialect
        self._tmp = tempfile.TemporaryDirectory(prefix="dybench-")
        self.schema = f"bench_{uuid.uuid4().hex[:10]}"
        if dialect == "sqlite":
            self.url = f"sqlite:///{self._tmp.name}/bench.db"
        else:
            with psycopg.connect(PG_URL, autocommit=True) as conn:
                conn.execute(f'CREATE SCHEMA "{self.schema}"')
            self.url = f"{PG_URL}?options=-csearch_path%3D{self.schema}"

    def close(self) -> None:
        if self.dialect != "sqlite":
            with psycopg.connect(PG_URL, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA "{self.schema}" CASCADE')
        self._tmp.cleanup()


async def _prepare(url: str) -> None:
    db = Database(url)
    await upgrade(db)
    await db.dispose()


async def throughput(dialect: str, n: int, concurrency: int, work_ms: float) -> float:
    """Jobs/s draining `n` pre-enqueued jobs with one worker of `concurrency` slots."""
    rate, _ = await drain(dialect, n, concurrency, work_ms)
    return rate


async def drain(dialect: str, n: int, concurrency: int, work_ms: float) -> tuple[float, float]:
    """(jobs/s, CPU microseconds per job) draining `n` pre-enqueued jobs, as `throughput`.

    CPU is this process's (every thread, so aiosqlite's too) over the drain: a figure that a
    loaded machine disturbs far less than jobs/s.
    """
    target = Target(dialect)
    try:
        await _prepare(target.url)
        rt = Runtime(target.url, settings=Settings.load(job_concurrency=concurrency), migrate=False)
        done = asyncio.Event()

        @rt.handler("noop", queue="bench")
        async def noop(ctx: JobContext) -> None:
            if work_ms:
                await asyncio.sleep(work_ms / 1000)

        batch = 5000
        for start in range(0, n, batch):
            await rt.enqueue_many([EnqueueSpec("noop")] * min(batch, n - start))
        rt.worker(["bench"], concurrency=concurrency)

        async def watch() -> None:
            while sum(rt.metrics.completions.values()) < n:
                await asyncio.sleep(0.005)
            done.set()

        t0, c0 = time.perf_counter(), time.process_time()
        await rt.start()
        await asyncio.wait_for(watch(), timeout=600)
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
        await rt.stop()
        assert rt.metrics.completions["succeeded"] == n, rt.metrics.completions
        return n / elapsed, cpu / n * 1e6
    finally:
        target.close()


async def latency_in_process(dialect: str, samples: int) -> list[float]:
    """Seconds from `enqueue()` called to handler started, for single jobs on an idle runtime."""
    target = Target(dialect)
    try:
        await _prepare(target.url)
        rt = Runtime(target.url, settings=Settings.load(), migrate=False)
        started: asyncio.Queue[float] = asyncio.Queue()

        @rt.handler("ping", queue="lat")
        async def ping(ctx: JobContext) -> None:
            started.put_nowait(time.perf_counter())

        rt.worker(["lat"], concurrency=10)
        out: list[float] = []
        async with rt:
            await asyncio.sleep(0.5)
            for _ in range(samples):
                t0 = time.perf_counter()
                await rt.enqueue("ping")
                out.append(await asyncio.wait_for(started.get(), 10) - t0)
                await asyncio.sleep(0.02)
        return out
    finally:
        target.close()


ENQUEUER = """
import asyncio, random, sys, time
sys.path.insert(0, sys.argv[3])
from deckyard.config import Settings
from deckyard.jobs import Runtime
async def main(url, n):
    rt = Runtime(url, settings=Settings.load(), migrate=False)
    await rt.enqueue("ping", {"t": None}, queue="lat")  # connects: not a sample
    await asyncio.sleep(0.5)
    for _ in range(n):
        await rt.enqueue("ping", {"t": time.monotonic()}, queue="lat")
        await asyncio.sleep(random.uniform(0.05, 0.15))
    await rt.stop()
from deckyard.eventloop import run
run(main(sys.argv[1], int(sys.argv[2])))
"""


async def latency_cross_process(samples: int) -> list[float]:
    """Seconds from enqueue in another process to start here (PostgreSQL: NOTIFY wakes us).

    Both ends read `time.monotonic()`, one clock for every process on Linux. The enqueuer pauses
    50-150 ms after each job, as `bench/compare_queues.py` does.
    """
    target = Target("postgresql")
    try:
        await _prepare(target.url)
        rt = Runtime(target.url, settings=Settings.load(), migrate=False)
        out: list[float] = []

        @rt.handler("ping", queue="lat")
        async def ping(ctx: JobContext) -> None:
            if ctx.payload["t"] is not None:
                out.append(time.monotonic() - ctx.payload["t"])

        rt.worker(["lat"], concurrency=10)
        async with rt:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-c", ENQUEUER, target.url, str(samples), str(ROOT / "src")
            )
            await proc.wait()
            deadline = time.monotonic() + 30
            while len(out) < samples and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
        return out
    finally:
        target.close()


async def idle_snapshot(
    dialect: str, seconds: float, *, burst: int = 0, settle: float = 1.0
) -> dict[str, dict[str, Any]]:
    """SQL counts per loop an idle runtime (default settings, one worker) sends in `seconds`.

    With `burst`, that many no-op jobs run first; counting starts `settle` seconds after the
    last one finished (after start-up when there is no burst).
    """
    target = Target(dialect)
    try:
        await _prepare(target.url)
        settings = Settings.load(instrument_sql=True)
        db = Database.from_settings(settings, url=target.url)
        rt = Runtime(db, settings=settings, migrate=False)

        @rt.handler("noop", queue="idle")
        async def noop(ctx: JobContext) -> None:
            return None

        rt.worker(["idle"])
        async with rt:
            if burst:
                await rt.enqueue_many([EnqueueSpec("noop", queue="idle")] * burst)
                while sum(rt.metrics.completions.values()) < burst:
                    await asyncio.sleep(0.01)
            await asyncio.sleep(settle)
            assert db.counter is not None
            db.counter.reset()
            await asyncio.sleep(seconds)
            snap = db.counter.snapshot()
        await db.dispose()
        return snap
    finally:
        target.close()


async def idle_statements(dialect: str, seconds: float) -> dict[str, float]:
    """Statements per minute an idle runtime with default settings and one worker sends."""
    snap = await idle_snapshot(dialect, seconds)
    scale = 60 / seconds
    return {
        f"{kind}_per_min": sum(c[kind] for c in snap.values()) * scale
        for kind in ("reads", "writes")
    }


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):,.0f} ({min(values):,.0f}-{max(values):,.0f})"


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=20000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--samples", type=int, default=200)
    ap.add_argument("--idle", type=float, default=60.0)
    ap.add_argument("--write-docs", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    results: dict[str, Any] = {}
    for dialect in ("postgresql", "sqlite"):
        for work in (0.0, 5.0):
            runs = [await throughput(dialect, args.jobs, 10, work) for _ in range(args.reps)]
            results[f"throughput_{dialect}_{int(work)}ms"] = runs
            print(f"{dialect} throughput ({work} ms work): {spread(runs)} jobs/s", flush=True)
        lat = await latency_in_process(dialect, args.samples)
        results[f"latency_in_process_{dialect}"] = lat
        print(
            f"{dialect} enqueue->start in process: p50 {pct(lat, 50) * 1000:.2f} ms, "
            f"p95 {pct(lat, 95) * 1000:.2f} ms, p99 {pct(lat, 99) * 1000:.2f} ms",
            flush=True,
        )
        idle = await idle_statements(dialect, args.idle)
        results[f"idle_{dialect}"] = idle
        print(f"{dialect} idle: {idle}", flush=True)
    cross = await latency_cross_process(args.samples)
    results["latency_cross_process_postgresql"] = cross
    print(
        f"postgresql enqueue->start across processes: p50 {pct(cross, 50) * 1000:.2f} ms, "
        f"p95 {pct(cross, 95) * 1000:.2f} ms, p99 {pct(cross, 99) * 1000:.2f} ms",
        flush=True,
    )
    if args.json:
        print(json.dumps(results))
    if args.write_docs:
        write_docs(results, args)


def write_docs(r: dict[str, Any], args: argparse.Namespace) -> None:
    def lat(values: list[float]) -> str:
        return " / ".join(f"{pct(values, p) * 1000:.2f}" for p in (50, 95, 99))

    pg_version = subprocess.run(
        ["psql", PG_URL, "-Atc", "show server_version"], capture_output=True, text=True
    ).stdout.strip()
    cross = {"postgresql": lat(r["latency_cross_process_postgresql"]), "sqlite": "n/a"}
    lines = [
        "## Job runtime (`bench/job_queue.py`)",
        "",
        f"Deckyard's runtime alone, no peer: {args.jobs:,} jobs enqueued in bulk, then drained "
        "by one worker (this process) with concurrency 10, with full leases, fencing and a "
        f"`started` and a terminal event per job (median (min-max) of {args.reps} runs); "
        f"enqueue -> handler start of single jobs on an idle runtime ({args.samples} samples, "
        "ms; across processes through NOTIFY, PostgreSQL only: a SQLite file belongs to one "
        "process); statements a minute of one idle worker with default settings "
        f"({args.idle:g} s window). Command: `.venv/bin/python bench/job_queue.py --jobs "
        f"{args.jobs} --reps {args.reps} --samples {args.samples} --idle {args.idle:g} "
        f"--write-docs` — {time.strftime('%Y-%m-%d')}; {os.cpu_count()} cores, "
        f"{platform.platform()}, Python {platform.python_version()}, PostgreSQL {pg_version}, "
        f"SQLite {__import__('sqlite3').sqlite_version}.",
        "",
        "| database | no-op jobs/s | 5 ms jobs/s | in process p50 / p95 / p99 | across processes "
        "p50 / p95 / p99 | idle reads / writes per min |",
        "|---|---|---|---|---|---|",
    ]
    for d in ("postgresql", "sqlite"):
        i = r[f"idle_{d}"]
        lines.append(
            f"| {d} | {spread(r[f'throughput_{d}_0ms'])} | {spread(r[f'throughput_{d}_5ms'])} | "
            f"{lat(r[f'latency_in_process_{d}'])} | {cross[d]} | "
            f"{i['reads_per_min']:.1f} / {i['writes_per_min']:.1f} |"
        )
    section = "\n".join(lines) + "\n"
    path = ROOT / "docs" / "benchmarks.md"
    text = path.read_text() if path.exists() else "# Benchmarks\n\n"
    marker_start, marker_end = "<!-- queue:start -->", "<!-- queue:end -->"
    block = f"{marker_start}\n{section}{marker_end}"
    if marker_start in text:
        head, rest = text.split(marker_start, 1)
        text = head + block + rest.split(marker_end, 1)[1]
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    path.write_text(text)
    print(f"wrote {path}")


if __name__ == "__main__":
    asyncio.run(main())
