"""The `ai.page_edit` and `ai.page_create` jobs: a model writes a page, the write gate decides.

Each round sends the model the deck's rules, the page and the instruction (and, after a refusal,
the problems the checker found), takes the page source out of its answer, and runs it through
`PageJobs.gate`, the same gate a person's `PUT` goes through. A version is written only when a
round passed, and only inside the job's finish compare-and-set (`ctx.on_success`): a worker
killed at any point never leaves a version behind, and its retry cannot add a second one.

An `unavailable` render stage (rule Q0) is never a pass and never a content failure: the job
ends with the renderer's infrastructure code, without asking the model again.
"""

from __future__ import annotations

from typing import Any

from deckyard.ai.errors import AiErrorCode, AiEvent
from deckyard.ai.extract import extract_page_source
from deckyard.ai.prompts import (
    Message,
    PageContext,
    create_messages,
    edit_messages,
    no_source_message,
    repair_message,
)
from deckyard.ai.provider import AiProvider, Usage
from deckyard.config import Settings
from deckyard.db import Database
from deckyard.decks.jobs.handler_support import load_deck, refused, workspace_of
from deckyard.decks.jobs.names import DeckJobErrorCode
from deckyard.decks.jobs.page_jobs import PageJobs
from deckyard.decks.source.deck_source import DeckSource, PageKind, PageSource
from deckyard.decks.validation.result import ValidationStatus
from deckyard.jobs import JobContext, JobError


def page_context(source: DeckSource) -> PageContext:
    """What the prompts say about the deck around a page."""
    return PageContext(
        title=source.manifest.title,
        width=source.width,
        height=source.height,
        theme_css=source.theme_css,
        assets=sorted(source.assets),
    )


def _chars(messages: list[Message]) -> int:
    return sum(len(m["content"]) for m in messages)


class PageEditJobs:
    """Handlers of `ai.page_edit` and `ai.page_create`."""

    def __init__(
        self,
        db: Database,
        settings: Settings,
        provider: AiProvider,
        pages: PageJobs,
    ) -> None:
        self.db = db
        self.settings = settings
        self.provider = provider
        self.pages = pages

    async def edit(self, ctx: JobContext) -> dict[str, Any]:
        """Change an existing page as the payload's `instruction` says."""
        deck_id, name = int(ctx.payload["deck_id"]), str(ctx.payload["page"])
        row, source = await load_deck(self.db, deck_id, workspace_of(ctx))
        old = source.page(name)
        seen = next((p.number for p in row.pages if p.page_name == name), None)
        if old is None or seen is None:
            raise refused(DeckJobErrorCode.PAGE_NOT_FOUND, f"no page {name!r}")
        messages = edit_messages(
            page_context(source), name, old.kind, old.text, str(ctx.payload["instruction"])
        )
        return await self._rounds(ctx, deck_id, source, name, old.kind, messages, base=seen)

    async def create(self, ctx: JobContext) -> dict[str, Any]:
        """Write a new page (appended to the deck) from the payload's `prompt`."""
        deck_id, name = int(ctx.payload["deck_id"]), str(ctx.payload["page"])
        _row, source = await load_deck(self.db, deck_id, workspace_of(ctx))
        if source.page(name) is not None:
            raise refused(AiErrorCode.PAGE_EXISTS, f"deck {deck_id} already has a page {name!r}")
        kind = PageKind(ctx.payload.get("kind") or PageKind.MARKDOWN)
        messages = create_messages(page_context(source), name, kind, str(ctx.payload["prompt"]))
        return await self._rounds(ctx, deck_id, source, name, kind, messages)

    async def _rounds(
        self,
        ctx: JobContext,
        deck_id: int,
        source: DeckSource,
        name: str,
        kind: PageKind,
        messages: list[Message],
        *,
        base: int | None = None,
    ) -> dict[str, Any]:
        """Ask, extract, gate; repeat with the problems until a pass or the rounds run out.

        `base` is the page version the model was shown: a version written meanwhile (by a
        person, say) makes the write fail with `EDIT_CONFLICT` instead of overwriting it.
        """
        skip = bool(ctx.payload.get("skip_visual_verification", False))
        usage = Usage()
        rounds = self.settings.ai_repair_rounds + 1
        failure = JobError(AiErrorCode.NO_SOURCE, "the model's answer held no page source")
        for number in range(1, rounds + 1):
            prompt_chars = _chars(messages)
            answer = await self.provider.chat(
                messages, workspace_id=ctx.job.workspace_id, remaining=ctx.remaining()
            )
            usage.add(answer.usage)
            text = extract_page_source(answer.text, kind)
            event: dict[str, Any] = {
                "round": number,
                "page": name,
                "prompt_chars": prompt_chars,
                "answer_chars": len(answer.text),
                "source_chars": len(text or ""),
                "tokens": answer.usage.as_dict(),
            }
            messages = [*messages, {"role": "assistant", "content": answer.text}]
            if text is None:
                await ctx.emit(AiEvent.ROUND, {**event, "outcome": "no_source"})
                failure = JobError(
                    AiErrorCode.NO_SOURCE,
                    f"round {number}: the model's answer held no usable page source",
                    retryable=False,
                )
                messages.append(no_source_message(kind))
                continue
            edited = PageSource(name=name, kind=kind, text=text)
            gate = await self.pages.gate(ctx, deck_id, source, edited, skip=skip, base=base)
            result = gate.check.result
            await ctx.emit(
                AiEvent.ROUND,
                {
                    **event,
                    "outcome": "passed" if gate.passed else str(result.status),
                    "problems": len(result.diagnostics),
                },
            )
            if gate.passed:
                ctx.on_success(gate.write)
                return {**gate.summary, "rounds": number, "usage": usage.as_dict()}
            if result.status is ValidationStatus.UNAVAILABLE or result.retryable:
                await ctx.emit(AiEvent.USAGE, usage.as_dict())
                code = result.error_code or ValidationStatus.UNAVAILABLE.value
                raise JobError(
                    code,
                    f"round {number}: the page could not be verified ({result.summary}); "
                    "no version was written",
                    retryable=False,
                )
            failure = JobError(
                AiErrorCode.VALIDATION_FAILED,
                f"round {number}: {result.summary}",
                retryable=False,
            )
            messages.append(repair_message(result.summary, result.diagnostics))
        await ctx.emit(AiEvent.USAGE, usage.as_dict())
        raise JobError(
            failure.code,
            f"no passing page after {rounds} round(s); last: {failure}",
            retryable=False,
        )
