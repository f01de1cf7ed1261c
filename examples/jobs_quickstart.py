"""The job runtime on its own: durable jobs on SQLite (or PostgreSQL), no HTTP server needed.

Run: .venv/bin/python examples/jobs_quickstart.py [DATABASE_URL]
"""

from __future__ import annotations

import asyncio
import sys
import tempfile

from deckyard.config import Settings
from deckyard.jobs import EnqueueSpec, JobContext, JobError, RetryPolicy, Runtime


async def main(url: str) -> None:
    rt = Runtime(url, settings=Settings.load(job_retry_base_delay_seconds=0.05))

    @rt.handler("resize", queue="images", max_attempts=3, timeout=30)
    async def resize(ctx: JobContext) -> dict[str, object]:
        await ctx.emit("progress", {"pct": 50})
        if ctx.payload.get("broken"):
            raise JobError("BAD_IMAGE", "not an image", retryable=False)
        return {"resized": ctx.payload["path"], "attempt": ctx.attempt}

    @rt.handler("flaky", queue="images", retry=RetryPolicy(max_attempts=3, base_delay=0.05))
    async def flaky(ctx: JobContext) -> str:
        if ctx.attempt < 2:
            raise RuntimeError("first try fails")
        return "worked on attempt 2"

    rt.worker(["images"], concurrency=4)
    async with rt:
        job = await rt.enqueue("resize", {"path": "a.png"}, dedupe_key="a.png")
        same = await rt.enqueue("resize", {"path": "a.png"}, dedupe_key="a.png")
        assert same.id == job.id  # an active job with the same key is returned, not duplicated
        more = await rt.enqueue_many(
            [EnqueueSpec("flaky"), EnqueueSpec("resize", {"path": "x", "broken": True})]
        )
        for j in [job, *more]:
            done = await rt.wait(j.id, timeout=30)
            print(f"job {done.id} {done.kind}: {done.status} {done.result or done.error_code}")
        print("events:", [e.type async for e in rt.events(job.id)])


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else f"sqlite:///{tmp}/jobs.db"))
