"""Warm latency of one page validation through `POST /v1/validate` (issue 12 target).

A Lite `deckyard serve` with one supervised renderer; each request is a one-page deck ZIP made
from an example deck page (`examples/launch-deck`, with its theme, fonts and images), so the
page compiles and renders as it does in the deck. Untimed warm-up rounds first, then requests
one at a time, cycling through the pages; p50 / p95 / max of the wall time per request.

With `--hops` it also prints where one validation's time goes, median per hop, from the
timestamps the server already stores (the screenshot job, its render request and attempt, read
from the Lite SQLite file after the run) and the renderer's own phase timings. A validation
forgets those rows once it answered, so for `--hops` the server runs with that clean-up
reduced to deleting the artefact (`--serve-keeping-rows`, below): the rows it would delete are
left for this script to read, which costs the server two write transactions less per request.

    .venv/bin/python bench/validate_latency.py --requests 60 [--hops]
"""

from __future__ import annotations

import argparse
import io
import json
import sqlite3
import statistics
import sys
import time
import tomllib
import zipfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare_render import Serve

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "launch-deck"


def page_zips() -> dict[str, bytes]:
    """One deck ZIP per example page: that page, the theme and every asset."""
    manifest = tomllib.loads((EXAMPLE / "deck.toml").read_text(encoding="utf-8"))
    text = (EXAMPLE / "deck.toml").read_text(encoding="utf-8")
    head, _pages, tail = text.partition("pages = [")
    tail = tail.split("]", 1)[1]
    out: dict[str, bytes] = {}
    for page in manifest["pages"]:
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as archive:
            archive.writestr("deck.toml", f'{head}pages = ["{page}"]{tail}')
            for path in sorted(EXAMPLE.rglob("*")):
                rel = path.relative_to(EXAMPLE).as_posix()
                if path.is_file() and rel != "deck.toml" and not rel.startswith("pages/"):
                    archive.write(path, rel)
            archive.write(EXAMPLE / "pages" / page, f"pages/{page}")
        out[page] = buf.getvalue()
    return out


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def _instant(text: str | None) -> float | None:
    if text is None:
        return None
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


HOP_SQL = """
SELECT j.id, j.created_at, j.started_at, j.finished_at, j.result,
       r.created_at, r.finished_at, a.created_at, a.last_receipt_at, a.finished_at
FROM jobs j
JOIN render_requests r ON r.parent_job_id = j.id
JOIN render_attempts a ON a.request_id = r.id
WHERE j.kind = 'screenshot' AND j.id > ? ORDER BY j.id
"""


def hops(db: Path, first_job: int, sent: list[tuple[float, float]]) -> list[tuple[str, float]]:
    """Median milliseconds per hop of the timed requests (wall clock, one machine)."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        rows = conn.execute(HOP_SQL, (first_job,)).fetchall()
    names = [
        "API: parse, compile, enqueue (send -> job row)",
        "job claim (job row -> started)",
        "handler opens the render request",
        "dispatch admits an attempt",
        "renderer: submit + navigate/set_content",
        "renderer: settle + inspect",
        "renderer: capture",
        "renderer: store + cleanup",
        "receipt poll + artefact fetch + commit",
        "screenshot job completes (request -> job finished)",
        "waiter wakeup + response (job finished -> answer)",
    ]
    per_hop: list[list[float]] = [[] for _ in names]
    for (t_send, t_answer), row in zip(sent, rows, strict=False):
        _id, j_new, j_start, j_end, result, r_new, r_end, a_new, _a_receipt, _a_end = row
        timings: dict[str, Any] = (
            (json.loads(result) or {}).get("diagnostics", {}).get("timings", {}) if result else {}
        )
        marks = [_instant(x) for x in (j_new, j_start, r_new, a_new)]
        if None in marks or _instant(r_end) is None or _instant(j_end) is None:
            continue
        a_at = float(marks[3])  # type: ignore[arg-type]
        nav = timings.get("navigate_ms", 0) / 1000
        settle = timings.get("settle_ms", 0) / 1000
        cap = timings.get("capture_ms", 0) / 1000
        total = timings.get("total_ms", 0) / 1000
        r_done = float(_instant(r_end))  # type: ignore[arg-type]
        j_done = float(_instant(j_end))  # type: ignore[arg-type]
        rest = max(0.0, r_done - a_at - total)
        values = [
            float(marks[0]) - t_send,  # type: ignore[arg-type]
            float(marks[1]) - float(marks[0]),  # type: ignore[arg-type]
            float(marks[2]) - float(marks[1]),  # type: ignore[arg-type]
            a_at - float(marks[2]),  # type: ignore[arg-type]
            nav,
            settle,
            cap,
            max(0.0, total - nav - settle - cap),
            rest,
            j_done - r_done,
            t_answer - j_done,
        ]
        for bucket, value in zip(per_hop, values, strict=True):
            bucket.append(value * 1000)
    return [(n, statistics.median(v)) for n, v in zip(names, per_hop, strict=True) if v]


def last_job(db: Path) -> int:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        row = conn.execute("SELECT COALESCE(MAX(id), 0) FROM jobs").fetchone()
    return int(row[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=60)
    parser.add_argument("--warmup-rounds", type=int, default=2)
    parser.add_argument("--hops", action="store_true", help="print the median time per hop")
    args = parser.parse_args()
    zips = page_zips()
    keeping = [sys.executable, str(Path(__file__).resolve()), "--serve-keeping-rows"]
    serve = Serve(renderers=1, command=keeping if args.hops else None)
    try:
        serve.wait_healthy()
        serve.wait_renderer()
        headers = {"Authorization": f"Bearer {serve.token}", "Content-Type": "application/zip"}
        with httpx.Client(base_url=serve.url, headers=headers, timeout=120) as client:
            names = list(zips)
            for _ in range(args.warmup_rounds):
                for name in names:
                    client.post("/v1/validate", content=zips[name])
            db = Path(serve.tmp) / "deckyard.db"
            first_job = last_job(db) if args.hops else 0
            seconds: list[float] = []
            sent: list[tuple[float, float]] = []
            statuses: dict[str, int] = {}
            for i in range(args.requests):
                name = names[i % len(names)]
                wall = time.time()
                t0 = time.perf_counter()
                answer = client.post("/v1/validate", content=zips[name])
                seconds.append(time.perf_counter() - t0)
                sent.append((wall, wall + seconds[-1]))
                key = f"{answer.status_code} {answer.json().get('status')}"
                statuses[key] = statuses.get(key, 0) + 1
        ms = [s * 1000 for s in seconds]
        print(
            f"POST /v1/validate, one example page per request, {args.requests} warm requests: "
            f"p50 {percentile(ms, 50):.0f} ms, p95 {percentile(ms, 95):.0f} ms, "
            f"max {max(ms):.0f} ms, mean {statistics.mean(ms):.0f} ms; answers {statuses}"
        )
        if args.hops:
            for hop, value in hops(db, first_job, sent):
                print(f"  {value:7.1f} ms  {hop}")
    finally:
        serve.stop()


def serve_keeping_rows() -> None:
    """`deckyard ...` with `RenderService.discard` deleting only the artefact (for `--hops`)."""
    from deckyard.cli import main as cli_main
    from deckyard.render.control.service import RenderService

    async def discard_artifact_only(self: RenderService, job_id: int) -> None:
        job = await self.runtime.get(job_id)
        key = job.result.get("artifact_key") if job and isinstance(job.result, dict) else None
        if isinstance(key, str):
            await self.store.delete(key)

    RenderService.discard = discard_artifact_only  # type: ignore[method-assign]
    sys.argv = ["deckyard", *sys.argv[2:]]
    cli_main()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve-keeping-rows"]:
        serve_keeping_rows()
    else:
        main()
