"""The real app served for the dashboard's browser test, plus demo job kinds to watch.

Screenshots are real render requests (`POST /v1/screenshots`, rendered by the server's own
renderer, shown on `/ui/renders`, never as jobs), but the server has no route that enqueues an
arbitrary job or starts an arbitrary task, so this module (run as
`python -m tests.e2e.dashboard_server --port N`) builds the app with `create_app` exactly as
`deckyard serve` does, then adds, for tests only:

- handlers on the `demo` queue: `demo.step` (emits progress, succeeds after `seconds`) and
  `demo.hold` (runs until cancelled);
- a `demo.publish` task kind whose four stages each run one `demo.step` job;
- `POST /demo/jobs` and `POST /demo/tasks` (bearer token), which enqueue into the caller's
  workspace.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

import uvicorn
from fastapi import Body, Depends, FastAPI, Request

from deckyard.api.app import create_app
from deckyard.api.auth import Principal, current_principal
from deckyard.config import Settings
from deckyard.jobs import EnqueueSpec, JobContext, Runtime
from deckyard.tasks import TaskExecutor
from deckyard.tasks.executor import Stage, StageContext, TaskKind

DEMO_QUEUE = "demo"
Caller = Annotated[Principal, Depends(current_principal)]


def register_demo(rt: Runtime, ex: TaskExecutor) -> None:
    """Register the demo handlers and the demo task kind."""

    @rt.handler("demo.step", queue=DEMO_QUEUE, max_attempts=1)
    async def step(ctx: JobContext) -> dict[str, Any]:
        seconds = float(ctx.payload.get("seconds", 1.0))
        for pct in (25, 50, 75):
            await asyncio.sleep(seconds / 4)
            await ctx.emit("progress", {"pct": pct})
        await asyncio.sleep(seconds / 4)
        return {"ok": True, "took_seconds": seconds}

    @rt.handler("demo.hold", queue=DEMO_QUEUE, max_attempts=1)
    async def hold(ctx: JobContext) -> None:
        await ctx.emit("progress", {"note": "holding until cancelled"})
        await asyncio.sleep(3600)

    def one_step(seconds: float) -> Any:
        async def jobs(ctx: StageContext) -> list[EnqueueSpec]:
            return [EnqueueSpec("demo.step", {"seconds": seconds}, queue=DEMO_QUEUE)]

        return jobs

    names = ["validate", "screenshot", "build", "export"]
    ex.register(TaskKind("demo.publish", [Stage(n, one_step(2.5)) for n in names]))


def build(settings: Settings) -> FastAPI:
    """The app `deckyard serve` runs, with the demo kinds and routes added."""
    app = create_app(settings)
    inner = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(a: FastAPI) -> AsyncIterator[None]:
        async with inner(a):
            register_demo(a.state.runtime, a.state.tasks)
            a.state.runtime.worker([DEMO_QUEUE])
            yield

    app.router.lifespan_context = lifespan

    @app.post("/demo/jobs")
    async def demo_job(
        request: Request,
        principal: Caller,
        kind: Annotated[str, Body()],
        payload: Annotated[dict[str, Any] | None, Body()] = None,
        delay: Annotated[float | None, Body()] = None,
        queue: Annotated[str, Body()] = DEMO_QUEUE,
    ) -> dict[str, Any]:
        rt: Runtime = request.app.state.runtime
        job = await rt.enqueue(
            kind, payload or {}, queue=queue, run_at=delay, workspace_id=principal.workspace_id
        )
        return {"id": job.id}

    @app.post("/demo/tasks")
    async def demo_task(request: Request, principal: Caller) -> dict[str, Any]:
        ex: TaskExecutor = request.app.state.tasks
        task_id = await ex.create(
            "demo.publish", {"deck": "q3-review"}, workspace_id=principal.workspace_id
        )
        return {"id": task_id}

    return app


def main() -> None:
    """Serve the demo app on 127.0.0.1."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    settings = Settings.load(port=args.port)
    uvicorn.run(build(settings), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
