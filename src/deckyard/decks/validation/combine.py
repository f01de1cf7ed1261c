"""Combines per-page validation results into one result for a whole deck.

The worst page decides the deck's status, so a deck with one failed page has failed and a deck
whose renderer was down for any page is `unavailable`, never passed (Q0).
"""

from __future__ import annotations

from collections.abc import Mapping

from deckyard.decks.validation.result import (
    Stage,
    Stages,
    StageStatus,
    ValidationResult,
    ValidationStatus,
)

_RENDER_ORDER = (
    StageStatus.FAILED,
    StageStatus.UNAVAILABLE,
    StageStatus.SKIPPED,
    StageStatus.WARNING,
    StageStatus.PASSED,
)
_STATUS_ORDER = (
    ValidationStatus.FAILED,
    ValidationStatus.UNAVAILABLE,
    ValidationStatus.UNVERIFIED,
    ValidationStatus.PASSED,
)


def combine_results(results: Mapping[str, ValidationResult]) -> ValidationResult:
    """One deck-level result from per-page results keyed by page name.

    The worst page decides: failed, then unavailable, then unverified, then passed. It is
    retryable only when it is unavailable and every unavailable page is retryable.
    """
    if not results:
        raise ValueError("combine_results needs at least one page result")
    values = list(results.values())
    status = next(s for s in _STATUS_ORDER if any(r.status is s for r in values))
    worst = [name for name, r in results.items() if r.status is status]
    first = results[worst[0]]
    compile_errors = sum(r.stages.compile.errors for r in values)
    compile_ok = not any(r.stages.compile.status is StageStatus.FAILED for r in values)
    render_status = next(
        s for s in _RENDER_ORDER if any(r.stages.render.status is s for r in values)
    )
    render_pages = [name for name, r in results.items() if r.stages.render.status is render_status]
    stages = Stages(
        compile=Stage(
            status=StageStatus.PASSED if compile_ok else StageStatus.FAILED,
            summary=f"{len(values) - sum(r.stages.compile.errors > 0 for r in values)} of "
            f"{len(values)} page(s) compiled",
            errors=compile_errors,
        ),
        render=Stage(
            status=render_status,
            summary=f"{render_status.value} on {len(render_pages)} of {len(values)} page(s)",
            errors=sum(r.stages.render.errors for r in values),
            warnings=sum(r.stages.render.warnings for r in values),
            error_code=results[render_pages[0]].stages.render.error_code,
            retryable=all(r.stages.render.retryable for r in values if r.stages.render.error_code),
        ),
    )
    named = ", ".join(worst[:5]) + (", ..." if len(worst) > 5 else "")
    if status is ValidationStatus.FAILED:
        summary = f"Validation failed on {len(worst)} of {len(values)} page(s): {named}."
    elif status is ValidationStatus.UNAVAILABLE:
        summary = (
            f"Not verified: the renderer was unavailable for {len(worst)} of {len(values)} "
            f"page(s) ({first.error_code}); retry when the renderer is up."
        )
    elif status is ValidationStatus.UNVERIFIED:
        summary = f"Not verified: the render check was skipped for {len(worst)} page(s)."
    else:
        summary = f"Validation passed for all {len(values)} page(s)"
        summary += f" with {stages.render.warnings} warning(s)." if stages.render.warnings else "."
    return ValidationResult(
        status=status,
        success=all(r.success for r in values),
        retryable=status is ValidationStatus.UNAVAILABLE
        and all(r.retryable for r in values if r.status is status),
        summary=summary,
        stages=stages,
        diagnostics=[d for r in values for d in r.diagnostics],
        error_code=first.error_code,
    )
