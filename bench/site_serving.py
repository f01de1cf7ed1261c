"""Benchmark: how long a publish takes to go live, and what serving a hosted site costs.

Starts `deckyard serve` (its own renderer) on a fresh SQLite file, or on `--database-url`,
publishes a one-page deck as public, then times `--count` sequential requests each for the
site's index, a page (content-hashed, immutable) and a page revalidation (`If-None-Match`,
304). Prints the publish time and median / p95 latency per kind. Sequential over loopback:
this is per-request cost (one SELECT of the live publication + one store read), not capacity.

Usage: `.venv/bin/python bench/site_serving.py [--count 300] [--database-url URL]`
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

DECK = {
    "manifest": {"title": "Bench", "slide": {"width": 1920, "height": 1080}},
    "pages": [{"name": "01-hello", "kind": "md", "text": "# Hello\n\nA hosted slide.\n"}],
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def timed(client: httpx.Client, url: str, count: int, status: int, **kw: object) -> list[float]:
    took = []
    for _ in range(count):
        start = time.perf_counter()
        got = client.get(url, **kw)  # type: ignore[arg-type]
        took.append(time.perf_counter() - start)
        assert got.status_code == status, got.text
    return took


def report(name: str, took: list[float]) -> None:
    p95 = sorted(took)[int(len(took) * 0.95) - 1]
    print(f"{name:<16} median {statistics.median(took) * 1000:7.2f} ms   p95 {p95 * 1000:7.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=300)
    parser.add_argument("--database-url", default=None)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="deckyard-site-bench-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("DECKYARD_")}
    env.update(DECKYARD_DATA_DIR=str(tmp / "data"), DECKYARD_RENDERERS="1")
    if args.database_url:
        env["DECKYARD_DATABASE_URL"] = args.database_url
    cli = [sys.executable, "-m", "deckyard"]
    token = subprocess.run(
        [*cli, "token", "create", "--workspace", "bench"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    port = free_port()
    server = subprocess.Popen(
        [*cli, "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        headers = {"authorization": f"Bearer {token}"}
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
            deadline = time.monotonic() + 90
            while True:
                try:
                    if client.get("/healthz").status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise SystemExit("the server did not start")
                time.sleep(0.1)
            deck = client.post("/v1/decks", json=DECK, headers=headers).json()["id"]
            start = time.monotonic()
            task = client.post(
                f"/v1/decks/{deck}/publish", json={"visibility": "public"}, headers=headers
            ).json()["task_id"]
            while (status := client.get(f"/v1/tasks/{task}", headers=headers).json()["status"]) in (
                "pending",
                "running",
            ):
                time.sleep(0.1)
            if status != "succeeded":
                raise SystemExit(f"publish ended {status}")
            print(f"publish to live   {time.monotonic() - start:7.2f} s (1 page)")
            site = f"/sites/bench/{deck}/"
            index = client.get(site)
            found = re.search(r'"(pages/[^"]+\.html)"', index.text)
            assert found, index.text
            page = site + found.group(1)
            etag = client.get(page).headers["etag"]
            report("index 200", timed(client, site, args.count, 200))
            report("page 200", timed(client, page, args.count, 200))
            report(
                "page 304", timed(client, page, args.count, 304, headers={"if-none-match": etag})
            )
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(30)


if __name__ == "__main__":
    main()
