"""Enqueue -> start on PostgreSQL: Deckyard beside the floor of any queue on this machine.

Issue 15 asks for p50 <= 2 ms in process and <= 3 ms across processes. This puts Deckyard's
figures (measured exactly as `bench/run_all --only latency` does) beside plain psycopg doing
the least a durable queue must do, in the same run, on the same server, with the same 50-150 ms
pause before every sample:

- `floor in process`: one INSERT of a claimed row, committed (the least an in-process hand-off
  writes: the job must be durable before it runs). Measured from before the INSERT to its
  commit returning; no handler, no event row, no NOTIFY.
- `floor across`: one process INSERTs a pending row and NOTIFYs in one committed statement;
  another, LISTENing, claims it with a one-row `FOR UPDATE SKIP LOCKED` UPDATE, committed, and
  stamps the start. Two durable commits, the least a design that commits the enqueue and then
  the claim can do.
- `floor across, claim not flushed`: the same with the claim committed under
  `synchronous_commit = off` (set for that statement only): what skipping the claim's WAL flush
  could win at best. A PostgreSQL crash can then lose a claim whose job has already started.
- `floor across, claimed by the enqueuer`: one commit only. The enqueuing statement finds an
  idle worker of another process (its LISTEN session's `application_name` in
  `pg_stat_activity`), inserts the row already claimed for it and NOTIFYs the row; that worker
  starts on the notification, with no statement of its own. The best a cross-process hand-off
  could do.

Every PostgreSQL measurement gets a fresh database. Timestamps that cross processes use
CLOCK_MONOTONIC, which Linux shares between processes.

Run: .venv/bin/python bench/latency_floor.py [--samples 40] [--reps 3]
"""

from __future__ import annotations

import argparse
import json
import random
import select
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))

import compare_queues as cq
from job_queue import pct

TABLE = """
CREATE TABLE q (
    id bigserial PRIMARY KEY,
    status text NOT NULL,
    owner text,
    payload jsonb NOT NULL
);
CREATE INDEX q_pending ON q (id) WHERE status = 'pending';
"""
ENQUEUE = "WITH i AS (INSERT INTO q (status, payload) VALUES ('pending', %s) RETURNING id) "
ENQUEUE += "SELECT pg_notify('q', i.id::text) FROM i"
CLAIM = """
UPDATE q SET status = 'running', owner = %(owner)s
WHERE id = (SELECT id FROM q WHERE status = 'pending' ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED)
RETURNING payload, set_config('synchronous_commit', %(commit)s, true)
"""
ENQUEUE_CLAIMED = """
WITH w AS (
    SELECT substr(application_name, 8) AS owner FROM pg_stat_activity
    WHERE datname = current_database() AND application_name LIKE 'q-idle:%%' LIMIT 1
),
i AS (
    INSERT INTO q (status, owner, payload)
    SELECT CASE WHEN w.owner IS NULL THEN 'pending' ELSE 'running' END, w.owner, %s
    FROM (SELECT 1) AS one LEFT JOIN w ON true
    RETURNING id, owner, payload
)
SELECT pg_notify('q', json_build_object('owner', i.owner, 'payload', i.payload)::text) FROM i
"""
HAND_OFF = "INSERT INTO q (status, owner, payload) VALUES ('running', 'me', %s) RETURNING id"


def pause() -> None:
    time.sleep(random.uniform(0.05, 0.15))


def floor_in_process(url: str, samples: int) -> list[float]:
    out = []
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(TABLE)
        time.sleep(1.0)
        for _ in range(samples):
            pause()
            t0 = time.monotonic()
            conn.execute(HAND_OFF, ('{"t": 0}',)).fetchone()
            out.append(time.monotonic() - t0)
    return out


def claimer(url: str, mode: str) -> None:
    """The other process of `floor across`: LISTEN, claim on each notification, print the delay.

    `mode` "on" or "off" is the claim's `synchronous_commit`. With "pushed" it claims nothing:
    its LISTEN session's `application_name` advertises it as idle, and it starts the job the
    notification carries, already claimed for it.
    """
    with (
        psycopg.connect(url, autocommit=True, application_name="q-idle:them") as listen,
        psycopg.connect(url, autocommit=True) as conn,
    ):
        listen.execute("LISTEN q")
        print("READY", flush=True)
        while True:
            # a notification with no statement running arrives as bytes on the socket
            select.select([listen.fileno()], [], [])
            notes = list(listen.notifies(timeout=0))
            if not notes:
                continue
            if mode == "pushed":
                pushed = json.loads(notes[-1].payload)
                if pushed["owner"] != "them":
                    print("NOT HANDED OVER", flush=True)  # the enqueuer saw no idle worker
                    continue
                now = time.monotonic()
                print(f"STARTED {now - pushed['payload']['t']:.9f}", flush=True)
                continue
            row = conn.execute(CLAIM, {"owner": "them", "commit": mode}).fetchone()
            if row is not None:
                now = time.monotonic()
                print(f"STARTED {now - row[0]['t']:.9f}", flush=True)


def floor_across(url: str, samples: int, mode: str) -> list[float]:
    """Enqueue here, start in a `claimer` child; `mode` as `claimer` takes it."""
    out = []
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(TABLE)
        proc = subprocess.Popen(
            [sys.executable, __file__, "claimer", url, mode],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        enqueue = ENQUEUE_CLAIMED if mode == "pushed" else ENQUEUE
        try:
            if proc.stdout.readline().strip() != "READY":
                raise RuntimeError("claimer did not start")
            time.sleep(1.0)
            for _ in range(samples):
                pause()
                conn.execute(enqueue, (json.dumps({"t": time.monotonic()}),))
                line = proc.stdout.readline()
                if not line.startswith("STARTED "):
                    raise RuntimeError(f"claimer said {line!r}")
                out.append(float(line.split()[1]))
        finally:
            proc.terminate()
            proc.wait(10)
    return out


def fresh(measure: Callable[..., list[float]], *args: object) -> list[float]:
    """`measure(url, *args)` on a database of its own, dropped afterwards."""
    t = cq.create_target("deckyard-pg")
    try:
        return measure(t.url, *args)
    finally:
        cq.drop_target(t)


MEASURES: dict[str, Callable[[int], list[float]]] = {
    "Deckyard, in process": lambda n: cq.latency("deckyard-pg", "in", n),
    "floor in process (one committed INSERT)": lambda n: fresh(floor_in_process, n),
    "Deckyard, across processes": lambda n: cq.latency("deckyard-pg", "cross", n),
    "floor across (committed enqueue, committed claim)": lambda n: fresh(floor_across, n, "on"),
    "floor across, claim not flushed (synchronous_commit off)": (
        lambda n: fresh(floor_across, n, "off")
    ),
    "floor across, claimed by the enqueuer (one commit)": (
        lambda n: fresh(floor_across, n, "pushed")
    ),
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=40)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    pooled: dict[str, list[float]] = {k: [] for k in MEASURES}
    per_rep: dict[str, list[float]] = {k: [] for k in MEASURES}
    names = list(MEASURES)
    for rep in range(args.reps):
        for name in names[rep % len(names) :] + names[: rep % len(names)]:
            lat = MEASURES[name](args.samples)
            pooled[name] += lat
            per_rep[name].append(statistics.median(lat))
            print(f"# rep {rep + 1} {name}: p50 {statistics.median(lat) * 1000:.2f} ms", flush=True)
    print(f"\n{args.reps} repetitions x {args.samples} samples, pooled; ms\n")
    print("| path | p50 | p95 | p99 | p50 per repetition |")
    print("|---|---|---|---|---|")
    for name, lat in pooled.items():
        reps = ", ".join(f"{v * 1000:.2f}" for v in per_rep[name])
        print(
            f"| {name} | {pct(lat, 50) * 1000:.2f} | {pct(lat, 95) * 1000:.2f} | "
            f"{pct(lat, 99) * 1000:.2f} | {reps} |"
        )


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "claimer":
        claimer(sys.argv[2], sys.argv[3])
    else:
        main()
