"""Queue at scale (issue 33, item 5): claims and throughput with a big jobs table, and pruning.

Per database (SQLite: a WAL file in a temporary folder; PostgreSQL: a database created for the
run at TEST_DATABASE_URL's server, dropped at the end), two scratch databases side by side:

- *empty*: migrated, emptied before every repetition, then given the jobs that repetition drains
  (`--jobs` plus 2,000, so the drain never runs into its tail);
- *big*: 1,000,000 finished jobs over the last seven days and 100,000 pending (`--finished`,
  `--pending`; half of the pending are due on the measured queue, the rest are retries waiting
  for their backoff and other queues' work; see `queue_scale_fill.py`), topped up before every
  repetition so that as many jobs are due on the measured queue as at the start.

Each repetition drains `--jobs` no-op jobs from each, alternating, with Deckyard's own runtime
(`Runtime`, default settings): `--workers` workers of `--concurrency` slots on one queue, in this
process. Measured per drain:

- throughput: jobs claimed and completed (committed) per second, from the first handler start
  until `--jobs` completions were committed;
- claim -> start: per job, from the claim (the `started_at` the claim wrote, taken as its
  statement began) to its handler starting: the claim's round trip plus the wait in the
  worker's prefetch buffer;
- claim statement: each claiming call's duration, timed around the store function the worker
  calls (PostgreSQL: `jobs_settle_claim`, one statement that also settles the previous batch and
  writes the events; SQLite: `job_claim`, the claim UPDATE inside the worker's transaction).

Then, on the big table: EXPLAIN of the claim and prune statements, and pruning as
`Maintenance.prune_tick` does it (batches of `job_prune_batch_size`, one after another while
they come back full) with a 60 s retention, so all of the history is due; meanwhile a probe
worker on a queue of its own takes single jobs enqueued at `--probe-rate` a second (no in-process
hand-off, so each goes through a claim), and their enqueue -> start times are compared with a
window before pruning began. Pruning stops after `--prune-seconds`; the rest is extrapolated
from the rate so far and labelled so.

`--by-hand SQL` runs a statement on every scratch database right after its migrations (for
trying a proposed index before anyone writes its migration).

Run: .venv/bin/python bench/queue_scale.py [--reps 3] [--jobs 10000] [--only postgresql]
Prints a table and writes bench/out/queue_scale.json (`--out`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from queue_scale_fill import (  # noqa: E402
    DUE_ON_QUEUE,
    KIND,
    QUEUE,
    Block,
    Scratch,
    fill,
    pending_sql,
    top_up,
)

import deckyard.jobs.worker as worker_module  # noqa: E402
from deckyard.clock import SYSTEM_CLOCK  # noqa: E402
from deckyard.config import Settings  # noqa: E402
from deckyard.db import Database  # noqa: E402
from deckyard.db.migrate import upgrade  # noqa: E402
from deckyard.eventloop import run  # noqa: E402
from deckyard.jobs import JobContext, RecoveryPolicy, Runtime  # noqa: E402
from deckyard.jobs.maintenance import Maintenance  # noqa: E402
from deckyard.jobs.metrics import RuntimeMetrics  # noqa: E402

PROBE_QUEUE, PROBE_KIND = "probe", "probe"
TAIL = 2000
"""Jobs beyond `--jobs` waiting in the empty table, so neither drain measures its tail."""


def now_us() -> int:
    return int(time.time() * 1_000_000)


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


@contextlib.contextmanager
def timed_claims(out: list[tuple[float, int]]) -> Iterator[None]:
    """Record (seconds, jobs claimed) of every claiming store call the workers make."""
    settle, claim = worker_module.jobs_settle_claim, worker_module.job_claim

    async def timed_settle(*args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        result = await settle(*args, **kwargs)
        if args[4]:
            out.append((time.perf_counter() - began, len(result[1])))
        return result

    async def timed_claim(*args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        result = await claim(*args, **kwargs)
        out.append((time.perf_counter() - began, len(result)))
        return result

    worker_module.jobs_settle_claim = timed_settle  # type: ignore[assignment]
    worker_module.job_claim = timed_claim  # type: ignore[assignment]
    try:
        yield
    finally:
        worker_module.jobs_settle_claim = settle  # type: ignore[assignment]
        worker_module.job_claim = claim  # type: ignore[assignment]


async def migrate(scratch: Scratch, revision: str, by_hand: list[str]) -> None:
    db = Database(scratch.url)
    await upgrade(db, revision)
    await db.dispose()
    for statement in by_hand:
        scratch.sql(statement)


async def drain(url: str, jobs: int, workers: int, concurrency: int) -> dict[str, float]:
    """Drain `jobs` no-op jobs from `QUEUE` with the runtime; the figures of one drain."""
    rt = Runtime(url, settings=Settings.load(job_concurrency=concurrency), migrate=False)
    waits: list[float] = []
    first: list[float] = []

    @rt.handler(KIND, queue=QUEUE)
    async def noop(ctx: JobContext) -> None:
        if not first:
            first.append(time.perf_counter())
        assert ctx.job.started_at is not None
        waits.append(time.time() - ctx.job.started_at.timestamp())

    for _ in range(workers):
        rt.worker([QUEUE], concurrency=concurrency)
    claims: list[tuple[float, int]] = []
    with timed_claims(claims):
        await rt.start()
        try:
            cpu = time.process_time()
            while (done := sum(rt.metrics.completions.values())) < jobs:
                await asyncio.sleep(0.002)
            elapsed = time.perf_counter() - first[0]
            cpu = time.process_time() - cpu
        finally:
            await rt.stop()
    assert rt.metrics.completions["succeeded"] >= jobs, rt.metrics.completions
    took = [c[0] for c in claims if c[1]]
    return {
        "jobs_per_s": done / elapsed,
        "cpu_us_per_job": cpu / done * 1e6,
        "claim_to_start_p50_ms": pct(waits, 50) * 1000,
        "claim_to_start_p95_ms": pct(waits, 95) * 1000,
        "claim_stmt_p50_ms": pct(took, 50) * 1000,
        "claim_stmt_p95_ms": pct(took, 95) * 1000,
        "jobs_per_claim": float(statistics.mean(c[1] for c in claims if c[1])),
    }


def reset_empty(scratch: Scratch, jobs: int, tag: str) -> None:
    """Empty the tables (PostgreSQL: TRUNCATE, so no dead rows stay behind), then add the jobs
    one drain takes (and its tail)."""
    if scratch.dialect == "sqlite":
        scratch.sql("DELETE FROM job_events")
        scratch.sql("DELETE FROM jobs")
    else:
        scratch.sql("TRUNCATE job_events, jobs")
    block = Block(QUEUE, KIND, jobs + TAIL, now_us() - 1_000_000, 0, dedupe_every=5, tag=tag)
    scratch.sql(pending_sql(scratch.dialect, block, now_us()))


# --- EXPLAIN --------------------------------------------------------------------------------
# The statements as store.py / store_admin.py send them (the claim's inner SELECT: PostgreSQL's
# one-hop form, `queue = :queue` for a worker of one queue as the bench's is; SQLite's with
# `IN`), with literal values.


def _claim_select(dialect: str, cutoff: str) -> str:
    queues = f"queue IN ('{QUEUE}')" if dialect == "sqlite" else f"queue = '{QUEUE}'"
    lock = " FOR UPDATE SKIP LOCKED" if dialect != "sqlite" else ""
    return (
        f"SELECT id FROM jobs WHERE status = 'pending' AND {queues} AND run_at <= {cutoff} "
        f"AND attempt < max_attempts ORDER BY priority, run_at, id LIMIT 100{lock}"
    )


def explain(scratch: Scratch) -> dict[str, dict[str, Any]]:
    """Plans and times of the claim, next-due and prunable reads on the table as it is."""
    d = scratch.dialect
    now = datetime.now(UTC)
    if d == "sqlite":
        text = "'%Y-%m-%d %H:%M:%S.%f'"
        cutoff = now.strftime(text)
        old = (now - timedelta(seconds=60)).strftime(text)
    else:
        cutoff, old = "now()", "now() - interval '60 seconds'"
    statements = {
        "claim (store.jobs_settle_claim / job_claim)": _claim_select(d, cutoff),
        "next due (store.job_next_due)": (
            f"SELECT min(run_at) FROM jobs WHERE status = 'pending' AND queue IN ('{QUEUE}')"
        ),
        "prunable (store_admin.jobs_prunable)": (
            "SELECT id FROM jobs WHERE status IN ('succeeded', 'failed', 'cancelled') "
            f"AND finished_at < {old} ORDER BY finished_at LIMIT 500"
        ),
    }
    out: dict[str, dict[str, Any]] = {}
    for name, sql in statements.items():
        if d == "sqlite":
            plan = [r[-1] for r in scratch.sql(f"EXPLAIN QUERY PLAN {sql}", fetch=True)]
            began = time.perf_counter()
            scratch.sql(sql, fetch=True)
            out[name] = {"plan": plan, "ms": (time.perf_counter() - began) * 1000}
        else:
            rows = scratch.sql(f"EXPLAIN (ANALYZE, BUFFERS) {sql}", fetch=True)
            plan = [r[0] for r in rows]
            ms = next(float(p.split()[2]) for p in plan if p.startswith("Execution Time"))
            out[name] = {"plan": plan, "ms": ms}
    return out


# --- pruning ----------------------------------------------------------------------------------


async def prune_under_probe(
    url: str, history: int, cap: float, probe_rate: float, baseline: float
) -> dict[str, Any]:
    """Prune the history in `Maintenance.prune_tick`'s batches while a probe worker claims.

    One `Database` for the probe runtime and the pruning, as in a node (on SQLite they share
    the process's writer lock). Probe jobs are enqueued at `probe_rate` a second; their
    enqueue -> start times during the `baseline` seconds before pruning and during pruning are
    the answer to "do claims stall meanwhile".
    """
    probe_settings = Settings.load(job_hand_off=False)
    db = Database.from_settings(probe_settings, url=url)
    rt = Runtime(db, settings=probe_settings, migrate=False)
    prune_settings = Settings.load(job_retention_seconds=60.0)
    maintenance = Maintenance(
        db, prune_settings, SYSTEM_CLOCK, RuntimeMetrics(), RecoveryPolicy(), []
    )
    started: dict[int, float] = {}

    @rt.handler(PROBE_KIND, queue=PROBE_QUEUE)
    async def probe(ctx: JobContext) -> None:
        started[ctx.job.id] = time.perf_counter()

    rt.worker([PROBE_QUEUE], concurrency=4)
    sent: list[tuple[int, float]] = []
    stop = asyncio.Event()

    async def feed() -> None:
        while not stop.is_set():
            t = time.perf_counter()
            job = await rt.enqueue(PROBE_KIND)
            sent.append((job.id, t))
            await asyncio.sleep(max(0.0, 1 / probe_rate - (time.perf_counter() - t)))

    batches: list[float] = []
    complete = False
    async with rt:
        feeder = asyncio.create_task(feed())
        await asyncio.sleep(baseline)
        prune_began = time.perf_counter()
        while time.perf_counter() - prune_began < cap:
            t = time.perf_counter()
            tick = await maintenance.prune_tick()
            batches.append(time.perf_counter() - t)
            if not tick.active:
                complete = True
                break
            if not tick.more and tick.due_in:  # the pause the prune loop would take (SQLite)
                await asyncio.sleep(tick.due_in)
        prune_ended = time.perf_counter()
        stop.set()
        await feeder
        deadline = time.perf_counter() + 10
        while len(started) < len(sent) and time.perf_counter() < deadline:
            await asyncio.sleep(0.01)
    before = [started[i] - t for i, t in sent if t < prune_began and i in started]
    during = [started[i] - t for i, t in sent if prune_began <= t < prune_ended and i in started]
    pruned = maintenance.metrics.pruned
    seconds = prune_ended - prune_began
    return {
        "pruned": pruned,
        "seconds": seconds,
        "complete": complete,
        "batches": len(batches),
        "batch_p50_ms": pct(batches, 50) * 1000,
        "batch_p95_ms": pct(batches, 95) * 1000,
        "batch_max_ms": max(batches) * 1000,
        "rows_per_s": pruned / seconds,
        "projected_all_seconds": seconds if complete else history / (pruned / seconds),
        "probe_before": _latency(before),
        "probe_during": _latency(during),
        "probe_not_started": len(sent) - len(started),
    }


def _latency(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "p50_ms": pct(values, 50) * 1000,
        "p95_ms": pct(values, 95) * 1000,
        "max_ms": max(values, default=float("nan")) * 1000,
    }


# --- one database -----------------------------------------------------------------------------


async def measure(dialect: str, args: argparse.Namespace) -> dict[str, Any]:
    empty, big = Scratch(dialect, "empty"), Scratch(dialect, "big")
    result: dict[str, Any] = {"empty": [], "big": []}
    try:
        await migrate(empty, args.revision, args.by_hand)
        await migrate(big, args.revision, args.by_hand)
        if dialect != "sqlite":
            settings = "SELECT name, setting FROM pg_settings WHERE name IN ('server_version', "
            settings += "'autovacuum', 'shared_buffers', 'work_mem', 'synchronous_commit')"
            result["server"] = dict(big.sql(settings, fetch=True))
        result["fill"] = fill(big, args.finished, args.pending, now_us())
        print(
            f"{dialect}: filled in {sum(result['fill'].values()):.1f} s {result['fill']}",
            flush=True,
        )
        due = big.count(DUE_ON_QUEUE)
        for rep in range(args.reps):
            reset_empty(empty, args.jobs, f"e{rep}")
            result["empty"].append(
                await drain(empty.url, args.jobs, args.workers, args.concurrency)
            )
            top_up(big, due, now_us(), f"r{rep}")
            counts = big.sql("SELECT status, count(*) FROM jobs GROUP BY status", fetch=True)
            figures = await drain(big.url, args.jobs, args.workers, args.concurrency)
            figures["rows_before"] = {str(s): int(n) for s, n in counts}
            result["big"].append(figures)
            e, b = result["empty"][-1], result["big"][-1]
            print(
                f"{dialect} rep {rep + 1}: empty {e['jobs_per_s']:,.0f} jobs/s, "
                f"big {b['jobs_per_s']:,.0f} jobs/s; claim statement p50 "
                f"{e['claim_stmt_p50_ms']:.2f} / {b['claim_stmt_p50_ms']:.2f} ms",
                flush=True,
            )
        top_up(big, due, now_us(), "explain")
        result["explain"] = explain(big)
        history = big.count("finished_at IS NOT NULL")
        result["prune"] = await prune_under_probe(
            big.url, history, args.prune_seconds, args.probe_rate, args.baseline_seconds
        )
        print(f"{dialect} prune: {json.dumps(result['prune'])}", flush=True)
    finally:
        empty.close()
        big.close()
    return result


def median(runs: list[dict[str, Any]], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def summary(results: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for dialect, r in results.items():
        keys = [k for k in r["empty"][0] if isinstance(r["empty"][0][k], float)]
        row = {case: {k: median(r[case], k) for k in keys} for case in ("empty", "big")}
        row["ratio"] = row["big"]["jobs_per_s"] / row["empty"]["jobs_per_s"]
        row["ratio_per_rep"] = [
            b["jobs_per_s"] / e["jobs_per_s"] for e, b in zip(r["empty"], r["big"], strict=True)
        ]
        out[dialect] = row
    return out


def print_table(results: dict[str, Any], summ: dict[str, Any], reps: int) -> None:
    print(f"\nMedian of {reps} repetitions (empty and big alternated):\n")
    print(
        "| database | table | jobs/s | claim->start p50 / p95 ms | claim statement p50 / p95 ms "
        "| jobs per claim | CPU us/job (this process) |"
    )
    print("|---|---|---|---|---|---|---|")
    for dialect, row in summ.items():
        for case in ("empty", "big"):
            f = row[case]
            print(
                f"| {dialect} | {case} | {f['jobs_per_s']:,.0f} | "
                f"{f['claim_to_start_p50_ms']:.1f} / {f['claim_to_start_p95_ms']:.1f} | "
                f"{f['claim_stmt_p50_ms']:.2f} / {f['claim_stmt_p95_ms']:.2f} | "
                f"{f['jobs_per_claim']:.0f} | {f['cpu_us_per_job']:.0f} |"
            )
    print("\n| database | big / empty jobs/s (median) | per repetition | target >= 0.80 |")
    print("|---|---|---|---|")
    for dialect, row in summ.items():
        per = ", ".join(f"{x:.2f}" for x in row["ratio_per_rep"])
        verdict = "met" if row["ratio"] >= 0.8 else "MISSED"
        print(f"| {dialect} | {row['ratio']:.2f} | {per} | {verdict} |")
    print("\nPruning the history (60 s retention), with a probe worker claiming meanwhile:\n")
    print(
        "| database | rows pruned | seconds | all of it, s | rows/s | batch p50 / p95 / max ms | "
        "probe enqueue->start before: p50 / p95 / max ms | during |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for dialect, r in results.items():
        p = r["prune"]
        projected = f"{p['projected_all_seconds']:.0f}" + ("" if p["complete"] else " (projected)")
        done = "" if p["complete"] else " (stopped: cap)"
        b, d = p["probe_before"], p["probe_during"]
        print(
            f"| {dialect} | {p['pruned']:,}{done} | {p['seconds']:.1f} | {projected} | "
            f"{p['rows_per_s']:,.0f} | "
            f"{p['batch_p50_ms']:.0f} / {p['batch_p95_ms']:.0f} / {p['batch_max_ms']:.0f} | "
            f"{b['p50_ms']:.1f} / {b['p95_ms']:.1f} / {b['max_ms']:.0f} | "
            f"{d['p50_ms']:.1f} / {d['p95_ms']:.1f} / {d['max_ms']:.0f} |"
        )
    for dialect, r in results.items():
        print(f"\n{dialect}, big table, EXPLAIN:")
        for name, e in r["explain"].items():
            print(f"  {name}: {e['ms']:.2f} ms")
            for line in e["plan"]:
                print(f"    {line}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=10_000, help="jobs drained per measurement")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--concurrency", type=int, default=10)
    ap.add_argument("--finished", type=int, default=1_000_000)
    ap.add_argument("--pending", type=int, default=100_000)
    ap.add_argument("--prune-seconds", type=float, default=120.0)
    ap.add_argument("--probe-rate", type=float, default=50.0)
    ap.add_argument("--baseline-seconds", type=float, default=10.0)
    ap.add_argument("--only", choices=("sqlite", "postgresql"))
    ap.add_argument(
        "--revision", default="head", help="migrate to (an older revision shows what it cost)"
    )
    ap.add_argument("--by-hand", action="append", default=[], metavar="SQL")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "queue_scale.json")
    args = ap.parse_args()
    began = time.perf_counter()
    load_before = os.getloadavg()
    results: dict[str, Any] = {}
    for dialect in ("sqlite", "postgresql"):
        if args.only in (None, dialect):
            results[dialect] = run(measure(dialect, args))
    summ = summary(results)
    print_table(results, summ, args.reps)
    report = {
        "command": os.environ.get("BENCH_COMMAND")
        or " ".join([".venv/bin/python bench/queue_scale.py", *sys.argv[1:]]),
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "minutes": (time.perf_counter() - began) / 60,
        "load_before_after": [load_before, os.getloadavg()],
        "machine": f"{os.cpu_count()} cores, {platform.platform()}",
        "args": {k: v for k, v in vars(args).items() if k != "out"},
        "summary": summ,
        "runs": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, default=str))
    print(f"\n{report['minutes']:.1f} minutes; wrote {args.out}")


if __name__ == "__main__":
    main()
