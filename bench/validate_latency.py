"""Warm latency of one page validation through `POST /v1/validate` (issue 12 target).

A Lite `deckyard serve` with one supervised renderer; each request is a one-page deck ZIP made
from an example deck page (`examples/launch-deck`, with its theme, fonts and images), so the
page compiles and renders as it does in the deck. Untimed warm-up rounds first, then requests
one at a time, cycling through the pages; p50 / p95 / max of the wall time per request.

With `--hops` it also prints where one validation's time goes, median per hop, from the
timestamps the server already stores (the render request and its attempt, read from the Lite
SQLite file after the run; a validation opens its render request without a job) and the
renderer's own phase timings. A validation forgets those rows once it answered, so for
`--hops` the server runs with that clean-up reduced to deleting the artefact
(`--serve-keeping-rows`, below): the rows it would delete are left for this script to read,
which costs the server one write transaction less per request.

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
SELECT r.id, r.created_at, r.finished_at, r.result, a.created_at
FROM render_requests r
JOIN render_attempts a ON a.request_id = r.id
WHERE r.kind = 'screenshot' AND r.parent_job_id IS NULL AND r.id > ? ORDER BY r.id
"""


def hops(db: Path, first: int, sent: list[tuple[float, float]]) -> list[tuple[str, float]]:
    """Median milliseconds per hop of the timed requests (wall clock, one machine)."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        rows = conn.execute(HOP_SQL, (first,)).fetchall()
    names = [
        "API: parse, compile, admit + insert the render request (send -> request row)",
        "dispatch admits an attempt (request row -> attempt row)",
        "renderer: submit + navigate/set_content",
        "renderer: settle + inspect",
        "renderer: capture",
        "renderer: store + cleanup",
        "receipt poll + artefact fetch + commit (renderer done -> request finished)",
        "waiter wakeup + forget + response (request finished -> answer)",
    ]
    per_hop: list[list[float]] = [[] for _ in names]
    for (t_send, t_answer), row in zip(sent, rows, strict=False):
        _id, r_new, r_end, result, a_new = row
        timings: dict[str, Any] = (
            (json.loads(result) or {}).get("diagnostics", {}).get("timings", {}) if result else {}
        )
        r_at, r_done, a_at = (_instant(x) for x in (r_new, r_end, a_new))
        if r_at is None or r_done is None or a_at is None:
            continue
        nav = timings.get("navigate_ms", 0) / 1000
        settle = timings.get("settle_ms", 0) / 1000
        cap = timings.get("capture_ms", 0) / 1000
        total = timings.get("total_ms", 0) / 1000
        values = [
            r_at - t_send,
            a_at - r_at,
            nav,
            settle,
            cap,
            max(0.0, total - nav - settle - cap),
            max(0.0, r_done - a_at - total),
            t_answer - r_done,
        ]
        for bucket, value in zip(per_hop, values, strict=True):
            bucket.append(value * 1000)
    return [(n, statistics.median(v)) for n, v in zip(names, per_hop, strict=True) if v]


def last_request(db: Path) -> int:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        row = conn.execute("SELECT COALESCE(MAX(id), 0) FROM render_requests").fetchone()
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
            first = last_request(db) if args.hops else 0
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
            for hop, value in hops(db, first, sent):
                print(f"  {value:7.1f} ms  {hop}")
    finally:
        serve.stop()


def serve_keeping_rows() -> None:
    """`deckyard ...` with `RenderService.forget_request` deleting only the artefact (`--hops`)."""
    from collections.abc import Sequence

    from deckyard.cli import main as cli_main
    from deckyard.render.control.models import RenderRequest
    from deckyard.render.control.service import RenderService

    async def forget_artifact_only(
        self: RenderService, request: RenderRequest, documents: Sequence[str] = ()
    ) -> None:
        del documents  # the document objects stay too; the server's data dir is temporary
        if request.artifact_key is not None:
            await self.store.delete(request.artifact_key)

    RenderService.forget_request = forget_artifact_only  # type: ignore[method-assign]
    sys.argv = ["deckyard", *sys.argv[2:]]
    cli_main()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve-keeping-rows"]:
        serve_keeping_rows()
    else:
        main()
