"""The `ai.deck_outline` job: one slide per outline line, in order, as `ai.page_create` children.

The outline job is the one thing a caller follows: it succeeds only when every slide was
written, and fails, with the failed slide's code and a message naming it, as soon as one slide
could not be written (the slides after it are never asked for). Each slide is its own child
job with its own attempts and repair rounds; the outline job waits for it without holding a
worker slot.

A new attempt (after a crash, or `POST /v1/jobs/{id}/retry` after a failure) looks at the
children it already has first: written slides are kept, a slide still running is waited for,
and a failed slide is asked for again, so a retry continues where the outline stopped.
"""

from __future__ import annotations

import re
from typing import Any

from deckyard.ai.errors import AI_QUEUE, AiErrorCode, AiEvent, AiJobKind
from deckyard.ai.provider import Usage
from deckyard.jobs import Job, JobContext, JobError, JobStatus, Runtime

CHILD_PAGE_SIZE = 100
"""Children read per query when an attempt looks for the slides it already has."""


def outline_step(title: str, items: list[str], index: int) -> dict[str, str]:
    """The `page` name and `prompt` of slide `index` (0: the first line after the title)."""
    item = items[index]
    slug = re.sub(r"[^a-z0-9]+", "-", item.lower()).strip("-")[:40].strip("-") or "slide"
    listing = "\n".join(f"{n + 2}. {text}" for n, text in enumerate(items))
    prompt = (
        f"This deck, {title!r}, has a title slide and then these slides:\n"
        f"{listing}\nWrite slide {index + 2}: {item}"
    )
    return {"page": f"{index + 2:02d}-{slug}", "prompt": prompt}


class OutlineJobs:
    """The handler of `ai.deck_outline`."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    async def _children(self, parent_id: int) -> dict[str, Job]:
        """The newest `ai.page_create` child per page name."""
        found: dict[str, Job] = {}
        before: int | None = None
        while True:
            batch = await self.runtime.list(
                parent_id=parent_id,
                kind=AiJobKind.PAGE_CREATE.value,
                before_id=before,
                limit=CHILD_PAGE_SIZE,
            )
            for job in batch:  # newest first: the first seen per page is the latest
                found.setdefault(str(job.payload["page"]), job)
            if len(batch) < CHILD_PAGE_SIZE:
                return found
            before = batch[-1].id

    async def write(self, ctx: JobContext) -> dict[str, Any]:
        """Write every slide of the payload's outline, one child job after the other."""
        payload = ctx.payload
        deck_id, title = int(payload["deck_id"]), str(payload["title"])
        items = [str(i) for i in payload["items"]]
        existing = await self._children(ctx.id)
        slides: list[dict[str, Any]] = []
        usage = Usage()
        for index in range(len(items)):
            step = outline_step(title, items, index)
            job = existing.get(step["page"])
            if job is None or job.status in (JobStatus.FAILED, JobStatus.CANCELLED):
                job = await self.runtime.enqueue(
                    AiJobKind.PAGE_CREATE.value,
                    {
                        "deck_id": deck_id,
                        "kind": payload.get("kind"),
                        "skip_visual_verification": bool(
                            payload.get("skip_visual_verification", False)
                        ),
                        **step,
                    },
                    queue=AI_QUEUE,
                    workspace_id=ctx.job.workspace_id,
                    parent_id=ctx.id,
                    dedupe_key=f"{AiJobKind.DECK_OUTLINE.value}:{ctx.id}:{index}",
                )
            number = index + 2
            await ctx.emit(AiEvent.SLIDE, {"slide": number, "page": step["page"], "job_id": job.id})
            done = await ctx.wait_released(self.runtime.wait(job.id))
            if done.status != JobStatus.SUCCEEDED:
                raise JobError(
                    done.error_code or AiErrorCode.SLIDE_FAILED,
                    f"slide {number} of {len(items) + 1} ({step['page']}, job {done.id}) "
                    f"{done.status.value}: {done.error_message or 'no message'}; the slides "
                    "before it were written, none after it",
                    retryable=False,
                )
            result = done.result if isinstance(done.result, dict) else {}
            usage.add(Usage(**result.get("usage", {})))
            slides.append(
                {
                    "page": step["page"],
                    "job_id": done.id,
                    "version_number": result.get("version_number"),
                }
            )
        return {"deck_id": deck_id, "slides": slides, "usage": usage.as_dict()}
