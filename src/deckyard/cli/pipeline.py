"""The whole deck pipeline in one process, for `deckyard render` and `deckyard validate`.

A `RenderNode` runs in process (database, job runtime, render control plane with one supervised
renderer, deck service), on an embedded SQLite in the output folder unless a database URL is
given. The deck goes through the same durable jobs as the HTTP API's publish: `deck.validate`
(every page in one deck render request: one admission, one lease, pages in parallel on the
renderer's slots), then `deck.build` and `deck.export`. A page's PNG is the one its validation
rendered (render once); `deck.screenshots` renders, again as one request, only pages without.

Exit codes: 0 when every page passed (warnings allowed), 1 when a page or artefact failed for
its content, 2 for usage errors, 3 when the renderer was unavailable (nothing was verified).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import logging
import os
import tempfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from deckyard.cli.common import CLI_SPARE_TABS, FORMATS
from deckyard.cli.fetch_remote import fetch_for_render
from deckyard.cli.output import OutputFolderError, cache_dir, finish_output, prepare_output
from deckyard.cli.render_cache import open_render_cache
from deckyard.cli.schema_template import copy_migrated
from deckyard.config import Settings
from deckyard.decks.compile.documents import compile_deck_report, compile_print_document
from deckyard.decks.compile.steps import STEP_SUFFIX, slide_name, split_step, step_deck
from deckyard.decks.errors import CompileError, DeckSourceError, DeckSourceErrorCode
from deckyard.decks.jobs.names import PDF_FORMAT
from deckyard.decks.service import DeckService
from deckyard.decks.source.deck_source import DeckSource
from deckyard.decks.source.folder import load_deck_folder
from deckyard.decks.source.limits import DeckLimits
from deckyard.decks.source.markdown_file import is_markdown_file
from deckyard.decks.validation.result import Severity, ValidationResult, ValidationStatus
from deckyard.decks.validation.rules import is_validation_passed
from deckyard.jobs import Job, JobStatus
from deckyard.outputs import OUTPUTS
from deckyard.outputs.images import MANIFEST, PNG, page_stem
from deckyard.outputs.pptx import PPTX
from deckyard.render.control.models import RENDER_REQUEST_EVENT
from deckyard.render.control.result_cache import CacheStats, RenderResultCache
from deckyard.render.processes import SPARE_TABS_ENV
from deckyard.render.protocol import ErrorKind, error_kind
from deckyard.render_node import RenderNode
from deckyard.workspaces.store import workspace_ensure

STEPPED = {name for name, output in OUTPUTS.items() if output.stepped}
"""The formats `--steps` makes a page per step of."""

if TYPE_CHECKING:
    from deckyard.cli.early_renderer import EarlyRenderer

WORKSPACE = "local"
RENDER_CACHE = "renders"
"""The render cache's folder under the user cache (`cli.render_cache`)."""


class ExitCode(IntEnum):
    """What `deckyard render` and `deckyard validate` exit with."""

    OK = 0
    CONTENT = 1
    USAGE = 2
    UNAVAILABLE = 3


@dataclass
class PageRow:
    """One page's line in the summary."""

    name: str
    status: str = "pending"
    warnings: int = 0
    seconds: float = 0.0
    cached: bool = False
    """Its render came from the render cache (an earlier run's)."""
    result: ValidationResult | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """Whether the page's validation passed (`is_validation_passed`, the one rule)."""
        return self.result is not None and is_validation_passed(self.result)


@dataclass
class RunReport:
    """Everything the summary shows, and the exit code it implies."""

    pages: list[PageRow]
    files: list[Path] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unavailable: bool = False
    pngs: dict[str, Path] = field(default_factory=dict)
    """The PNG written for each page, by page name."""
    left_out: list[str] = field(default_factory=list)
    """Pages that failed, so are in neither the PDF nor the site."""
    withheld: bool = False
    """`--strict` wrote nothing because a page failed."""
    slides: dict[str, dict[str, Any]] = field(default_factory=dict)
    """How each page became a PPTX slide (`mode`, `why`), by page name."""
    cache: CacheStats | None = None
    """What the run took from and gave to the render cache (None: not used)."""

    def manifest_pages(self, out: Path) -> list[dict[str, Any]]:
        """Each page's line in the output manifest: its status, PNG, and whether the PDF and
        the site hold it."""
        return [
            {
                "name": row.name,
                "status": str(row.status),
                "png": self.pngs[row.name].relative_to(out).as_posix()
                if row.name in self.pngs
                else None,
                "in_pdf_and_site": row.name not in self.left_out,
                **({"pptx": self.slides[row.name]} if row.name in self.slides else {}),
            }
            for row in self.pages
        ]

    @property
    def exit_code(self) -> ExitCode:
        """1 on content failures, else 3 when the renderer was unavailable, else 0."""
        if self.failures or any(p.status == ValidationStatus.FAILED for p in self.pages):
            return ExitCode.CONTENT
        if self.unavailable or any(p.status == ValidationStatus.UNAVAILABLE for p in self.pages):
            return ExitCode.UNAVAILABLE
        return ExitCode.OK


def pipeline_settings(work: Path, database_url: str | None, **overrides: Any) -> Settings:
    """Settings for an in-process run: data under `work`, one supervised renderer.

    A run renders one workspace's deck, so that workspace may use every slot. Its renderer
    keeps no spare tab unless the environment asks (`common.CLI_SPARE_TABS`).
    """
    defaults: dict[str, Any] = {"render_workspace_slot_share": 1.0}
    if SPARE_TABS_ENV not in os.environ:
        defaults["renderer_spare_tabs"] = CLI_SPARE_TABS
    return Settings.load(
        data_dir=work,
        database_url=database_url,
        renderers=1,
        migrate_on_start=True,
        background_loops=True,
        **{**defaults, **overrides},
    )


def _where(d: Any) -> str:
    parts = [d.page or ""]
    if d.line is not None:
        parts[0] += f":{d.line}"
    if d.reference:
        parts.append(f"reference {d.reference!r}")
    return ", ".join(p for p in parts if p)


def describe(result: ValidationResult) -> list[str]:
    """Readable lines for a result's errors and warnings: where (page, line, reference), what."""
    return [
        f"{d.severity.value}: {_where(d)}: {d.message} [{d.code}]"
        for d in result.diagnostics
        if d.severity in (Severity.ERROR, Severity.WARNING) and d.source == "content"
    ]


async def _ensure_workspace(service: DeckService) -> None:
    async with service.db.write_transaction() as conn:
        await workspace_ensure(service.db, conn, WORKSPACE, service.clock.now())


async def _wait_for_renderer(service: DeckService) -> bool:
    deadline = time.monotonic() + service.settings.render_renderer_start_timeout_seconds
    while time.monotonic() < deadline:
        if await service.gateway.renderer_live():
            return True
        await asyncio.sleep(service.settings.render_receipt_poll_seconds)
    return False


async def _stop_early_start(booting: asyncio.Task[None] | None, node: RenderNode) -> None:
    """Stop the renderers started ahead of a node whose own start then failed (the node
    stops only what it started)."""
    if booting is None or node.render.supervisor is None:
        return
    booting.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await booting
    await node.render.supervisor.stop()


def _seconds(job: Job) -> float:
    if job.started_at is None or job.finished_at is None:
        return 0.0
    return (job.finished_at - job.started_at).total_seconds()


@dataclass(frozen=True)
class StepRun:
    """The stored deck of a `--steps` run (a page per step) and each page's file stem."""

    deck_id: int
    stems: dict[str, str]


def _write(dest: Path, data: bytes) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(data)


class Pipeline:
    """One run over a stored deck: validate, then the artefacts asked for."""

    def __init__(
        self, service: DeckService, deck_id: int, progress: Progress, *, pdf_tagged: bool = False
    ) -> None:
        self.service = service
        self.deck_id = deck_id
        self.progress = progress
        self.pdf_tagged = pdf_tagged
        self.print_key: str | None = None
        """Where the run stored the deck's print document it compiled (None: not compiled)."""
        self.export_job: Job | None = None
        """The `deck.export` job enqueued while the pages were rendering, until `artefacts`
        takes it."""

    async def validate(self, report: RunReport, *, export_early: bool = False) -> None:
        """Validate every page in one `deck.validate` job and fill in the report's rows.

        With `export_early`, the PDF's `deck.export` job is enqueued as soon as the validation's
        deck render request exists (its `render_request` event): the print document compiles
        while the pages render, and the PDF's render request, queued behind the deck's, takes
        a slot the moment the deck's attempt gives its slots back, instead of after the
        validation's results are read and written. The deck's request is the older one, so it
        is admitted first and gets every free slot. Without a deck render (no renderer up,
        nothing compiled) no job is enqueued early; `artefacts` enqueues it as before.
        """
        bar = self.progress.add_task("validating", total=len(report.pages))
        # the deck was stored from this run's compile: the job does not compile it again
        job = await self.service.validate_deck(WORKSPACE, self.deck_id, stored=True)
        early = asyncio.create_task(self._export_once_rendering(job.id)) if export_early else None
        try:
            done = await self.service.runtime.wait(job.id)
            if early is not None:
                self.export_job = await early
        finally:
            if early is not None and not early.done():
                early.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await early
        found = await self.service.validations_of(done.id)
        seconds = await self.service.page_seconds(done.id)
        for row in report.pages:
            result = found.get(row.name)
            took = seconds.get(row.name, 0.0)
            row.seconds, row.cached = (took, False) if took is not None else (0.0, True)
            if result is None:
                row.status = ValidationStatus.FAILED
                row.notes.append(f"error: {done.error_code}: {done.error_message}")
            else:
                row.result, row.status = result, result.status
                row.warnings = result.stages.render.warnings
                row.notes.extend(describe(result))
                if result.status is ValidationStatus.UNAVAILABLE:
                    row.notes.append(f"not verified: renderer unavailable ({result.error_code})")
            self.progress.advance(bar)

    async def _export_once_rendering(self, validate_job_id: int) -> Job | None:
        async for event in self.service.runtime.events(validate_job_id, follow=True):
            if event.type == RENDER_REQUEST_EVENT:
                return await self.service.export(
                    WORKSPACE, self.deck_id, tagged=self.pdf_tagged, print_key=self.print_key
                )
        return None

    async def drop_unused_export(self) -> None:
        """Cancel the early `deck.export` job when the run did not take its PDF (the renderer
        became unavailable, or the run failed), so no job is left queued in the database."""
        job, self.export_job = self.export_job, None
        if job is not None:
            await self.service.runtime.cancel(job.id)

    async def _artefact(
        self, job: Job, dest: Path, report: RunReport, what: str, stem: Callable[[str], str]
    ) -> None:
        """Write what export job `job` made to `dest`: the file, or, for a format of a file
        per page, each page's file into the folder `dest`, named `stem(page)`."""
        done = await self.service.runtime.wait(job.id)
        if done.status != JobStatus.SUCCEEDED:
            code = done.error_code or "FAILED"
            if error_kind(code) is not ErrorKind.CONTENT and code.startswith("RENDER_"):
                report.unavailable = True
            report.failures.append(f"{what}: {code}: {done.error_message}")
            return
        found = await self.service.render.artifact_for_job(done.id)
        if found is None:
            report.failures.append(f"{what}: job {done.id} has no artefact")
            return
        result = done.result if isinstance(done.result, dict) else {}
        report.warnings.extend(f"{what}: {w}" for w in result.get("warnings") or [])
        if OUTPUTS[what].unpacked is not None:
            written = await asyncio.to_thread(_unpack, found[0], dest, stem)
            report.files.extend(written.values())
            if what == PNG.name:
                report.pngs.update(written)
        else:
            await asyncio.to_thread(_write, dest, found[0])
            report.files.append(dest)
        if what == PPTX.name:
            for slide in result.get("pages") or []:
                report.slides[str(slide["page"])] = {"mode": slide["mode"], "why": slide["why"]}

    async def artefacts(
        self,
        out: Path,
        formats: set[str],
        report: RunReport,
        site_deck_id: int | None = None,
        steps: StepRun | None = None,
    ) -> None:
        """Every output format asked for, each one `deck.export` job, written under `out`.

        They are made from the deck `site_deck_id` (the passed pages only, when some failed),
        else from the whole deck; with `steps`, a format of still pages (`stepped`) is made
        from that deck's pages, a page per step. A format of a file per page (`unpacked`: the
        pictures) is unpacked into its folder, each page under the name a run gives it.
        """
        deck = await self.service.deck(WORKSPACE, self.deck_id)
        assert deck is not None
        whole = site_deck_id or self.deck_id
        at = {page.page_name: index for index, page in enumerate(deck.pages)}
        work: list[tuple[Job, Path, str]] = []
        for name in sorted(formats & OUTPUTS.keys()):
            output = OUTPUTS[name]
            if name == PDF_FORMAT and self.export_job is not None:
                made, self.export_job = self.export_job, None  # started with the validation
            else:
                pdf = name == PDF_FORMAT
                exported = steps.deck_id if steps is not None and output.stepped else whole
                made = await self.service.export(
                    WORKSPACE,
                    exported,
                    fmt=name,
                    tagged=self.pdf_tagged and pdf,
                    stored=True,
                    print_key=self.print_key if pdf and exported == self.deck_id else None,
                )
            dest = out / (output.unpacked or output.file_name)
            work.append((made, dest, name))
        bar = self.progress.add_task("outputs", total=len(work)) if work else None

        def stem(page: str) -> str:
            if steps is not None:
                return steps.stems[page]
            return page_stem(at[page], page)

        async def one(job: Job, dest: Path, what: str) -> None:
            await self._artefact(job, dest, report, what, stem)
            if bar is not None:
                self.progress.advance(bar)

        await asyncio.gather(*(one(*w) for w in work))


def _unpack(data: bytes, folder: Path, stem: Callable[[str], str]) -> dict[str, Path]:
    """Write each page's file of a ZIP of a file per page (`outputs.images`) into `folder` as
    `stem(page)` with the file's own extension, by its `manifest.json`; the paths, by page."""
    written: dict[str, Path] = {}
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        manifest = json.loads(archive.read(MANIFEST))
        for page in manifest["pages"]:
            name, file = str(page["page"]), str(page["file"])
            dest = folder / f"{stem(name)}{PurePosixPath(file).suffix}"
            _write(dest, archive.read(file))
            written[name] = dest
    return written


def _print_document(source: DeckSource, limits: DeckLimits) -> str | None:
    """The deck's print document, None when it does not compile (the export then says why)."""
    try:
        return compile_print_document(source, limits)
    except CompileError:
        return None


async def _store_print(service: DeckService, deck_id: int, document: str | None) -> str | None:
    """Store the print document for the PDF's export; its key (None without a document)."""
    if document is None:
        return None
    key = f"decks/{WORKSPACE}/{deck_id}/print-document.html"
    await service.render.store.put(key, document.encode("utf-8"))
    return key


def _passed_only(source: DeckSource, report: RunReport) -> DeckSource | None:
    """The deck without its failed pages, None when none is left; records what is left out."""
    kept = [p for p in source.pages if p.name not in report.left_out]
    return source.model_copy(update={"pages": kept}) if kept else None


async def _store_passed(
    service: DeckService, deck_id: int, source: DeckSource, report: RunReport
) -> int | None:
    """Store the deck of the pages that passed, for the outputs; None when every page passed
    (the whole deck is used) or none did. Its pages take the pictures their validation
    rendered in deck `deck_id` (`share_pictures`): its PNGs are not rendered again."""
    report.left_out = [r.name for r in report.pages if not r.passed]
    if not report.left_out:
        return None
    passed = _passed_only(source, report)
    if passed is None:
        return None
    created = (await service.create_deck(WORKSPACE, passed)).deck_id
    await service.share_pictures(WORKSPACE, deck_id, created)
    return created


async def _store_steps(
    service: DeckService, source: DeckSource, report: RunReport, limits: DeckLimits
) -> StepRun:
    """Store the deck (its passed pages) as a page per step (`step_deck`) for `--steps`.

    Step 0 of a slide keeps the PNG name a run without `--steps` gives it (`03-agenda.png`),
    step k is `03-agenda.step-k.png`.
    """
    kept = _passed_only(source, report) or source
    stepped = await asyncio.to_thread(step_deck, kept, limits)
    compiled = await asyncio.to_thread(compile_deck_report, stepped, limits)
    created = await service.create_deck(WORKSPACE, stepped, compiled)
    at = {page.name: index for index, page in enumerate(source.pages)}
    stems: dict[str, str] = {}
    for page in stepped.pages:
        mark = split_step(page)[1]
        assert mark is not None
        slide = slide_name(page.name, mark)
        stem = page_stem(at[slide], slide)
        stems[page.name] = f"{stem}{STEP_SUFFIX}{mark.step}" if mark.step else stem
    return StepRun(created.deck_id, stems)


async def run_pipeline(
    deck_dir: Path,
    out: Path | None,
    formats: set[str],
    database_url: str | None,
    console: Console,
    early: EarlyRenderer | None = None,
    *,
    offline: bool = False,
    strict: bool = False,
    pdf_tagged: bool = False,
    steps: bool = False,
    reuse: bool = True,
) -> RunReport:
    """Load, store and check the deck; with `out`, also write the artefacts in `formats`.

    `early`, a renderer process already started, becomes the node's supervised renderer.
    Remote files the deck loads are fetched first unless `offline` (the compiler then refuses
    them). A page that fails is left out of the PDF and the site and gets no PNG, the others
    are written all the same; with `strict` nothing is written unless every page passed.
    `pdf_tagged` makes the PDF a tagged one. With `steps`, the PNGs and the PDF hold a page
    per step of each slide (`compile.steps`); the pages are validated as they are, every step
    shown. With `reuse`, renders an earlier run made of the same input (with the same code,
    Chromium, fonts and settings) come from the render cache under the user cache
    (`cli.render_cache`), and this run's renders are kept there.
    """
    earlier = prepare_output(out) if out is not None else set()
    cache = cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="run-", dir=cache) as tmp:
        work = Path(tmp)
        settings = pipeline_settings(work, database_url)
        if not settings.database_url:
            # a copy of the cached migrated template instead of migrating from nothing
            await copy_migrated(cache, settings.default_database_file)
            settings = settings.model_copy(update={"migrate_on_start": False})
        limits = DeckLimits.from_settings(settings)
        source = load_deck_folder(deck_dir, limits)
        if not offline:
            source = await fetch_for_render(source, settings, cache)
        # The deck compiles in a thread while the node starts its renderer and Chromium.
        compiling = asyncio.create_task(asyncio.to_thread(compile_deck_report, source, limits))
        # so does its print document, for the PDF's export (which then does not compile it)
        printing = None
        if out is not None and "pdf" in formats and not steps:
            printing = asyncio.create_task(asyncio.to_thread(_print_document, source, limits))
        report = RunReport([PageRow(p.name) for p in source.pages])
        report.warnings = [w.describe() for w in source.warnings]
        with Progress(
            TextColumn("{task.description:>11}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=False,
        ) as progress:
            starting = progress.add_task("renderer", total=1)
            node = RenderNode(settings)
            # The renderer (a process, then Chromium) starts while the node migrates.
            supervisor = node.render.supervisor
            if early is not None:
                if supervisor is not None:
                    supervisor.adopt(early.process, early.secret, early.name)
                    early.adopted = True
                else:
                    await early.stop(settings.render_renderer_stop_grace_seconds)
            booting = asyncio.create_task(supervisor.start()) if supervisor else None
            entered = False
            kept: RenderResultCache | None = None
            try:
                async with node:
                    entered = True
                    service = node.decks
                    # the deck is stored while Chromium starts; only its checks need a renderer
                    await _ensure_workspace(service)
                    created = await service.create_deck(WORKSPACE, source, await compiling)
                    live = await _wait_for_renderer(service)
                    if live and reuse:
                        kept = await open_render_cache(node, cache / RENDER_CACHE)
                        service.gateway.cache = kept
                    progress.update(starting, completed=1)
                    pipeline = Pipeline(service, created.deck_id, progress, pdf_tagged=pdf_tagged)
                    if printing is not None:
                        pipeline.print_key = await _store_print(
                            service, created.deck_id, await printing
                        )
                    export_early = out is not None and "pdf" in formats and not steps
                    try:
                        await pipeline.validate(report, export_early=export_early)
                        report.unavailable = not live
                        failed = report.exit_code is ExitCode.CONTENT
                        if out is None or report.exit_code is ExitCode.UNAVAILABLE:
                            pass
                        elif strict and failed:
                            report.withheld = True
                        else:
                            site_deck = await _store_passed(
                                service, created.deck_id, source, report
                            )
                            if report.left_out:
                                # the early PDF is of the whole deck, failed pages included
                                await pipeline.drop_unused_export()
                            if site_deck is not None or not report.left_out:
                                stepped = None
                                if steps and formats & STEPPED:
                                    stepped = await _store_steps(service, source, report, limits)
                                await pipeline.artefacts(out, formats, report, site_deck, stepped)
                    finally:
                        await pipeline.drop_unused_export()
            finally:
                if not entered:
                    await _stop_early_start(booting, node)
                if kept is not None:
                    report.cache = kept.stats
                    kept.close()
        if out is not None and report.files:
            report.removed = finish_output(out, report.files, earlier, report.manifest_pages(out))
        return report


def print_summary(report: RunReport, console: Console) -> None:
    """The per-page table, then every problem with its location, then the files written."""
    table = Table("page", "status", "warnings", "time", title="Deck check")
    styles = {"passed": "green", "failed": "red", "unavailable": "yellow"}
    for row in report.pages:
        style = styles.get(str(row.status), "")
        took = "cached" if row.cached else f"{row.seconds:.1f} s"
        table.add_row(row.name, f"[{style}]{row.status}[/]", str(row.warnings), took)
    console.print(table)
    for row in report.pages:
        for note in row.notes:
            console.print(f"  {row.name}: {note}", markup=False)
    for warning in report.warnings:
        console.print(f"  warning: {warning}", markup=False)
    for failure in report.failures:
        console.print(f"  failed: {failure}", markup=False)
    for path in report.files:
        console.print(f"  wrote {path}", markup=False)
    if report.slides:
        pictures = {n: s for n, s in report.slides.items() if s["mode"] == "image"}
        console.print(
            f"  pptx: {len(report.slides) - len(pictures)} editable slides, "
            f"{len(pictures)} as pictures (per slide in deckyard-manifest.json)",
            markup=False,
        )
        for name, slide in pictures.items():
            console.print(f"  pptx: {name}: picture, {slide['why']}", markup=False)
    if report.left_out and report.files:
        console.print(
            f"  left out of every output: {', '.join(report.left_out)} "
            "(failed; marked in deckyard-manifest.json)",
            markup=False,
        )
    if report.cache is not None:
        asked = report.cache.hits + report.cache.misses
        console.print(
            f"  render cache: {report.cache.hits} of {asked} renders reused from earlier runs, "
            f"{report.cache.stored} kept for the next",
            markup=False,
        )
    if report.withheld:
        console.print("  wrote nothing: --strict and a page failed", markup=False)
    for stale in report.removed:
        console.print(
            f"  removed {stale} (written by an earlier run, not by this one)", markup=False
        )
    verdicts = {
        ExitCode.OK: "every page passed",
        ExitCode.CONTENT: "content problems found (exit 1)",
        ExitCode.UNAVAILABLE: "NOT VERIFIED: the renderer was unavailable (exit 3); "
        "check `deckyard doctor` and retry",
    }
    console.print(verdicts[report.exit_code], markup=False)


def usage_problem(deck_dir: Path, wanted: set[str]) -> str | None:
    """Why the arguments cannot run, if they cannot (the CLI checked this already; callers
    that come here directly get the same answer)."""
    unknown = wanted - set(FORMATS)
    if unknown:
        return f"unknown format(s) {', '.join(sorted(unknown))}; use {','.join(FORMATS)}"
    if not deck_dir.exists():
        return f"{deck_dir} does not exist; give a deck folder or a .md file"
    html = deck_dir.suffix.lower() in (".html", ".htm")
    if deck_dir.is_file() and not is_markdown_file(deck_dir.name) and not html:
        return (
            f"{deck_dir} is a file; give a deck folder (deck.toml, pages/), a Markdown deck "
            "(.md) or a reveal.js deck's HTML file"
        )
    return None


async def run_command(
    deck_dir: Path,
    out: Path | None,
    formats: str,
    database_url: str | None,
    verbose: bool,
    early: EarlyRenderer | None = None,
    *,
    offline: bool = False,
    strict: bool = False,
    pdf_tagged: bool = False,
    steps: bool = False,
    reuse: bool = True,
) -> int:
    """Run the pipeline for the CLI and return its exit code."""
    console = Console(highlight=False)
    err = Console(stderr=True, highlight=False)
    wanted = {f.strip() for f in formats.split(",") if f.strip()}
    misuse = usage_problem(deck_dir, wanted)
    if misuse is not None:
        err.print(f"deckyard: {misuse}", markup=False)
        return ExitCode.USAGE
    logging.basicConfig(level=logging.INFO if verbose else logging.ERROR)
    try:
        report = await run_pipeline(
            deck_dir,
            out,
            wanted,
            database_url,
            console,
            early,
            offline=offline,
            strict=strict,
            pdf_tagged=pdf_tagged,
            steps=steps,
            reuse=reuse,
        )
    except OutputFolderError as exc:
        err.print(f"deckyard: {exc}", markup=False)
        return ExitCode.USAGE
    except DeckSourceError as exc:
        for problem in exc.every():
            where = problem.file or problem.field or str(deck_dir)
            err.print(f"deckyard: {where}: {problem.message} [{problem.code}]", markup=False)
        usage = exc.code is DeckSourceErrorCode.FOLDER_NOT_FOUND
        return ExitCode.USAGE if usage else ExitCode.CONTENT
    print_summary(report, console)
    return int(report.exit_code)
