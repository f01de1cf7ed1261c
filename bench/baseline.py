"""Run `deckyard baseline` on SQLite and PostgreSQL and write `docs/baseline.md`.

Run: .venv/bin/python bench/baseline.py [--idle 60] [--mixed 30]

Each database gets a fresh, private store (a temp SQLite file; a new PostgreSQL schema), so no
other client's NOTIFYs or statements mix into the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parents[1]
PG_URL = os.environ.get("TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test")
DECKYARD = str(Path(sys.executable).with_name("deckyard"))


def run(database: str | None, idle: float, mixed: float) -> list[dict[str, Any]]:
    args = [DECKYARD, "baseline", "--idle", str(idle), "--json"]
    if mixed:
        args += ["--mixed", str(mixed)]
    if database:
        args += ["--database", database]
    env = {k: v for k, v in os.environ.items() if not k.startswith("DECKYARD_")}
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run(
            args, cwd=tmp, env=env, capture_output=True, text=True, timeout=idle + mixed + 300
        )
    if out.returncode != 0:
        raise SystemExit(f"baseline failed: {out.stderr[-2000:]}")
    result: list[dict[str, Any]] = json.loads(out.stdout)
    return result


def table(window: dict[str, Any]) -> list[str]:
    rows = [
        "| loop | reads/min | writes/min | write tx/min | zero-row writes | ticks | p50 ms "
        "| p95 ms |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in window["loops"]:
        rows.append(
            f"| `{r['loop']}` | {r['reads_per_s'] * 60:.1f} | {r['writes_per_s'] * 60:.1f} | "
            f"{r['write_tx_per_s'] * 60:.1f} | {r['zero_row_writes']} | {r['ticks']} | "
            f"{r['tick_p50_ms']:.2f} | {r['tick_p95_ms']:.2f} |"
        )
    t = window["totals"]
    rows.append(
        f"| **total** | **{t['reads_per_s'] * 60:.1f}** | **{t['writes_per_s'] * 60:.1f}** | "
        f"**{t['write_tx_per_s'] * 60:.1f}** | {t['zero_row_writes']:.0f} | | | |"
    )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--idle", type=float, default=60)
    ap.add_argument("--mixed", type=float, default=0)
    args = ap.parse_args()
    schema = f"baseline_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        results = {
            "SQLite (Lite default)": run(None, args.idle, args.mixed),
            "PostgreSQL": run(f"{PG_URL}?options=-csearch_path%3D{schema}", args.idle, args.mixed),
        }
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
    command = f".venv/bin/python bench/baseline.py --idle {args.idle:g}" + (
        f" --mixed {args.mixed:g}" if args.mixed else ""
    )
    lines = [
        "# SQL baseline",
        "",
        "What the whole server (every loop: job workers, recovery, pruning, reconciliation, API",
        "housekeeping, the render control plane with one supervised renderer) sends to its",
        "database, per loop, measured by the statement instrumentation (seed 000 §6.2). The idle",
        "window must show 0 writes; the old system sent about 22 write statements per second.",
        "",
        f"Command: `{command}` (each run is `deckyard baseline --json`).",
        f"Machine: {os.cpu_count()} cores, {platform.platform()}, Python "
        f"{platform.python_version()}. Measured "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, default settings.",
        "",
    ]
    for name, windows in results.items():
        for w in windows:
            lines += [
                f"## {name}: {w['window']} ({w['seconds']:.0f} s)",
                "",
                f"`database is locked` / serialization failures: {w['locked_errors']}; server RSS "
                f"{w['rss_bytes'] / 2**20:.0f} MiB; with its renderer and Chromium (PSS) "
                f"{w['tree_pss_bytes'] / 2**20:.0f} MiB.",
                "",
                *table(w),
                "",
            ]
            extra = {
                k: v
                for k, v in w.items()
                if k
                not in (
                    "window",
                    "seconds",
                    "locked_errors",
                    "rss_bytes",
                    "tree_pss_bytes",
                    "totals",
                    "loops",
                )
            }
            if extra:
                lines += [f"Load: `{json.dumps(extra)}`", ""]
    (ROOT / "docs" / "baseline.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
