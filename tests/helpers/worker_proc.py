"""A real worker process for crash tests: `python -m tests.helpers.worker_proc URL N [hold]`.

With `hold`, its `hold` jobs never finish (they print `started ID ATTEMPT` and sleep), so a
concurrency of 1 leaves the rest of a claim in the prefetch buffer; without it they succeed.
Its handlers record a side-table row through `on_success`, i.e. inside the finish
compare-and-set transaction, so a row exists exactly once per successful job.
"""

from __future__ import annotations

import asyncio
import signal
import sys

from sqlalchemy import Column, Integer, MetaData, Table, insert
from sqlalchemy.ext.asyncio import AsyncConnection

from deckyard.db.lite import lite_lock
from deckyard.jobs import JobContext, Runtime
from tests.helpers.runtime import fast_settings

side_md = MetaData()
side = Table("side_effects", side_md, Column("job_id", Integer, primary_key=True))

SETTINGS = {"job_lease_seconds": 2.0, "job_heartbeat_interval_seconds": 0.5}


async def main(url: str, concurrency: int, hold: bool) -> None:
    rt = Runtime(url, settings=fast_settings(**SETTINGS), migrate=False)

    @rt.handler("hold", queue="hold", max_attempts=5)
    async def held(ctx: JobContext) -> int:
        if hold:
            print(f"started {ctx.id} {ctx.attempt}", flush=True)
            await asyncio.sleep(3600)

        async def record(conn: AsyncConnection) -> None:
            await conn.execute(insert(side).values(job_id=ctx.id))

        ctx.on_success(record)
        return ctx.attempt

    @rt.handler("side", queue="crash", max_attempts=3)
    async def handle(ctx: JobContext) -> None:
        await asyncio.sleep(0.002)

        async def record(conn: AsyncConnection) -> None:
            await conn.execute(insert(side).values(job_id=ctx.id))

        ctx.on_success(record)

    rt.worker(["crash", "hold"], concurrency=concurrency)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    async with rt:
        print("ready", flush=True)
        await stop.wait()


if __name__ == "__main__":
    with lite_lock(sys.argv[1], role="crash-test worker"):
        asyncio.run(main(sys.argv[1], int(sys.argv[2]), sys.argv[3:] == ["hold"]))
