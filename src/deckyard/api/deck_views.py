"""The JSON shapes of decks, pages and versions as the HTTP API serves them."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from deckyard.decks.compile.slide_markdown import slide_notes
from deckyard.decks.errors import CompileProblem
from deckyard.decks.source.deck_source import PAGE_NAME_PATTERN, PageKind, SourceWarning
from deckyard.decks.source.marp_deck import MARP_MARK
from deckyard.decks.source.reveal_html import reveal_page_notes
from deckyard.decks.store import DeckRow, PageVersionRow
from deckyard.decks.validation.result import ValidationResult
from deckyard.outputs.site_presenter import page_notes


class ProblemOut(BaseModel):
    """A compile problem: where (page, line), which reference, and what."""

    code: str
    message: str
    page: str
    reference: str | None = None
    line: int | None = None

    @classmethod
    def of(cls, p: CompileProblem) -> ProblemOut:
        """The API view of a compile problem."""
        return cls(code=p.code, message=p.message, page=p.page, reference=p.reference, line=p.line)


class ScreenshotPointer(BaseModel):
    """A page version's current screenshot: the job that made it, its render and its artefact."""

    job_id: int
    render_id: int | None = Field(
        None,
        description="The render request that drew it (`/v1/renders/{id}`, until retention "
        "prunes it); null for one made before renders were requests.",
    )
    artifact_key: str
    content_type: str
    size: int
    sha256: str
    width: int
    height: int
    format: str


class PageVersionOut(BaseModel):
    """One version of a page."""

    id: int
    page: str
    number: int
    kind: str
    compiled: bool = Field(description="Whether this version compiled.")
    compiled_sha256: str | None
    validation: ValidationResult | None
    skipped_visual_verification: bool
    screenshot: ScreenshotPointer | None
    created_at: datetime
    actor_token_id: int | None = Field(
        None, description="The token whose edit wrote this version (see /v1/tokens, /v1/audit)."
    )

    @classmethod
    def of(cls, v: PageVersionRow) -> PageVersionOut:
        """The API view of a stored version (without its source)."""
        return cls(
            id=v.id,
            page=v.page_name,
            number=v.number,
            kind=v.kind,
            compiled=v.compiled is not None,
            compiled_sha256=v.compiled_sha256,
            validation=ValidationResult.model_validate(v.validation) if v.validation else None,
            skipped_visual_verification=v.skipped_visual_verification,
            screenshot=ScreenshotPointer.model_validate(v.screenshot) if v.screenshot else None,
            created_at=v.created_at,
            actor_token_id=v.actor_token_id,
        )


class PageOut(PageVersionOut):
    """A page's current version, with its source and its speaker notes."""

    source: str
    notes: list[str] = Field(
        default_factory=list,
        description="Speaker notes (Markdown comments, reveal.js `Note:`, a reveal.js HTML slide's "
        "`aside.notes` or `data-notes`, a Marp slide's comments).",
    )

    @classmethod
    def of_source(cls, v: PageVersionRow) -> PageOut:
        """The API view of a current version, source and notes included."""
        if v.kind == PageKind.MARKDOWN:
            notes = slide_notes(v.source)
        elif MARP_MARK.match(v.source):
            notes = page_notes(v.source)
        else:
            notes = reveal_page_notes(v.source)
        return cls(**PageVersionOut.of(v).model_dump(), source=v.source, notes=notes)


class DeckOut(BaseModel):
    """A deck: title, slide size, version and its pages' current versions in order."""

    id: int
    title: str
    version: int
    slide: dict[str, int]
    manifest: dict[str, Any]
    pages: list[PageVersionOut]
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, d: DeckRow) -> DeckOut:
        """The API view of a stored deck."""
        slide = d.manifest.get("slide") or {}
        return cls(
            id=d.id,
            title=d.title,
            version=d.version,
            slide={"width": int(slide.get("width", 0)), "height": int(slide.get("height", 0))},
            manifest=d.manifest,
            pages=[PageVersionOut.of(p) for p in d.pages],
            created_at=d.created_at,
            updated_at=d.updated_at,
        )


class DeckCreatedOut(DeckOut):
    """A new deck, and the compile problems of its pages (the deck is stored all the same).

    `warnings` lists what the source used that was not carried over (a one-file Markdown
    deck's Vue components, clicks, Mermaid diagrams …), each with file, line and slide.
    """

    problems: list[ProblemOut]
    warnings: list[SourceWarning] = Field(default_factory=list)


class DeckSummary(BaseModel):
    """A deck in a list."""

    id: int
    title: str
    version: int
    created_at: datetime
    updated_at: datetime


class PageEdit(BaseModel):
    """A page edit: the new source, and whether to skip the visual (render) check."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"source": "# Agenda\n\n- Launch\n- Q&A\n"}]},
    )

    source: str = Field(min_length=1, max_length=10 * 1024 * 1024)
    kind: Literal["html", "md"] | None = Field(None, description="Defaults to the page's kind.")
    skip_visual_verification: bool = Field(
        False,
        description="Write after compiling only, without the render check; recorded in the "
        "version and in the job's events.",
    )


class PageRename(BaseModel):
    """A page's new name."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"name": "02-plan"}]})

    name: str = Field(pattern=PAGE_NAME_PATTERN)


class PageOrder(BaseModel):
    """Every page of the deck, in the order to show them."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"pages": ["02-agenda", "01-cover"]}]}
    )

    pages: list[str] = Field(min_length=1)


class DeckCopy(BaseModel):
    """The copy's title (default: the original's with " (copy)")."""

    model_config = ConfigDict(extra="forbid")

    title: str | None = Field(None, min_length=1, max_length=300)


class PageRevert(BaseModel):
    """Options of a revert (it is a new version through the write gate)."""

    model_config = ConfigDict(extra="forbid")

    skip_visual_verification: bool = False


class PageDiffOut(BaseModel):
    """A unified diff (Python's difflib) of a page's source between two versions."""

    page: str
    from_version: int
    to_version: int
    diff: str


class PageEditOut(BaseModel):
    """A written page version and the job that wrote it (`created`: the page is new)."""

    job_id: int
    created: bool = False
    version: PageVersionOut


class ScreenshotConfig(BaseModel):
    """How to screenshot a page (always at the deck's slide size)."""

    model_config = ConfigDict(extra="forbid")

    format: Literal["png", "jpeg", "webp"] = "png"
    scale: float = Field(1.0, gt=0, le=4)


class TaskRef(BaseModel):
    """A created task; follow it at `/v1/tasks/{task_id}`."""

    task_id: int
    kind: str


class ValidateOut(BaseModel):
    """A validation answer: `valid` is true exactly when `status` is `passed`."""

    valid: bool
    status: str
    summary: str
    error_code: str | None
    retryable: bool
    result: ValidationResult
    pages: dict[str, ValidationResult] = Field(default_factory=dict)
    warnings: list[SourceWarning] = Field(
        default_factory=list, description="What a Markdown deck used that was not carried over."
    )
