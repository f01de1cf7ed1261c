"""Publishes at once on few worker slots, waits lending their slot against waits keeping it.

A Lite `deckyard serve` with one supervised renderer and `job_concurrency` = `deck_job_concurrency`
= `--slots`; `--decks` one-page decks (the example deck's first page, with its theme, fonts
and images) published together; the figure is the wall time from the first publish request
until every publish task has ended. `job_max_suspended=0` makes every wait keep its slot (the
behaviour before issue 12 item 4); the default lends it. The two alternate, `--reps` each,
median reported.

    .venv/bin/python bench/publish_slots.py --decks 5 --slots 2 --reps 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare_render import Serve
from validate_latency import page_zips

ENDED = {"succeeded", "failed", "cancelled"}


def publish_all(decks: int, slots: int, max_suspended: int | None) -> tuple[float, list[str]]:
    """Seconds for `decks` publishes at once, and their end states."""
    os.environ["DECKYARD_JOB_CONCURRENCY"] = str(slots)
    os.environ["DECKYARD_DECK_JOB_CONCURRENCY"] = str(slots)
    if max_suspended is None:
        os.environ.pop("DECKYARD_JOB_MAX_SUSPENDED", None)
    else:
        os.environ["DECKYARD_JOB_MAX_SUSPENDED"] = str(max_suspended)
    first = next(iter(page_zips().values()))
    serve = Serve(renderers=1)
    try:
        serve.wait_healthy()
        serve.wait_renderer()
        auth = {"Authorization": f"Bearer {serve.token}"}
        with httpx.Client(base_url=serve.url, headers=auth, timeout=120) as client:
            ids = []
            for _ in range(decks):
                made = client.post(
                    "/v1/decks/zip", content=first, headers={"Content-Type": "application/zip"}
                )
                made.raise_for_status()
                ids.append(made.json()["id"])
            t0 = time.perf_counter()
            tasks = [client.post(f"/v1/decks/{i}/publish").json()["task_id"] for i in ids]
            states: list[str] = []
            while True:
                states = [client.get(f"/v1/tasks/{t}").json()["status"] for t in tasks]
                if all(s in ENDED for s in states):
                    return time.perf_counter() - t0, states
                if time.perf_counter() - t0 > 600:
                    return float("inf"), states
                time.sleep(0.1)
    finally:
        serve.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decks", type=int, default=5)
    parser.add_argument("--slots", type=int, default=2)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    runs: dict[str, list[float]] = {"lend (default)": [], "keep (job_max_suspended=0)": []}
    for _ in range(args.reps):
        for name, bound in (("lend (default)", None), ("keep (job_max_suspended=0)", 0)):
            took, states = publish_all(args.decks, args.slots, bound)
            print(f"{name}: {took:.2f} s {states}", flush=True)
            runs[name].append(took)
    print(f"\n{args.decks} one-page decks published at once, {args.slots} slots per worker:")
    for name, took in runs.items():
        print(f"  {name:28s} median {statistics.median(took):.2f} s  (runs {took})")


if __name__ == "__main__":
    main()
