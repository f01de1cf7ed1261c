"""Validation results: rule Q0, what fails and what only warns, and the one predicate."""

from __future__ import annotations

import pytest

from deckyard.decks.errors import CompileErrorCode, CompileProblem
from deckyard.decks.validation.combine import combine_results
from deckyard.decks.validation.result import (
    DiagnosticCode,
    StageStatus,
    ValidationResult,
    ValidationStatus,
)
from deckyard.decks.validation.rules import (
    compile_outcome,
    is_validation_passed,
    render_outcome_from_diagnostics,
    render_outcome_from_error,
    render_outcome_skipped,
    validation_result,
)
from deckyard.render.protocol import Diagnostics, RenderErrorCode, RequestProblem

COMPILED = compile_outcome([])
INFRASTRUCTURE = [
    RenderErrorCode.SERVICE_UNAVAILABLE,
    RenderErrorCode.RESULT_LOST,
    RenderErrorCode.DEADLINE_EXCEEDED,
    RenderErrorCode.NO_FREE_SLOT,
    RenderErrorCode.BROWSER_CRASHED,
    RenderErrorCode.WORKER_STOPPED,
]


def _says_passed(summary: str) -> bool:
    lowered = summary.lower()
    return any(word in lowered for word in ("pass", "success", "succeeded", " ok", "通过"))


@pytest.mark.parametrize("code", INFRASTRUCTURE)
def test_q0_renderer_unavailable_is_never_passed(code: RenderErrorCode) -> None:
    result = validation_result(COMPILED, render_outcome_from_error(code, "connection refused"))
    assert result.status is ValidationStatus.UNAVAILABLE
    assert result.stages.compile.status is StageStatus.PASSED
    assert result.stages.render.status is StageStatus.UNAVAILABLE
    assert result.success is not True
    assert result.retryable is True
    assert result.error_code == code
    assert not _says_passed(result.summary)
    assert not _says_passed(result.stages.render.summary)
    assert not is_validation_passed(result)
    assert not is_validation_passed(result, require_render=False)
    dumped = result.model_dump(mode="json")
    assert dumped["status"] == "unavailable" and dumped["success"] is False
    assert not is_validation_passed(dumped)


def test_q0_an_unknown_error_code_counts_as_unavailable() -> None:
    result = validation_result(COMPILED, render_outcome_from_error("RENDER_SOMETHING_NEW"))
    assert result.status is ValidationStatus.UNAVAILABLE and not is_validation_passed(result)


def test_cancelled_render_is_unavailable_not_passed() -> None:
    result = validation_result(COMPILED, render_outcome_from_error(RenderErrorCode.CANCELLED))
    assert result.status is ValidationStatus.UNAVAILABLE and result.retryable
    assert not is_validation_passed(result, require_render=False)


def test_bad_renderer_credentials_are_unavailable_but_not_retryable() -> None:
    result = validation_result(COMPILED, render_outcome_from_error(RenderErrorCode.UNAUTHORIZED))
    assert result.status is ValidationStatus.UNAVAILABLE
    assert result.retryable is False and not is_validation_passed(result)


def test_content_error_code_fails_the_page() -> None:
    result = validation_result(
        COMPILED, render_outcome_from_error(RenderErrorCode.PAGE_ERROR, "boom")
    )
    assert result.status is ValidationStatus.FAILED
    assert result.stages.render.status is StageStatus.FAILED
    assert result.error_code == RenderErrorCode.PAGE_ERROR and not result.retryable
    assert not is_validation_passed(result)


def test_clean_render_passes() -> None:
    result = validation_result(COMPILED, render_outcome_from_diagnostics(Diagnostics()))
    assert result.status is ValidationStatus.PASSED and result.success is True
    assert result.stages.render.status is StageStatus.PASSED
    assert result.error_code is None and result.diagnostics == []
    assert is_validation_passed(result) and is_validation_passed(result, require_render=False)


@pytest.mark.parametrize(
    "diagnostics",
    [
        Diagnostics(overflow=["p at 128,1100 1664x300 (outside viewport)"]),
        Diagnostics(console_errors=["debug: something"]),
        {"overflow": ["div.slide at 0,0 1920x1080 (content clipped)"], "truncated": True},
    ],
)
def test_content_warnings_keep_passed(diagnostics: Diagnostics | dict[str, object]) -> None:
    result = validation_result(COMPILED, render_outcome_from_diagnostics(diagnostics), page="p5")
    assert result.status is ValidationStatus.PASSED and result.success is True
    assert result.stages.render.status is StageStatus.WARNING
    assert result.stages.render.warnings == 1
    assert "warning" in result.summary
    assert is_validation_passed(result)
    assert all(d.page == "p5" for d in result.diagnostics)


@pytest.mark.parametrize(
    ("diagnostics", "code"),
    [
        (Diagnostics(page_errors=["ReferenceError: x is not defined"]), DiagnosticCode.PAGE_ERROR),
        (Diagnostics(broken_images=["data:image/png;base64,AAAA"]), DiagnosticCode.IMAGE_BROKEN),
        (Diagnostics(fonts_not_loaded=["Launch Display"]), DiagnosticCode.FONT_NOT_LOADED),
        (
            Diagnostics(invisible_text=['h1 "Hi": text rgb(255,255,255) on rgb(255,255,255)']),
            DiagnosticCode.INVISIBLE_TEXT,
        ),
        (
            Diagnostics(failed_requests=[RequestProblem(url="file:///x.png", reason="net::ERR")]),
            DiagnosticCode.REQUEST_FAILED,
        ),
        (
            Diagnostics(blocked_requests=[RequestProblem(url="http://x/", reason="blocked")]),
            DiagnosticCode.REQUEST_BLOCKED,
        ),
    ],
)
def test_content_errors_fail(diagnostics: Diagnostics, code: DiagnosticCode) -> None:
    result = validation_result(COMPILED, render_outcome_from_diagnostics(diagnostics))
    assert result.status is ValidationStatus.FAILED and result.success is False
    assert result.stages.render.status is StageStatus.FAILED
    assert result.retryable is False
    assert [d.code for d in result.diagnostics] == [code]
    assert not is_validation_passed(result)


def test_compile_failure_skips_render_and_fails() -> None:
    problem = CompileProblem(CompileErrorCode.MISSING_ASSET, "no such asset", "p1", "a.png", 3)
    clean_render = render_outcome_from_diagnostics(Diagnostics())
    result = validation_result(compile_outcome([problem]), clean_render)
    assert result.status is ValidationStatus.FAILED
    assert result.stages.compile.status is StageStatus.FAILED
    assert result.stages.render.status is StageStatus.SKIPPED
    assert (result.diagnostics[0].page, result.diagnostics[0].line) == ("p1", 3)
    assert not is_validation_passed(result) and not is_validation_passed(
        result, require_render=False
    )


def test_skipped_render_passes_only_when_render_is_not_required() -> None:
    result = validation_result(COMPILED, render_outcome_skipped("skip_visual_verification"))
    assert result.status is ValidationStatus.UNVERIFIED and result.success is False
    assert not _says_passed(result.summary)
    assert not is_validation_passed(result)
    assert is_validation_passed(result, require_render=False)


def test_inconsistent_or_malformed_dicts_do_not_pass() -> None:
    good = validation_result(COMPILED, render_outcome_from_diagnostics(Diagnostics()))
    forged = good.model_dump(mode="json")
    forged["stages"]["render"]["status"] = "unavailable"
    assert not is_validation_passed(forged)
    assert not is_validation_passed({"status": "passed", "success": True})
    assert not is_validation_passed({})


def test_deck_result_takes_the_worst_page() -> None:
    passed = validation_result(COMPILED, render_outcome_from_diagnostics(Diagnostics()))
    warned = validation_result(
        COMPILED, render_outcome_from_diagnostics(Diagnostics(overflow=["x"])), page="b"
    )
    down = validation_result(COMPILED, render_outcome_from_error(RenderErrorCode.RESULT_LOST))
    failed = validation_result(
        COMPILED, render_outcome_from_diagnostics(Diagnostics(page_errors=["e"]))
    )
    ok = combine_results({"a": passed, "b": warned})
    assert ok.status is ValidationStatus.PASSED and is_validation_passed(ok)
    assert ok.stages.render.status is StageStatus.WARNING and ok.stages.render.warnings == 1
    unavailable = combine_results({"a": passed, "b": down})
    assert unavailable.status is ValidationStatus.UNAVAILABLE and unavailable.retryable
    assert unavailable.error_code == RenderErrorCode.RESULT_LOST
    assert not _says_passed(unavailable.summary) and not is_validation_passed(unavailable)
    worst = combine_results({"a": down, "b": failed})
    assert worst.status is ValidationStatus.FAILED and not worst.retryable
    assert isinstance(
        ValidationResult.model_validate(worst.model_dump(mode="json")), ValidationResult
    )
