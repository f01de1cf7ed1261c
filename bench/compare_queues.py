"""Queue comparisons: Deckyard vs Procrastinate and PgQueuer (PostgreSQL) and huey (SQLite).

The orchestrating functions (`throughput`, `latency`, `idle_load`, `recovery`) run in the
harness process; every worker, enqueuer and victim runs in a child process started from this
file (`python bench/compare_queues.py child '{json}'`), so each comparison is one process tree.
Each PostgreSQL measurement gets a fresh database (dropped afterwards), each SQLite one a fresh
file. Timestamps that cross processes use CLOCK_MONOTONIC (`time.monotonic()`), which Linux
shares between processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PG_URL = os.environ.get("TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test")
PG_BASE = PG_URL.rsplit("/", 1)[0]
PG_LOG_CANDIDATES = [
    os.environ.get("BENCH_PG_LOG", ""),
    "/var/log/postgresql/postgresql-15-main.log",
]

PG_SYSTEMS = ("deckyard-pg", "procrastinate", "pgqueuer")
SQLITE_SYSTEMS = ("deckyard-sqlite", "huey")
SYSTEMS = ("deckyard-pg", "procrastinate", "pgqueuer", "deckyard-sqlite", "huey")

# Recovery settings: every system declares a worker dead after about 10 s of silence.
RECOVERY = {
    "deckyard": {"job_lease_seconds": 10.0, "job_heartbeat_interval_seconds": 2.0},
    "procrastinate": {"update_heartbeat_interval": 2.0, "seconds_since_heartbeat": 10.0},
    "procrastinate_cron": "* * * * * */2",
    "pgqueuer": {"heartbeat_timeout_s": 10.0},
}


# --------------------------------------------------------------------------------------------
# Targets: a fresh PostgreSQL database or SQLite file per measurement
# --------------------------------------------------------------------------------------------


@dataclass
class Target:
    system: str
    tmp: str = ""
    dbname: str = ""

    @property
    def is_pg(self) -> bool:
        return self.system in PG_SYSTEMS

    @property
    def url(self) -> str:
        if self.is_pg:
            return f"{PG_BASE}/{self.dbname}"
        return str(Path(self.tmp) / "bench.db")

    def spec(self) -> dict[str, Any]:
        return {"system": self.system, "url": self.url}


def pg_admin(sql: str) -> None:
    import psycopg

    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(sql)  # type: ignore[arg-type]


def create_target(system: str, *, log_statements: bool = False) -> Target:
    t = Target(system, tmp=tempfile.mkdtemp(prefix="dycmp-"))
    if t.is_pg:
        t.dbname = f"dycmp_{system.replace('-', '_')}_{uuid.uuid4().hex[:8]}"
        pg_admin(f'CREATE DATABASE "{t.dbname}"')
        if log_statements:
            pg_admin(f"ALTER DATABASE \"{t.dbname}\" SET log_statement = 'all'")
    return t


def drop_target(t: Target) -> None:
    import shutil

    if t.is_pg and t.dbname:
        pg_admin(f'DROP DATABASE IF EXISTS "{t.dbname}" WITH (FORCE)')
    shutil.rmtree(t.tmp, ignore_errors=True)


# --------------------------------------------------------------------------------------------
# Children
# --------------------------------------------------------------------------------------------


def child_cmd(args: dict[str, Any]) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), "child", json.dumps(args)]


def run_child(args: dict[str, Any], timeout: float = 600) -> dict[str, Any]:
    """Run a child to completion; return the JSON on its last `RESULT ` line."""
    proc = subprocess.run(
        child_cmd(args), capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("RESULT "):
            return dict(json.loads(line[7:]))
    raise RuntimeError(
        f"child {args.get('role')} {args.get('system')} failed ({proc.returncode}): "
        f"{proc.stderr[-2000:]}"
    )


class Child:
    """A long-running child whose stdout lines we read (worker, idle, recovery roles)."""

    def __init__(self, args: dict[str, Any], env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            child_cmd(args),
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            cwd=ROOT,
            env={**os.environ, **(env or {})},
            start_new_session=True,
        )
        self.lines: list[str] = []
        self._cv = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._cv:
                self.lines.append(line.rstrip("\n"))
                self._cv.notify_all()
        with self._cv:
            self._cv.notify_all()

    def wait_line(self, prefix: str, timeout: float, start: int = 0) -> tuple[int, str] | None:
        deadline = time.monotonic() + timeout
        with self._cv:
            while True:
                for i in range(start, len(self.lines)):
                    if self.lines[i].startswith(prefix):
                        return i, self.lines[i]
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not self._reader.is_alive()):
                    return None
                self._cv.wait(min(left, 0.2))

    def kill(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self, timeout: float = 15) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=timeout)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                self.kill()
        self._reader.join(timeout=5)


# ---- SQLite statement tracing (installed in a child before any system opens a connection) ----

TRACE: Counter[str] = Counter()
_TRACE_LOCK = threading.Lock()
TX_WORDS = ("BEGIN", "COMMIT", "ROLLBACK", "END", "SAVEPOINT", "RELEASE", "START")
WRITE_RE = re.compile(r"\b(INSERT|UPDATE|DELETE|REPLACE|MERGE|TRUNCATE|CREATE|DROP|ALTER)\b")


def classify(sql: str) -> str:
    """'write' (may change rows), 'tx' (transaction control), 'read' (everything else)."""
    text = re.sub(r"--[^\n]*|/\*.*?\*/", " ", sql, flags=re.S).strip().upper()
    first = text.split(None, 1)[0] if text else ""
    if first in TX_WORDS:
        return "tx"
    if WRITE_RE.search(text):
        return "write"
    if re.search(r"\bPROCRASTINATE_(?!JOB_STATUS)\w+\s*\(", text):
        return "write"  # procrastinate's SELECT of a data-modifying function
    return "read"


def install_sqlite_trace() -> None:
    original = sqlite3.connect

    def trace(sql: str) -> None:
        kind = classify(sql)
        with _TRACE_LOCK:
            TRACE[kind] += 1

    def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = original(*args, **kwargs)
        conn.set_trace_callback(trace)
        return conn

    sqlite3.connect = connect  # type: ignore[assignment]


def result(data: Any) -> None:
    print("RESULT " + json.dumps(data), flush=True)


# ---- Deckyard --------------------------------------------------------------------------------


def _deckyard_url(spec: dict[str, Any]) -> str:
    if spec["system"] == "deckyard-pg":
        return str(spec["url"])
    return f"sqlite:///{spec['url']}"


async def deckyard_child(a: dict[str, Any]) -> None:
    from deckyard.config import Settings
    from deckyard.jobs import EnqueueSpec, JobContext, Runtime

    url, role = _deckyard_url(a), a["role"]
    if role == "fill":
        rt = Runtime(url, settings=Settings.load())
        await rt.start(run_loops=False)
        n = a["n"]
        for start in range(0, n, 5000):
            await rt.enqueue_many([EnqueueSpec("noop", queue="bench")] * min(5000, n - start))
        await rt.stop()
        result({"ok": True})
        return

    overrides: dict[str, Any] = {}
    if role == "recovery-worker":
        overrides = dict(RECOVERY["deckyard"])  # type: ignore[arg-type]
    rt = Runtime(url, settings=Settings.load(**overrides), migrate=role != "drain")
    started: asyncio.Queue[float] = asyncio.Queue()
    count = 0
    done = asyncio.Event()
    work = a.get("work_ms", 0) / 1000

    @rt.handler("noop", queue="bench")
    async def noop(ctx: JobContext) -> None:
        nonlocal count
        if work:
            await asyncio.sleep(work)
        count += 1
        if count >= a.get("n", 1 << 60):
            done.set()

    @rt.handler("ping", queue="bench")
    async def ping(ctx: JobContext) -> None:
        now = time.monotonic()
        if role == "lat-worker":
            print(f"STARTED {now - ctx.payload['t']:.9f}", flush=True)
        else:
            started.put_nowait(now)

    @rt.handler("victim", queue="bench", max_attempts=3)
    async def victim(ctx: JobContext) -> None:
        print(f"STARTED {time.monotonic():.6f} {os.getpid()} {ctx.attempt}", flush=True)
        if a.get("sleep_victim"):
            await asyncio.sleep(600)

    if role == "drain":
        rt.worker(["bench"], concurrency=a["concurrency"])
        profiler = None
        if a.get("profile"):
            from pyinstrument import Profiler

            profiler = Profiler(async_mode="enabled")
            profiler.start()
        t0 = time.monotonic()
        await rt.start()
        await asyncio.wait_for(done.wait(), 900)
        while sum(rt.metrics.completions.values()) < a["n"]:  # committed completions
            await asyncio.sleep(0.002)
        elapsed = time.monotonic() - t0
        if profiler is not None:
            profiler.stop()
            text = profiler.output_text(unicode=False, color=False, show_all=False)
            await asyncio.to_thread(Path(a["profile"]).write_text, text)
        await rt.stop()
        result({"elapsed": elapsed, "completions": dict(rt.metrics.completions)})
        return

    if role in ("idle", "lat-worker", "recovery-worker"):
        rt.worker(["bench"])
        await rt.start()
        print("READY", flush=True)
        await _until_term()
        await rt.stop(grace=1)
        return

    if role == "enqueue-victim":
        prod = Runtime(url, settings=Settings.load())
        await prod.start(run_loops=False)
        await prod.enqueue("victim", {}, queue="bench", max_attempts=3)
        await prod.stop()
        result({"ok": True})
        return

    if role == "lat-in":
        rt.worker(["bench"], concurrency=10)
        out = []
        async with rt:
            await asyncio.sleep(1.0)
            for _ in range(a["samples"]):
                t0 = time.monotonic()
                await rt.enqueue("ping", {}, queue="bench")
                out.append(await asyncio.wait_for(started.get(), 30) - t0)
                await asyncio.sleep(random.uniform(0.05, 0.15))
        result({"latencies": out})
        return

    if role == "lat-cross":
        prod = Runtime(url, settings=Settings.load())
        await prod.start(run_loops=False)
        out = await _cross_latency(a, lambda t: prod.enqueue("ping", {"t": t}, queue="bench"))
        await prod.stop()
        result({"latencies": out})
        return
    raise SystemExit(f"unknown role {role}")


async def _until_term() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()


async def _cross_latency(a: dict[str, Any], enqueue: Any) -> list[float]:
    """Start a `lat-worker` child, enqueue single jobs here, read its STARTED lines."""
    worker = await asyncio.create_subprocess_exec(
        *child_cmd({**a, "role": "lat-worker"}),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    assert worker.stdout is not None
    out: list[float] = []
    try:
        while True:
            line = (await asyncio.wait_for(worker.stdout.readline(), 60)).decode()
            if not line or line.startswith("READY"):
                break
        await asyncio.sleep(1.0)
        for _ in range(a["samples"]):
            await enqueue(time.monotonic())
            while True:
                line = (await asyncio.wait_for(worker.stdout.readline(), 30)).decode()
                if line.startswith("STARTED "):
                    out.append(float(line.split()[1]))
                    break
                if not line:
                    raise RuntimeError("latency worker exited")
            await asyncio.sleep(random.uniform(0.05, 0.15))
    finally:
        if worker.returncode is None:
            worker.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(worker.wait(), 15)
            except TimeoutError:
                worker.kill()
                await worker.wait()
    return out


# ---- Procrastinate ---------------------------------------------------------------------------


async def procrastinate_child(a: dict[str, Any]) -> None:
    import procrastinate

    role = a["role"]
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=a["url"]))
    started: asyncio.Queue[float] = asyncio.Queue()
    count = 0
    done = asyncio.Event()
    work = a.get("work_ms", 0) / 1000

    @app.task(name="noop", queue="bench")
    async def noop() -> None:
        nonlocal count
        if work:
            await asyncio.sleep(work)
        count += 1
        if count >= a.get("n", 1 << 60):
            done.set()

    @app.task(name="ping", queue="bench")
    async def ping(t: float = 0.0) -> None:
        now = time.monotonic()
        if role == "lat-worker":
            print(f"STARTED {now - t:.9f}", flush=True)
        else:
            started.put_nowait(now)

    @app.task(name="victim", queue="bench", pass_context=True)
    async def victim(context: Any) -> None:
        print(f"STARTED {time.monotonic():.6f} {os.getpid()} {context.job.attempts}", flush=True)
        if a.get("sleep_victim"):
            await asyncio.sleep(600)

    rs = RECOVERY["procrastinate"]
    if role == "recovery-worker":
        # The documented recipe (howto/production/retry_stalled_jobs), every 2 s, not 10 min.
        @app.periodic(cron=str(RECOVERY["procrastinate_cron"]))
        @app.task(queue="bench", queueing_lock="retry_stalled_jobs", pass_context=True)
        async def retry_stalled_jobs(context: Any, timestamp: int) -> None:
            stalled = await app.job_manager.get_stalled_jobs(
                seconds_since_heartbeat=rs["seconds_since_heartbeat"]  # type: ignore[index]
            )
            for job in stalled:
                await app.job_manager.retry_job(job)

    async with app.open_async():
        if role == "fill":
            await app.schema_manager.apply_schema_async()
            n = a["n"]
            for start in range(0, n, 5000):
                await noop.batch_defer_async(*([{}] * min(5000, n - start)))
            result({"ok": True})
            return
        if role == "drain":
            conc = a["concurrency"]
            t0 = time.monotonic()
            task = asyncio.create_task(
                app.run_worker_async(
                    queues=["bench"], concurrency=conc, install_signal_handlers=False
                )
            )
            await _wait_done(done, task)
            await _poll_pg_done(
                a["url"], "SELECT count(*) FROM procrastinate_jobs WHERE status <> 'succeeded'"
            )
            elapsed = time.monotonic() - t0
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            result({"elapsed": elapsed})
            return
        if role in ("idle", "lat-worker", "recovery-worker"):
            kwargs: dict[str, Any] = {"queues": ["bench"], "install_signal_handlers": False}
            if role == "recovery-worker":
                kwargs["update_heartbeat_interval"] = rs["update_heartbeat_interval"]  # type: ignore[index]
            if role == "lat-worker":
                kwargs["concurrency"] = 10
            task = asyncio.create_task(app.run_worker_async(**kwargs))
            await asyncio.sleep(0.5)
            print("READY", flush=True)
            await _until_term()
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            return
        if role == "enqueue-victim":
            await victim.defer_async()
            result({"ok": True})
            return
        if role == "lat-in":
            task = asyncio.create_task(
                app.run_worker_async(
                    queues=["bench"], concurrency=10, install_signal_handlers=False
                )
            )
            await asyncio.sleep(1.0)
            out = []
            for _ in range(a["samples"]):
                t0 = time.monotonic()
                await ping.defer_async(t=0.0)
                out.append(await asyncio.wait_for(started.get(), 30) - t0)
                await asyncio.sleep(random.uniform(0.05, 0.15))
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            result({"latencies": out})
            return
        if role == "lat-cross":
            out = await _cross_latency(a, lambda t: ping.defer_async(t=t))
            result({"latencies": out})
            return
    raise SystemExit(f"unknown role {role}")


async def _wait_done(done: asyncio.Event, task: asyncio.Task[Any]) -> None:
    """Wait for the n-th handler, failing at once if the worker task died."""
    waiter = asyncio.create_task(done.wait())
    await asyncio.wait({waiter, task}, timeout=900, return_when=asyncio.FIRST_COMPLETED)
    if not done.is_set():
        waiter.cancel()
        if task.done() and task.exception() is not None:
            raise RuntimeError(f"worker died: {task.exception()!r}")
        raise RuntimeError("worker did not finish in time")


async def _poll_pg_done(url: str, remaining_sql: str) -> None:
    """After the last handler returned: wait until the database shows every job finished."""
    import psycopg

    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        for _ in range(100_000):
            row = await (await conn.execute(remaining_sql)).fetchone()  # type: ignore[arg-type]
            if row is not None and row[0] == 0:
                return
            await asyncio.sleep(0.002)
    raise RuntimeError("jobs did not finish")


# ---- PgQueuer --------------------------------------------------------------------------------


async def pgqueuer_child(a: dict[str, Any]) -> None:
    from datetime import timedelta

    import asyncpg
    from pgqueuer import Job, QueueManager
    from pgqueuer.queries import Queries

    role = a["role"]
    conn = await asyncpg.connect(a["url"])
    if role == "fill":
        q = Queries.from_asyncpg_connection(conn)
        await q.install()
        n = a["n"]
        for start in range(0, n, 5000):
            k = min(5000, n - start)
            await q.enqueue(["noop"] * k, [None] * k, [0] * k)
        await conn.close()
        result({"ok": True})
        return

    qm = QueueManager(Queries.from_asyncpg_connection(conn))
    started: asyncio.Queue[float] = asyncio.Queue()
    count = 0
    done = asyncio.Event()
    work = a.get("work_ms", 0) / 1000

    @qm.entrypoint("noop")
    async def noop(job: Job) -> None:
        nonlocal count
        if work:
            await asyncio.sleep(work)
        count += 1
        if count >= a.get("n", 1 << 60):
            done.set()

    @qm.entrypoint("ping")
    async def ping(job: Job) -> None:
        now = time.monotonic()
        if role == "lat-worker":
            print(f"STARTED {now - float((job.payload or b'0').decode()):.9f}", flush=True)
        else:
            started.put_nowait(now)

    @qm.entrypoint("victim")
    async def victim(job: Job) -> None:
        print(f"STARTED {time.monotonic():.6f} {os.getpid()} 0", flush=True)
        if a.get("sleep_victim"):
            await asyncio.sleep(600)

    # "Same concurrency": at most 10 jobs in flight (PgQueuer needs batch <= cap / 2).
    run_kwargs: dict[str, Any] = {"batch_size": 5, "max_concurrent_tasks": 10}
    if a.get("pgq_defaults"):
        run_kwargs = {}
    if role == "recovery-worker":
        run_kwargs["heartbeat_timeout"] = timedelta(
            seconds=RECOVERY["pgqueuer"]["heartbeat_timeout_s"]  # type: ignore[index]
        )
    if role == "drain":
        t0 = time.monotonic()
        task = asyncio.create_task(qm.run(**run_kwargs))
        await _wait_done(done, task)
        await _poll_pg_done(a["url"], "SELECT count(*) FROM pgqueuer")
        elapsed = time.monotonic() - t0
        qm.shutdown.set()
        await asyncio.wait_for(asyncio.gather(task, return_exceptions=True), 60)
        result({"elapsed": elapsed})
        return
    if role in ("idle", "lat-worker", "recovery-worker"):
        if role == "idle":
            run_kwargs = {}  # PgQueuer's defaults
        task = asyncio.create_task(qm.run(**run_kwargs))
        await asyncio.sleep(0.5)
        print("READY", flush=True)
        await _until_term()
        qm.shutdown.set()
        await asyncio.wait_for(asyncio.gather(task, return_exceptions=True), 30)
        return
    prod_conn = await asyncpg.connect(a["url"])
    prod = Queries.from_asyncpg_connection(prod_conn)
    if role == "enqueue-victim":
        await prod.enqueue("victim", None)
        result({"ok": True})
        return
    if role == "lat-in":
        task = asyncio.create_task(qm.run(**run_kwargs))
        await asyncio.sleep(1.0)
        out = []
        for _ in range(a["samples"]):
            t0 = time.monotonic()
            await prod.enqueue("ping", None)
            out.append(await asyncio.wait_for(started.get(), 30) - t0)
            await asyncio.sleep(random.uniform(0.05, 0.15))
        qm.shutdown.set()
        await asyncio.wait_for(asyncio.gather(task, return_exceptions=True), 30)
        result({"latencies": out})
        return
    if role == "lat-cross":
        out = await _cross_latency(a, lambda t: prod.enqueue("ping", repr(t).encode()))
        result({"latencies": out})
        return
    raise SystemExit(f"unknown role {role}")


# ---- huey (SQLite storage, thread workers) ---------------------------------------------------


def huey_child(a: dict[str, Any]) -> None:
    import queue as queue_mod

    from huey import SqliteHuey

    role = a["role"]
    huey = SqliteHuey("bench", filename=a["url"])
    started: queue_mod.Queue[float] = queue_mod.Queue()
    lock = threading.Lock()
    count = [0]
    done = threading.Event()
    work = a.get("work_ms", 0) / 1000

    @huey.task(name="noop")
    def noop() -> None:
        if work:
            time.sleep(work)  # huey runs sync tasks on threads: sleeping is its natural wait
        with lock:
            count[0] += 1
            if count[0] >= a.get("n", 1 << 60):
                done.set()

    @huey.task(name="ping")
    def ping(t: float = 0.0) -> None:
        now = time.monotonic()
        if role == "lat-worker":
            print(f"STARTED {now - t:.9f}", flush=True)
        else:
            started.put(now)

    @huey.task(name="victim")
    def victim() -> None:
        print(f"STARTED {time.monotonic():.6f} {os.getpid()} 0", flush=True)
        if a.get("sleep_victim"):
            time.sleep(600)

    if role == "fill":
        # huey has no bulk enqueue: serialise the messages with huey, insert them in one
        # transaction through its own storage connection.
        n = a["n"]
        rows = [(huey.storage.name, huey.serialize_task(noop.s()), 0) for _ in range(n)]
        with huey.storage.db(commit=True) as curs:
            curs.executemany("insert into task (queue, data, priority) values (?, ?, ?)", rows)
        assert huey.pending_count() == n, huey.pending_count()
        result({"ok": True})
        return
    conc = a.get("concurrency", 10)
    if role == "drain":
        consumer = huey.create_consumer(workers=conc, worker_type="thread")
        t0 = time.monotonic()
        consumer.start()
        if not done.wait(900):
            raise RuntimeError("huey did not drain")
        elapsed = time.monotonic() - t0  # huey deletes a task row when it dequeues it
        consumer.stop(graceful=True)
        result({"elapsed": elapsed, "pending": huey.pending_count()})
        return
    if role in ("idle", "lat-worker", "recovery-worker"):
        consumer = huey.create_consumer(workers=10, worker_type="thread")
        consumer.start()  # installs SIGTERM/SIGINT handlers that set the stop flag
        print("READY", flush=True)
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        while not stop.wait(0.2):
            pass
        consumer.stop(graceful=False)
        os._exit(0)
    if role == "enqueue-victim":
        victim()
        result({"ok": True})
        return
    if role == "lat-in":
        consumer = huey.create_consumer(workers=10, worker_type="thread")
        consumer.start()
        time.sleep(1.0)
        out = []
        for _ in range(a["samples"]):
            t0 = time.monotonic()
            ping(t=0.0)
            out.append(started.get(timeout=30) - t0)
            time.sleep(random.uniform(0.05, 0.15))
        consumer.stop(graceful=False)
        result({"latencies": out})
        os._exit(0)
    if role == "lat-cross":

        async def enqueue(t: float) -> None:
            ping(t=t)

        out = asyncio.run(_cross_latency(a, enqueue))
        result({"latencies": out})
        return
    raise SystemExit(f"unknown role {role}")


def child_main(a: dict[str, Any]) -> None:
    sys.path.insert(0, str(ROOT / "src"))
    if a["role"] == "idle" and a["system"] in SQLITE_SYSTEMS:
        install_sqlite_trace()
        threading.Thread(target=_trace_dumper, args=(a["trace_file"],), daemon=True).start()
    system = a["system"]
    if system.startswith("deckyard"):
        from deckyard.eventloop import run

        run(deckyard_child(a))  # on the loop `event_loop` chooses, as `deckyard serve` runs
    elif system == "procrastinate":
        asyncio.run(procrastinate_child(a))
    elif system == "pgqueuer":
        asyncio.run(pgqueuer_child(a))
    elif system == "huey":
        huey_child(a)
    else:
        raise SystemExit(f"unknown system {system}")


def _trace_dumper(path: str) -> None:
    """Write the statement counters to a file every 0.5 s (a file, not the database)."""
    while True:
        with _TRACE_LOCK:
            data = dict(TRACE)
        tmp = path + ".tmp"
        Path(tmp).write_text(json.dumps(data))
        os.replace(tmp, path)
        time.sleep(0.5)


# --------------------------------------------------------------------------------------------
# Orchestration (harness process)
# --------------------------------------------------------------------------------------------


def throughput(system: str, n: int, concurrency: int, work_ms: float, **extra: Any) -> float:
    """Jobs/s: `n` jobs enqueued in bulk (not timed), then drained by one worker process."""
    t = create_target(system)
    try:
        base = {**t.spec(), "n": n, **extra}
        run_child({**base, "role": "fill"})
        r = run_child({**base, "role": "drain", "concurrency": concurrency, "work_ms": work_ms})
        _check_drained(t, n)
        return n / float(r["elapsed"])
    finally:
        drop_target(t)


def _check_drained(t: Target, n: int) -> None:
    """Outside the timing: the database agrees that every job finished."""
    if t.system == "huey":
        with sqlite3.connect(t.url) as c:
            left = c.execute("select count(*) from task").fetchone()[0]
        assert left == 0, f"huey: {left} tasks left"
        return
    if t.system == "deckyard-sqlite":
        with sqlite3.connect(t.url) as c:
            ok = c.execute("select count(*) from jobs where status = 'succeeded'").fetchone()[0]
        assert ok == n, f"deckyard-sqlite: {ok}/{n} succeeded"
        return
    import psycopg

    sql = {
        "deckyard-pg": "select count(*) from jobs where status = 'succeeded'",
        "procrastinate": "select count(*) from procrastinate_jobs where status = 'succeeded'",
        "pgqueuer": "select count(*) from pgqueuer_log where status = 'successful'",
    }[t.system]
    with psycopg.connect(t.url, autocommit=True) as c:
        row = c.execute(sql).fetchone()  # type: ignore[arg-type]
    ok = row[0] if row else 0
    assert ok == n, f"{t.system}: {ok}/{n} finished"


def latency(system: str, mode: str, samples: int) -> list[float]:
    """Seconds from enqueue to handler start for single jobs on an idle system."""
    t = create_target(system)
    try:
        run_child({**t.spec(), "role": "fill", "n": 0})
        r = run_child({**t.spec(), "role": f"lat-{mode}", "samples": samples}, timeout=300)
        return [float(x) for x in r["latencies"]]
    finally:
        drop_target(t)


# ---- idle load -------------------------------------------------------------------------------

PREFIX_RE = re.compile(
    r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d[.\d]* \S+ \[\d+\] (\S*)@(\S*) (\w+):  (.*)$"
)


def pg_log_path() -> Path | None:
    for p in PG_LOG_CANDIDATES:
        if p and Path(p).is_file() and os.access(p, os.R_OK):
            return Path(p)
    return None


def count_pg_log(text: str, dbnames: set[str]) -> dict[str, Counter[str]]:
    """Statements per database from `log_statement = 'all'` lines, classified."""
    out: dict[str, Counter[str]] = {d: Counter() for d in dbnames}
    current: tuple[str, list[str]] | None = None

    def flush() -> None:
        if current is not None:
            out[current[0]][classify("\n".join(current[1]))] += 1

    for line in text.splitlines():
        m = PREFIX_RE.match(line)
        if m is None:
            if current is not None:
                current[1].append(line)
            continue
        flush()
        current = None
        db, level, msg = m.group(2), m.group(3), m.group(4)
        if db not in dbnames or level != "LOG":
            continue
        sm = re.match(r"(?:statement|execute [^:]*): (.*)$", msg)
        if sm:
            current = (db, [sm.group(1)])
    flush()
    return out


def pg_rows_written(t: Target) -> int:
    import psycopg

    with psycopg.connect(t.url, autocommit=True) as c:
        row = c.execute(
            "select coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0) from pg_stat_user_tables"
        ).fetchone()
    return int(row[0]) if row else 0


class SqliteWriteProbe:
    """Counts commits by other connections: `PRAGMA data_version` changes, polled every 50 ms."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.changes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        conn = None
        last = None
        while not self._stop.wait(0.05):
            try:
                if conn is None:
                    if not Path(self.path).exists():
                        continue
                    conn = sqlite3.connect(self.path, timeout=0.05)
                v = conn.execute("pragma data_version").fetchone()[0]
            except sqlite3.Error:
                continue
            if last is not None and v != last:
                self.changes += 1
            last = v
        if conn is not None:
            conn.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


@dataclass
class IdleRun:
    system: str
    target: Target
    child: Child
    trace_file: str = ""
    probe: SqliteWriteProbe | None = None
    windows: list[dict[str, float]] = field(default_factory=list)


def idle_load(warmup: float, window: float, reps: int) -> dict[str, Any]:
    """Every system idles with one worker and default settings, all at once (separate databases
    and files; they are idle, so they do not compete); `reps` windows of `window` seconds."""
    log = pg_log_path()
    runs: list[IdleRun] = []
    try:
        for system in SYSTEMS:
            t = create_target(system, log_statements=True)
            trace_file = str(Path(t.tmp) / "trace.json")
            run_child({**t.spec(), "role": "fill", "n": 0})
            child = Child({**t.spec(), "role": "idle", "trace_file": trace_file})
            runs.append(IdleRun(system, t, child, trace_file))
        for r in runs:
            if r.child.wait_line("READY", 60) is None:
                raise RuntimeError(f"{r.system} idle worker did not start")
            if not r.target.is_pg:
                r.probe = SqliteWriteProbe(r.target.url)
        time.sleep(warmup)
        pg_dbs = {r.target.dbname: r for r in runs if r.target.is_pg}
        for _ in range(reps):
            offset = log.stat().st_size if log else 0
            before: dict[str, Any] = {}
            for r in runs:
                if r.target.is_pg:
                    before[r.system] = pg_rows_written(r.target)
                else:
                    before[r.system] = (
                        _read_trace(r.trace_file),
                        r.probe.changes if r.probe else 0,
                    )
            time.sleep(window)
            if log:
                with log.open("rb") as fh:
                    fh.seek(offset)
                    text = fh.read().decode("utf-8", "replace")
                counts = count_pg_log(text, set(pg_dbs))
            scale = 60.0 / window
            for r in runs:
                if r.target.is_pg:
                    c = counts[r.target.dbname] if log else Counter()
                    rows = pg_rows_written(r.target) - before[r.system]
                    r.windows.append(
                        {
                            "reads": c["read"] * scale,
                            "writes": c["write"] * scale,
                            "tx": c["tx"] * scale,
                            "total": sum(c.values()) * scale,
                            "rows_written": rows * scale,
                            "measured": 1.0 if log else 0.0,
                        }
                    )
                else:
                    old, old_changes = before[r.system]
                    new = _read_trace(r.trace_file)
                    d = {k: new.get(k, 0) - old.get(k, 0) for k in ("read", "write", "tx")}
                    changes = (r.probe.changes if r.probe else 0) - old_changes
                    r.windows.append(
                        {
                            "reads": d["read"] * scale,
                            "writes": d["write"] * scale,
                            "tx": d["tx"] * scale,
                            "total": sum(d.values()) * scale,
                            "rows_written": changes * scale,
                            "measured": 1.0,
                        }
                    )
    finally:
        for r in runs:
            r.child.stop()
            if r.probe:
                r.probe.stop()
            drop_target(r.target)
    return {r.system: r.windows for r in runs} | {"pg_log": str(log) if log else None}


def _read_trace(path: str) -> dict[str, int]:
    time.sleep(0.6)  # the child rewrites it every 0.5 s
    try:
        return {k: int(v) for k, v in json.loads(Path(path).read_text()).items()}
    except (OSError, ValueError):
        return {}


# ---- recovery --------------------------------------------------------------------------------


def recovery_once(system: str, bound: float) -> dict[str, Any]:
    """SIGKILL a worker that runs a job; seconds until the job starts again elsewhere.

    PostgreSQL systems and huey: a second worker process is already running on the same
    database or file. Deckyard on SQLite (one process per file in Lite): the worker is restarted
    right after the kill, as a supervisor would.
    """
    t = create_target(system)
    a_child: Child | None = None
    b_child: Child | None = None
    try:
        run_child({**t.spec(), "role": "fill", "n": 0})
        a_child = Child({**t.spec(), "role": "recovery-worker", "sleep_victim": True})
        if a_child.wait_line("READY", 60) is None:
            raise RuntimeError(f"{system}: worker A did not start")
        run_child({**t.spec(), "role": "enqueue-victim"})
        if a_child.wait_line("STARTED", 30) is None:
            raise RuntimeError(f"{system}: worker A did not start the job")
        restart = system == "deckyard-sqlite"
        if not restart:
            b_child = Child({**t.spec(), "role": "recovery-worker"})
            if b_child.wait_line("READY", 60) is None:
                raise RuntimeError(f"{system}: worker B did not start")
        time.sleep(random.uniform(0.5, 2.5))  # a random point in the heartbeat cycle
        killed = time.monotonic()
        a_child.kill()
        if restart:
            b_child = Child({**t.spec(), "role": "recovery-worker"})
        wait = min(bound, 15.0) if system == "huey" else bound
        line = b_child.wait_line("STARTED", wait) if b_child else None
        if line is None and system == "huey":
            with sqlite3.connect(t.url) as c:
                left = c.execute("select count(*) from task").fetchone()[0]
            return {"seconds": None, "bound": wait, "note": f"{left} task rows left"}
        if line is None:
            return {"seconds": None, "bound": wait}
        return {"seconds": float(line[1].split()[1]) - killed, "bound": bound}
    finally:
        for c in (a_child, b_child):
            if c is not None:
                c.stop()
        drop_target(t)


def recovery_round(bound: float) -> dict[str, dict[str, Any]]:
    """One recovery measurement per system, all at once (each waits on its own timers)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(len(SYSTEMS)) as pool:
        futures = {s: pool.submit(recovery_once, s, bound) for s in SYSTEMS}
        out: dict[str, dict[str, Any]] = {}
        for s, f in futures.items():
            try:
                out[s] = f.result()
            except Exception as exc:
                out[s] = {"seconds": None, "bound": bound, "error": repr(exc)[:300]}
    return out


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "child":
        child_main(json.loads(sys.argv[2]))
    else:
        raise SystemExit("usage: compare_queues.py child JSON (run bench/run_all instead)")
