"""Statements a minute an idle runtime sends from 20 s after a burst of jobs (issue 15 goal: <= 10).

Run: .venv/bin/python bench/idle_after_burst.py postgresql|sqlite [--burst 500] [--after 20]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from job_queue import idle_snapshot


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dialect", choices=["postgresql", "sqlite"])
    ap.add_argument("--burst", type=int, default=500)
    ap.add_argument("--after", type=float, default=20.0)
    ap.add_argument("--window", type=float, default=60.0)
    args = ap.parse_args()
    snap = await idle_snapshot(args.dialect, args.window, burst=args.burst, settle=args.after)
    scale = 60 / args.window
    total = {k: sum(c[k] for c in snap.values()) * scale for k in ("reads", "writes")}
    per_loop = {n: c["reads"] + c["writes"] for n, c in snap.items()}
    print(f"{args.dialect}: {total} per min, {args.after:g} s after a {args.burst}-job burst")
    print(f"  by loop (statements in {args.window:g} s): {per_loop}")


if __name__ == "__main__":
    asyncio.run(main())
