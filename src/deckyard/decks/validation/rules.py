"""Validation results: the compile stage, the render stage, and the one predicate that decides.

A result has the shape `{status, success, retryable, summary, stages: {compile, render},
diagnostics, error_code}`. Rule Q0: when the renderer could not do the check (an infrastructure
error such as `RENDER_SERVICE_UNAVAILABLE`, `RENDER_RESULT_LOST`, `RENDER_DEADLINE_EXCEEDED`, or
a cancelled render) the render stage is `unavailable`, the result is `unavailable`, retryable,
`success` is false, and the summary never says the check passed.

Which render diagnostics fail a page, and which only warn:

* failed: uncaught page errors, failed requests, blocked requests, broken images, fonts that
  did not load, text drawn in (nearly) the colour behind it (white on white), and content
  error codes from the renderer (`RENDER_PAGE_ERROR`, ...). A compiled
  page needs no network, so any request problem means it renders differently than it should.
* warning: overflow (elements outside the slide, clipped content; one warning per slide naming
  the first element and how many more) and console errors, which are often an author's own
  logging; missing glyphs and font fallbacks; accessibility findings (axe-core's rules), unless
  `deck_accessibility_errors` makes them errors. Warnings keep the result `passed`, with the
  render stage at `warning`, for a human to look at.

`is_validation_passed` is the only place that decides whether a result passed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from deckyard.decks.errors import CompileProblem
from deckyard.decks.validation.result import (
    Diagnostic,
    DiagnosticCode,
    Severity,
    Stage,
    StageName,
    StageOutcome,
    Stages,
    StageStatus,
    ValidationErrorCode,
    ValidationResult,
    ValidationStatus,
)
from deckyard.render.protocol import (
    AccessibilityProblem,
    Diagnostics,
    ErrorKind,
    GlyphProblem,
    error_kind,
    is_retryable,
)

_RENDER_FAILURES: tuple[tuple[str, DiagnosticCode, str], ...] = (
    ("page_errors", DiagnosticCode.PAGE_ERROR, "uncaught error"),
    ("broken_images", DiagnosticCode.IMAGE_BROKEN, "image did not load"),
    ("fonts_not_loaded", DiagnosticCode.FONT_NOT_LOADED, "font did not load"),
    ("invisible_text", DiagnosticCode.INVISIBLE_TEXT, "text is invisible on its background"),
)
_COMPILE_BLOCKING = frozenset({StageStatus.FAILED, StageStatus.UNAVAILABLE, StageStatus.SKIPPED})


def compile_outcome(problems: list[CompileProblem]) -> StageOutcome:
    """The compile stage: `passed` without problems, else `failed` with one error each."""
    if not problems:
        return StageOutcome(Stage(status=StageStatus.PASSED, summary="compiled without errors"))
    diagnostics = [
        Diagnostic(
            stage=StageName.COMPILE,
            severity=Severity.ERROR,
            code=str(p.code),
            message=p.message,
            page=p.page,
            reference=p.reference,
            line=p.line,
        )
        for p in problems
    ]
    summary = f"{len(problems)} compile error(s); first: {problems[0].describe()}"
    stage = Stage(status=StageStatus.FAILED, summary=summary, errors=len(problems))
    return StageOutcome(stage, diagnostics)


def render_outcome_from_error(code: str, message: str | None = None) -> StageOutcome:
    """The render stage after the renderer answered with error `code` instead of diagnostics.

    Infrastructure and cancellation codes make the stage `unavailable` (Q0); content codes make
    it `failed`.
    """
    detail = f": {message}" if message else ""
    if error_kind(code) is ErrorKind.CONTENT:
        diagnostic = Diagnostic(
            stage=StageName.RENDER,
            severity=Severity.ERROR,
            code=code,
            message=f"the page failed to render ({code}){detail}",
        )
        stage = Stage(
            status=StageStatus.FAILED,
            summary=f"render failed: {code}{detail}",
            errors=1,
            error_code=code,
        )
        return StageOutcome(stage, [diagnostic])
    retryable = error_kind(code) is ErrorKind.CANCELLED or is_retryable(code)
    diagnostic = Diagnostic(
        stage=StageName.RENDER,
        severity=Severity.WARNING,
        code=code,
        message=f"the renderer could not check the page ({code}){detail}",
        source="infrastructure",
    )
    stage = Stage(
        status=StageStatus.UNAVAILABLE,
        summary=f"render check not performed: renderer unavailable ({code})",
        error_code=code,
        retryable=retryable,
    )
    return StageOutcome(stage, [diagnostic])


def _render_item(code: DiagnosticCode, what: str, item: str, severity: Severity) -> Diagnostic:
    return Diagnostic(
        stage=StageName.RENDER, severity=severity, code=str(code), message=f"{what}: {item}"
    )


def _glyph_items(diag: Diagnostics) -> list[Diagnostic]:
    found = []
    for glyph in diag.missing_glyphs:
        chars = ", ".join(f"{c!r} (U+{ord(c):04X})" for c in glyph.characters)
        found.append(
            _render_item(
                DiagnosticCode.MISSING_GLYPH,
                "no installed font has a glyph for",
                f"{chars} in {_where(glyph)}; font asked for: {glyph.requested} "
                f"(drawn with {', '.join(glyph.drawn_with)})",
                Severity.WARNING,
            )
        )
    for glyph in diag.font_fallbacks:
        found.append(
            _render_item(
                DiagnosticCode.FONT_FALLBACK,
                "font fallback",
                f"{_where(glyph)} asked for {glyph.requested} but was drawn with "
                f"{', '.join(glyph.drawn_with)}",
                Severity.WARNING,
            )
        )
    return found


def _where(glyph: GlyphProblem) -> str:
    return f'{glyph.element} "{glyph.text}"'


def render_outcome_from_diagnostics(
    diagnostics: Diagnostics | Mapping[str, Any], *, accessibility_errors: bool = False
) -> StageOutcome:
    """The render stage from the renderer's diagnostics (a model or its JSON form).

    Accessibility findings warn, or fail the page with `accessibility_errors`
    (`deck_accessibility_errors`).
    """
    diag = (
        diagnostics
        if isinstance(diagnostics, Diagnostics)
        else Diagnostics.model_validate(diagnostics)
    )
    found: list[Diagnostic] = []
    for attr, code, what in _RENDER_FAILURES:
        found += [_render_item(code, what, item, Severity.ERROR) for item in getattr(diag, attr)]
    for problem in diag.failed_requests:
        found.append(
            _render_item(
                DiagnosticCode.REQUEST_FAILED,
                "request failed",
                f"{problem.url} ({problem.reason})",
                Severity.ERROR,
            )
        )
    for problem in diag.blocked_requests:
        found.append(
            _render_item(
                DiagnosticCode.REQUEST_BLOCKED,
                "request blocked",
                f"{problem.url} ({problem.reason})",
                Severity.ERROR,
            )
        )
    if diag.overflow:
        # one warning per slide: the first element that overflows, and how many more do
        more = len(diag.overflow) - 1
        item = diag.overflow[0] + (f" (and {more} more element(s))" if more else "")
        found.append(
            _render_item(DiagnosticCode.OVERFLOW, "overflows the slide", item, Severity.WARNING)
        )
    found += [
        _render_item(DiagnosticCode.CONSOLE_ERROR, "console error", item, Severity.WARNING)
        for item in diag.console_errors
    ]
    a11y = Severity.ERROR if accessibility_errors else Severity.WARNING
    # one finding per rule and slide, as for overflow: the first element, and how many more
    by_rule: dict[str, list[AccessibilityProblem]] = {}
    for finding in diag.accessibility:
        by_rule.setdefault(finding.rule, []).append(finding)
    for rule, problems in by_rule.items():
        first, more = problems[0], len(problems) - 1
        item = f"{first.message}: {first.target}" + (
            f" (and {more} more element(s))" if more else ""
        )
        found.append(
            _render_item(DiagnosticCode.ACCESSIBILITY, f"accessibility ({rule})", item, a11y)
        )
    found += _glyph_items(diag)
    if diag.truncated:
        found.append(
            _render_item(
                DiagnosticCode.DIAGNOSTICS_TRUNCATED,
                "diagnostics",
                "some entries were dropped by the renderer's limits",
                Severity.INFO,
            )
        )
    errors = sum(d.severity is Severity.ERROR for d in found)
    warnings = sum(d.severity is Severity.WARNING for d in found)
    if errors:
        status, summary = StageStatus.FAILED, f"render found {errors} error(s)"
    elif warnings:
        status, summary = StageStatus.WARNING, f"rendered with {warnings} warning(s)"
    else:
        status, summary = StageStatus.PASSED, "rendered without problems"
    stage = Stage(status=status, summary=summary, errors=errors, warnings=warnings)
    return StageOutcome(stage, found)


def render_outcome_skipped(reason: str) -> StageOutcome:
    """The render stage when it was not run on purpose (compile failed, or skip requested)."""
    return StageOutcome(Stage(status=StageStatus.SKIPPED, summary=f"render skipped: {reason}"))


def _with_page(diagnostics: list[Diagnostic], page: str | None) -> list[Diagnostic]:
    if page is None:
        return diagnostics
    return [d if d.page else d.model_copy(update={"page": page}) for d in diagnostics]


def validation_result(
    compile_stage: StageOutcome, render_stage: StageOutcome, *, page: str | None = None
) -> ValidationResult:
    """Combine the two stages into a result; a failed compile forces the render stage skipped."""
    compiled = compile_stage.stage.status not in _COMPILE_BLOCKING
    if not compiled:
        render_stage = render_outcome_skipped("the page did not compile")
    render = render_stage.stage
    diagnostics = _with_page(compile_stage.diagnostics + render_stage.diagnostics, page)
    error_code: str | None = None
    retryable = success = False
    if not compiled:
        status = ValidationStatus.FAILED
        error_code = ValidationErrorCode.COMPILE_FAILED
        summary = f"Validation failed: {compile_stage.stage.summary}."
    elif render.status is StageStatus.FAILED:
        status = ValidationStatus.FAILED
        error_code = render.error_code or ValidationErrorCode.RENDER_FAILED
        summary = f"Validation failed: compiled, but {render.summary}."
    elif render.status is StageStatus.UNAVAILABLE:
        status = ValidationStatus.UNAVAILABLE
        error_code = render.error_code or ValidationErrorCode.RENDER_UNAVAILABLE
        retryable = render.retryable
        summary = (
            f"Not verified: compiled without errors, but the renderer was unavailable "
            f"({error_code}), so the visual check did not run; retry when the renderer is up."
        )
    elif render.status is StageStatus.SKIPPED:
        status = ValidationStatus.UNVERIFIED
        summary = f"Not verified: compiled without errors; {render.summary}."
    else:
        status, success = ValidationStatus.PASSED, True
        summary = (
            f"Validation passed with {render.warnings} warning(s)."
            if render.status is StageStatus.WARNING
            else "Validation passed: compiled and rendered without problems."
        )
    return ValidationResult(
        status=status,
        success=success,
        retryable=retryable,
        summary=summary,
        stages=Stages(compile=compile_stage.stage, render=render),
        diagnostics=diagnostics,
        error_code=error_code,
    )


def is_validation_passed(
    result: ValidationResult | Mapping[str, Any], require_render: bool = True
) -> bool:
    """Whether `result` lets a page be written: compiled, and rendered clean or with warnings.

    With `require_render=False` a result whose render stage was skipped also passes; a render
    stage that is `unavailable` or `failed` never does (Q0). A stored dict is read through the
    model, so a malformed one does not pass.
    """
    if not isinstance(result, ValidationResult):
        try:
            result = ValidationResult.model_validate(result)
        except ValueError:
            return False
    if result.error_code is not None:
        return False
    if result.stages.compile.status not in (StageStatus.PASSED, StageStatus.WARNING):
        return False
    render_ok = {StageStatus.PASSED, StageStatus.WARNING}
    if not require_render:
        render_ok.add(StageStatus.SKIPPED)
    if result.stages.render.status not in render_ok:
        return False
    return result.status in (ValidationStatus.PASSED, ValidationStatus.UNVERIFIED)
