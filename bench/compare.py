"""Deckyard side by side with the systems users would pick instead (issue 8).

Run through `bench/run_all`, which installs the compared systems first. Every figure is measured
in this run on this machine; a comparison that cannot run says "not measured: <reason>".

Usage: bench/.venv/bin/python bench/compare.py [--quick] [--write-docs] [--only SECTION,...]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "src"))

import compare_queues as cq  # noqa: E402
import compare_render as cr  # noqa: E402

START, END = "<!-- compare:start -->", "<!-- compare:end -->"
NAMES = {
    "deckyard-pg": "Deckyard (PostgreSQL)",
    "procrastinate": "Procrastinate",
    "pgqueuer": "PgQueuer",
    "deckyard-sqlite": "Deckyard (SQLite)",
    "huey": "huey (SqliteHuey)",
}
# (label, system, extra child args)
THROUGHPUT_NOOP = [
    ("Deckyard (PostgreSQL)", "deckyard-pg", {}),
    ("Procrastinate", "procrastinate", {}),
    ("PgQueuer, defaults (batch 10, no in-flight cap)", "pgqueuer", {"pgq_defaults": True}),
    ("PgQueuer, <= 10 in flight (batch 5)", "pgqueuer", {}),
    ("Deckyard (SQLite)", "deckyard-sqlite", {}),
    ("huey (SqliteHuey, 10 threads)", "huey", {}),
]
THROUGHPUT_WORK = [row for row in THROUGHPUT_NOOP if not row[2].get("pgq_defaults")]


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def med(values: list[float]) -> float:
    return float(statistics.median(values))


def spread(values: list[float], fmt: str = "{:,.0f}") -> str:
    if not values:
        return "-"
    if len(values) == 1:
        return fmt.format(values[0])
    return f"{fmt.format(med(values))} ({fmt.format(min(values))}-{fmt.format(max(values))})"


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def rotated(items: list[Any], rep: int) -> list[Any]:
    """Alternate the order of the systems between repetitions."""
    k = rep % len(items)
    return items[k:] + items[:k]


def guarded(results: dict[str, Any], key: str, fn: Callable[[], Any]) -> None:
    try:
        results[key] = fn()
    except Exception as exc:
        traceback.print_exc()
        results[key] = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}


# --------------------------------------------------------------------------------------------


SLOW_SYSTEMS = {"procrastinate"}
"""Systems that drain ~200 jobs/s here: 20 000 jobs each would take most of the time budget."""


def run_throughput(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for work, rows in ((0.0, THROUGHPUT_NOOP), (5.0, THROUGHPUT_WORK)):
        for rep in range(args.reps):
            for label, system, extra in rotated(rows, rep):
                key = f"{work:g}|{label}"
                try:
                    n = args.slow_jobs if system in SLOW_SYSTEMS else args.jobs
                    rate = cq.throughput(system, n, 10, work, **extra)
                    out.setdefault(key, []).append(rate)
                    log(f"throughput {work:g} ms {label}: {rate:,.0f} jobs/s")
                except Exception as exc:
                    out[key + "|error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
                    log(f"throughput {work:g} ms {label}: ERROR {exc}")
    return out


def run_latency(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    combos = [
        (s, m)
        for s in cq.SYSTEMS
        for m in ("in", "cross")
        if (s, m) != ("deckyard-sqlite", "cross")
    ]
    for rep in range(args.reps):
        for system, mode in rotated(combos, rep):
            key = f"{system}|{mode}"
            try:
                lat = cq.latency(system, mode, args.samples)
                out.setdefault(key, []).append(lat)
                log(f"latency {key}: p50 {med(lat) * 1000:.2f} ms")
            except Exception as exc:
                out[key + "|error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
                log(f"latency {key}: ERROR {exc}")
    return out


def run_idle(args: argparse.Namespace) -> dict[str, Any]:
    return cq.idle_load(args.idle_warmup, args.idle_window, args.reps)


def run_recovery(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, list[dict[str, Any]]] = {}
    for rep in range(args.reps):
        for system, r in cq.recovery_round(args.recovery_bound).items():
            out.setdefault(system, []).append(r)
            log(f"recovery {system} (round {rep + 1}): {r}")
    return out


def run_render(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"plain": [], "pipeline": [], "shot_cold": [], "shot_warm": []}
    pages, why = cr.deck_pages()
    if not pages:
        out["pages_error"] = why
        log(f"render: no deck pages ({why}); interim renderer figure from bench/render.py")
        guarded(out, "interim", lambda: [cr.interim_renderer(args.shots) for _ in range(args.reps)])
        return out
    out["pages"] = [p.name for p in pages]
    serve: cr.Serve | None = None
    try:
        serve = cr.Serve(1)
        serve.wait_healthy()
        serve.wait_renderer()
    except Exception as exc:
        out["pipeline_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
        if serve is not None:
            serve.stop()
        serve = None
    try:
        with tempfile.TemporaryDirectory(prefix="dycmp-shots-") as tmp:
            for rep in range(args.reps):
                for name in rotated(["plain", "pipeline", "shot"], rep):
                    try:
                        if name == "plain":
                            out["plain"].append(asyncio.run(cr.plain_loop(pages, args.shots, 2)))
                        elif name == "pipeline" and serve is not None:
                            out["pipeline"].append(
                                asyncio.run(cr.pipeline(serve, pages, args.shots))
                            )
                        elif name == "shot" and "shot_error" not in out:
                            r = cr.shot_scraper_multi(pages, args.shots, tmp)
                            if "error" in r:
                                out["shot_error"] = r["error"]
                            else:
                                out["shot_cold"].append(r["rate_cold"])
                                out["shot_warm"].append(r["rate_warm"])
                    except Exception as exc:
                        out[f"{name}_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
                log(
                    f"render round {rep + 1}: "
                    + json.dumps({k: v for k, v in out.items() if isinstance(v, list)})
                )
    finally:
        if serve is not None:
            serve.stop()
    return out


def run_memory(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for rep in range(args.reps):
        for renderers in rotated([0, 1], rep):
            key = f"renderers={renderers}"
            try:
                out.setdefault(key, []).append(cr.memory_idle(renderers, args.memory_settle))
                log(f"memory {key}: {out[key][-1]}")
            except Exception as exc:
                out[key + "|error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    return out


def run_profile(args: argparse.Namespace) -> dict[str, Any]:
    """pyinstrument over one Deckyard drain per database (where does the time go)."""
    out: dict[str, Any] = {}
    outdir = HERE / "out"
    outdir.mkdir(exist_ok=True)
    n = min(args.jobs, 5000)
    for system in ("deckyard-pg", "deckyard-sqlite"):
        path = outdir / f"profile-{system}.txt"
        t = cq.create_target(system)
        try:
            base = {**t.spec(), "n": n}
            cq.run_child({**base, "role": "fill"})
            cq.run_child(
                {**base, "role": "drain", "concurrency": 10, "work_ms": 0, "profile": str(path)}
            )
            out[system] = str(path.relative_to(ROOT))
        except Exception as exc:
            out[system + "|error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
        finally:
            cq.drop_target(t)
    return out


# --------------------------------------------------------------------------------------------


def machine() -> dict[str, str]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    ram = "unknown"
    try:
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        ram = f"{kb / 2**20:.1f} GiB"
    except (OSError, ValueError):
        pass
    os_name = platform.platform()
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                os_name = f"{line.split('=', 1)[1].strip(chr(34))}, kernel {platform.release()}"
    except OSError:
        pass
    return {"cores": str(os.cpu_count()), "cpu": cpu, "ram": ram, "os": os_name}


def versions() -> dict[str, str]:
    out: dict[str, str] = {"Python": platform.python_version()}
    for dist in (
        "deckyard",
        "procrastinate",
        "pgqueuer",
        "asyncpg",
        "huey",
        "shot-scraper",
        "playwright",
        "psycopg",
        "SQLAlchemy",
        "aiosqlite",
        "pyinstrument",
    ):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "not installed"
    import sqlite3

    out["SQLite"] = sqlite3.sqlite_version
    try:
        out["PostgreSQL"] = (
            subprocess.run(
                ["psql", cq.PG_URL, "-Atc", "show server_version"],
                capture_output=True,
                text=True,
                timeout=10,
            ).stdout.strip()
            or "unknown"
        )
    except (OSError, subprocess.TimeoutExpired):
        out["PostgreSQL"] = "unknown"
    try:
        out["Chromium"] = (
            subprocess.run([cr.CHROMIUM, "--version"], capture_output=True, text=True, timeout=20)
            .stdout.strip()
            .splitlines()[-1]
        )
    except (OSError, subprocess.TimeoutExpired, IndexError):
        out["Chromium"] = "unknown"
    return out


def goal(ok: bool | None) -> str:
    return "n/a" if ok is None else ("met" if ok else "**missed**")


def render_markdown(r: dict[str, Any], args: argparse.Namespace, cmd: str) -> str:
    m, v = r["machine"], r["versions"]
    L: list[str] = ["## Compared with other systems (`bench/run_all`)", ""]
    L += [
        f"Command: `{cmd}` — {r['date']}, {r['wall_s'] / 60:.1f} minutes, load average "
        f"before/after {r['load_before']} / {r['load_after']}. Machine: {m['cores']} cores, "
        f"{m['cpu']}, {m['ram']} RAM, {m['os']}. Each figure: median (min-max) of {args.reps} "
        "repetitions, systems alternated between repetitions; every PostgreSQL measurement in "
        "its own fresh database, every SQLite one in a fresh file."
        + (
            " **Noisy run:** other work was running on the same cores (load average above); "
            "treat the figures as indicative and repeat on a quiet machine."
            if r.get("noisy")
            else ""
        ),
        "",
        "Versions: " + ", ".join(f"{k} {val}" for k, val in v.items()) + ".",
        "",
    ]
    goals: list[tuple[str, str, str]] = []

    # ---- throughput
    t = r.get("throughput", {})
    L += [
        f"**1. Queue throughput.** {args.jobs:,} jobs ({args.slow_jobs:,} for Procrastinate, "
        "whose rate falls as the backlog grows: the smaller backlog flatters it) enqueued in "
        "bulk, then drained by one worker process with concurrency 10, until the database shows "
        "every job finished. 5 ms work: `asyncio.sleep(0.005)`, on huey's 10 threads "
        "`time.sleep(0.005)`.",
        "",
        "| system | no-op, jobs/s | 5 ms work, jobs/s |",
        "|---|---|---|",
    ]
    for label, _s, _e in THROUGHPUT_NOOP:
        cells = []
        for work in (0.0, 5.0):
            key = f"{work:g}|{label}"
            if key in t:
                cells.append(spread(t[key]))
            elif key + "|error" in t:
                cells.append(f"not measured: {t[key + '|error']}")
            else:
                cells.append("-")
        L.append(f"| {label} | {cells[0]} | {cells[1]} |")
    L.append("")

    def tm(label: str) -> float | None:
        vals = t.get(f"0|{label}")
        return med(vals) if vals else None

    dpg, dsq = tm("Deckyard (PostgreSQL)"), tm("Deckyard (SQLite)")
    pgq, pro = tm(THROUGHPUT_NOOP[2][0]), tm("Procrastinate")
    hue = tm(THROUGHPUT_NOOP[5][0])
    if dpg and pgq:
        goals.append(
            (
                "Throughput PG >= 1.1 x PgQueuer (defaults)",
                f"{dpg / pgq:.2f} x",
                goal(dpg >= 1.1 * pgq),
            )
        )
    if dpg and pro:
        goals.append(
            ("Throughput PG >= 3 x Procrastinate", f"{dpg / pro:.2f} x", goal(dpg >= 3 * pro))
        )
    if dsq and hue:
        goals.append(
            ("Throughput SQLite >= 1.1 x huey", f"{dsq / hue:.2f} x", goal(dsq >= 1.1 * hue))
        )

    # ---- latency
    lat = r.get("latency", {})
    L += [
        f"**2. Enqueue -> start latency.** Single jobs on an idle system ({args.samples} per "
        "repetition, pooled). In process: the worker and the enqueuer share the process; across "
        "processes: the delay measured with the system-wide monotonic clock. ms:",
        "",
        "| system | in process p50 / p95 / p99 | across processes p50 / p95 / p99 | p50 per "
        "repetition, in / across |",
        "|---|---|---|---|",
    ]
    p50s: dict[str, float] = {}
    for system in cq.SYSTEMS:
        cells, per_rep = [], []
        for mode in ("in", "cross"):
            key = f"{system}|{mode}"
            if (system, mode) == ("deckyard-sqlite", "cross"):
                cells.append("n/a: a Lite SQLite file belongs to one process")
            elif key in lat:
                pooled = [x for rep in lat[key] for x in rep]
                p50s[key] = pct(pooled, 50) * 1000
                cells.append(" / ".join(f"{pct(pooled, p) * 1000:.2f}" for p in (50, 95, 99)))
                per_rep.append(spread([med(rep) * 1000 for rep in lat[key]], "{:.2f}"))
            else:
                cells.append(f"not measured: {lat.get(key + '|error', '-')}")
                per_rep.append("-")
        L.append(f"| {NAMES[system]} | {cells[0]} | {cells[1]} | {' / '.join(per_rep)} |")
    L.append("")
    for key, limit, name in (
        ("deckyard-pg|in", 2.0, "Latency p50 in process <= 2 ms (PostgreSQL)"),
        ("deckyard-sqlite|in", 2.0, "Latency p50 in process <= 2 ms (SQLite)"),
        ("deckyard-pg|cross", 3.0, "Latency p50 across processes <= 3 ms (PostgreSQL)"),
    ):
        if key in p50s:
            goals.append((name, f"{p50s[key]:.2f} ms", goal(p50s[key] <= limit)))

    # ---- idle
    idle = r.get("idle", {})
    L += [
        "**3. Idle database load.** One worker per system with its default settings on an "
        f"otherwise idle database, {args.idle_warmup:g} s after start, {args.reps} windows of "
        f"{args.idle_window:g} s scaled to a minute; every statement counted (PostgreSQL: "
        f"`log_statement = 'all'`, `{idle.get('pg_log')}`; SQLite: `set_trace_callback` on "
        "every connection). *write*: a data-modifying statement, whether or not it changed a "
        "row; *tx*: BEGIN/COMMIT/ROLLBACK/SAVEPOINT.",
        "",
        "| system | statements/min | reads | writes | tx control | rows written (PG) / commits "
        "seen (SQLite) per min |",
        "|---|---|---|---|---|---|",
    ]
    for system in cq.SYSTEMS:
        ws = idle.get(system)
        if not isinstance(ws, list) or not ws:
            L.append(f"| {NAMES[system]} | not measured: {idle.get('error', '-')} | | | | |")
            continue
        if not all(w.get("measured") for w in ws):
            L.append(
                f"| {NAMES[system]} | not measured: PostgreSQL server log not readable | | | | "
                f"{spread([w['rows_written'] for w in ws], '{:.1f}')} |"
            )
            continue
        col = {
            k: spread([w[k] for w in ws], "{:.1f}")
            for k in ("total", "reads", "writes", "tx", "rows_written")
        }
        L.append(
            f"| {NAMES[system]} | {col['total']} | {col['reads']} | {col['writes']} | "
            f"{col['tx']} | {col['rows_written']} |"
        )
        if system.startswith("deckyard"):
            tot = med([w["total"] for w in ws])
            wr = max(w["writes"] + w["rows_written"] for w in ws)
            goals.append((f"Idle {NAMES[system]}: 0 writes", f"{wr:.1f}/min", goal(wr == 0)))
            goals.append(
                (f"Idle {NAMES[system]}: <= 10 statements/min", f"{tot:.1f}/min", goal(tot <= 10))
            )
    L.append("")

    # ---- recovery
    rec = r.get("recovery", {})
    L += [
        "**4. Recovery after SIGKILL.** A worker running a long job is SIGKILLed at a random "
        "point of its heartbeat cycle and its job must run again in another, already running "
        "worker (Deckyard on SQLite: the worker restarted at once). Each system declares "
        "a silent worker dead after about 10 s: Deckyard `job_lease_seconds=10` with heartbeats "
        "every 2 s; Procrastinate's `retry_stalled_jobs` every 2 s; PgQueuer "
        "`heartbeat_timeout=10 s`, re-polling after its `dequeue_timeout` (30 s); huey has no "
        "recovery. Seconds from SIGKILL to the job running again:",
    ]
    parts = []
    for system in cq.SYSTEMS:
        rs = rec.get(system) if isinstance(rec, dict) else None
        if not rs:
            parts.append(
                f"{NAMES[system]} not measured: "
                f"{rec.get('error', '-') if isinstance(rec, dict) else '-'}"
            )
            continue
        secs = [x["seconds"] for x in rs if x.get("seconds") is not None]
        misses = [x for x in rs if x.get("seconds") is None]
        cell = spread(secs, "{:.1f}") if secs else ""
        if misses:
            notes = "; ".join(
                sorted({x.get("error") or x.get("note") or "" for x in misses} - {""})
            )
            never = (
                f"never, without manual action (not within {misses[0]['bound']:g} s in "
                f"{len(misses)} of {len(rs)} runs{'; ' + notes if notes else ''})"
            )
            cell = f"{cell}; {never}" if cell else never
        parts.append(f"{NAMES[system]} {cell}")
    L[-1] += " " + ", ".join(parts) + "."
    L.append("")

    # ---- render
    rd = r.get("render", {})
    if rd.get("pages"):
        L += [
            "**5. Rendering.** The example deck (`examples/launch-deck/`, "
            f"{len(rd['pages'])} pages), {args.shots} PNG screenshots per measurement: the "
            "Deckyard pipeline (a Lite `deckyard serve`, one renderer with 2 slots; all submitted "
            "at once with `POST /v1/screenshots?dedupe=false`, each followed through "
            "`GET /v1/renders/{id}/events` and its PNG downloaded) against a plain warm "
            "Playwright loop with 2 tabs and shot-scraper `multi` (one process: *cold* with its "
            "browser start, *warm* = (N - 1) / (t(N) - t(1))).",
            "",
            "| path | screenshots/s |",
            "|---|---|",
        ]
        for key, label in (
            ("pipeline", "Deckyard pipeline (API -> job -> control plane -> renderer -> artefact)"),
            ("plain", "Plain warm Playwright loop (2 tabs)"),
            ("shot_cold", "shot-scraper multi, cold (whole command)"),
            ("shot_warm", "shot-scraper multi, warm (browser start excluded)"),
        ):
            vals = rd.get(key) or []
            err = rd.get(f"{key.split('_')[0]}_error") or rd.get(f"{key}_error")
            if key == "pipeline" and rd.get("pipeline_error"):
                err = rd["pipeline_error"]
            if key.startswith("shot") and rd.get("shot_error"):
                err = rd["shot_error"]
            L.append(
                f"| {label} | "
                f"{spread(vals, '{:.2f}') if vals else 'not measured: ' + str(err or '-')} |"
            )
        L.append("")
        if rd.get("pipeline") and rd.get("plain"):
            ratio = med(rd["pipeline"]) / med(rd["plain"])
            goals.append(
                ("Rendering: pipeline >= 85% of plain loop", f"{ratio:.0%}", goal(ratio >= 0.85))
            )
    else:
        L += [
            "**5. Rendering.** Deckyard pipeline on the example deck: not measured: "
            f"{rd.get('pages_error', rd.get('error', '-'))}.",
            "",
        ]
        it = rd.get("interim")
        if isinstance(it, list) and it:
            plain = [x["plain"] for x in it]
            api = [x["renderer"] for x in it]
            L += [
                "Interim figure (labelled as such): `bench/render.py`'s renderer alone (`POST "
                "/v1/render`, 1 slot) vs its plain loop, gradient+text slide — not the pipeline:",
                "",
                "| path | screenshots/s |",
                "|---|---|",
                f"| renderer API (interim) | {spread(api, '{:.2f}')} |",
                f"| plain Playwright loop | {spread(plain, '{:.2f}')} |",
                "",
            ]

    # ---- memory
    mem = r.get("memory", {})
    L += [
        "**6. Memory.** Process tree of an idle Lite `deckyard serve` (psutil, "
        f"{args.memory_settle:g} s after it was ready; RSS sums double-count pages Chromium's "
        "processes share, PSS splits them):",
    ]
    parts = []
    for key, label in (
        ("renderers=0", "`DECKYARD_RENDERERS=0` (no Chromium)"),
        ("renderers=1", "`DECKYARD_RENDERERS=1` (one renderer)"),
    ):
        ms = mem.get(key)
        if ms:
            parts.append(
                f"{label} RSS {spread([x['rss_mib'] for x in ms])} MiB, PSS "
                f"{spread([x['pss_mib'] for x in ms])} MiB, "
                f"{spread([x['processes'] for x in ms])} processes"
            )
        else:
            parts.append(f"{label} not measured: {mem.get(key + '|error', mem.get('error', '-'))}")
    L[-1] += " " + "; ".join(parts) + "."
    L.append("")

    # ---- goals
    if goals:
        L += [
            "**Goals (issue 8):** " + "; ".join(f"{g}: {val}, {ok}" for g, val, ok in goals) + ".",
            "",
        ]
    prof = r.get("profile")
    if prof:
        taken = [f"`{prof[s]}`" for s in ("deckyard-pg", "deckyard-sqlite") if s in prof]
        lost = [
            f"{NAMES[s]}: profile not taken: {prof[s + '|error']}"
            for s in ("deckyard-pg", "deckyard-sqlite")
            if s + "|error" in prof
        ]
        if taken:
            lost.insert(
                0,
                f"Where Deckyard's time goes: pyinstrument over one {min(args.jobs, 5000):,}-job "
                f"no-op drain per database, {', '.join(taken)}",
            )
        L += ["; ".join(lost) + ".", ""]
    return "\n".join(L).rstrip() + "\n"


def write_docs(section: str) -> Path:
    path = ROOT / "docs" / "benchmarks.md"
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    block = f"{START}\n{section}{END}"
    if START in text and END in text:
        head, rest = text.split(START, 1)
        text = head + block + rest.split(END, 1)[1]
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    path.write_text(text)
    return path


def load_avg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=20000)
    ap.add_argument(
        "--slow-jobs",
        type=int,
        default=3000,
        help="backlog for systems in SLOW_SYSTEMS (their rate does not depend on it), so the "
        "whole run fits in 15 minutes",
    )
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--samples", type=int, default=40, help="latency samples per repetition")
    ap.add_argument("--idle-warmup", type=float, default=20.0)
    ap.add_argument("--idle-window", type=float, default=20.0)
    ap.add_argument("--recovery-bound", type=float, default=45.0)
    ap.add_argument("--shots", type=int, default=24)
    ap.add_argument("--memory-settle", type=float, default=3.0)
    ap.add_argument("--quick", action="store_true", help="small N for development (not for docs)")
    ap.add_argument(
        "--only",
        default="",
        help="comma list: throughput,latency,idle,recovery,render,memory,profile",
    )
    ap.add_argument("--write-docs", action="store_true")
    ap.add_argument("--json", default=str(HERE / "out" / "compare.json"))
    args = ap.parse_args()
    if args.quick:
        args.jobs, args.reps, args.samples = 2000, 1, 10
        args.idle_warmup, args.idle_window, args.shots = 3.0, 10.0, 6
    only = {s for s in args.only.split(",") if s}
    t0 = time.monotonic()
    r: dict[str, Any] = {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "load_before": load_avg(),
        "machine": machine(),
        "versions": versions(),
    }
    log(f"machine {r['machine']}; load {r['load_before']}")
    sections: list[tuple[str, Callable[[argparse.Namespace], Any]]] = [
        ("throughput", run_throughput),
        ("latency", run_latency),
        ("idle", run_idle),
        ("recovery", run_recovery),
        ("render", run_render),
        ("memory", run_memory),
        ("profile", run_profile),
    ]
    for name, fn in sections:
        if only and name not in only:
            continue
        log(f"== {name}")
        guarded(r, name, lambda fn=fn: fn(args))  # type: ignore[misc]
    r["wall_s"] = time.monotonic() - t0
    r["load_after"] = load_avg()
    r["noisy"] = max(os.getloadavg()[1], float(r["load_before"].split()[1])) > 1.5
    Path(args.json).parent.mkdir(exist_ok=True)
    Path(args.json).write_text(json.dumps(r, indent=1, default=str))
    cmd = os.environ.get("BENCH_COMMAND") or "bench/run_all " + " ".join(sys.argv[1:])
    md = render_markdown(r, args, cmd.strip())
    print(md)
    if args.write_docs and not args.quick and not only:
        log(f"wrote {write_docs(md)}")
    elif args.write_docs:
        log("docs not written: --quick/--only runs are for development")
    log(f"done in {r['wall_s'] / 60:.1f} min")


if __name__ == "__main__":
    main()
