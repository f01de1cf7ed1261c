"""The shapes of a validation result: statuses, codes, stages and diagnostics.

Kept apart from `rules.py`, which holds the rules, so storage and API code can import the
shapes without the mapping logic. `ValidationResult.model_dump(mode="json")` is the stored and
served form.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class StageStatus(StrEnum):
    """How one stage ended."""

    PASSED = "passed"
    WARNING = "warning"
    UNAVAILABLE = "unavailable"
    FAILED = "failed"
    SKIPPED = "skipped"


class ValidationStatus(StrEnum):
    """How a whole validation ended.

    `unverified` means the page compiled and the render stage was skipped on purpose; it is not
    a pass unless the caller asked for compile-only checking.
    """

    PASSED = "passed"
    FAILED = "failed"
    UNAVAILABLE = "unavailable"
    UNVERIFIED = "unverified"


class StageName(StrEnum):
    """The two stages of a validation."""

    COMPILE = "compile"
    RENDER = "render"


class Severity(StrEnum):
    """How much a diagnostic matters: errors fail a stage, warnings do not."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


class DiagnosticCode(StrEnum):
    """Codes of render-stage diagnostics (compile diagnostics use `CompileErrorCode`)."""

    PAGE_ERROR = "RENDER_PAGE_EXCEPTION"
    REQUEST_FAILED = "RENDER_REQUEST_FAILED"
    REQUEST_BLOCKED = "RENDER_REQUEST_BLOCKED"
    IMAGE_BROKEN = "RENDER_IMAGE_BROKEN"
    FONT_NOT_LOADED = "RENDER_FONT_NOT_LOADED"
    OVERFLOW = "RENDER_OVERFLOW"
    INVISIBLE_TEXT = "RENDER_INVISIBLE_TEXT"
    CONSOLE_ERROR = "RENDER_CONSOLE_ERROR"
    ACCESSIBILITY = "RENDER_ACCESSIBILITY"
    MISSING_GLYPH = "RENDER_MISSING_GLYPH"
    FONT_FALLBACK = "RENDER_FONT_FALLBACK"
    DIAGNOSTICS_TRUNCATED = "RENDER_DIAGNOSTICS_TRUNCATED"


class ValidationErrorCode(StrEnum):
    """A result's `error_code` when no more specific code (such as the renderer's) applies."""

    COMPILE_FAILED = "VALIDATION_COMPILE_FAILED"
    RENDER_FAILED = "VALIDATION_RENDER_FAILED"
    RENDER_UNAVAILABLE = "VALIDATION_RENDER_UNAVAILABLE"


class Diagnostic(BaseModel):
    """One finding: which stage, how bad, a code, a message, and where when known."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    stage: StageName
    severity: Severity
    code: str
    message: str
    page: str | None = None
    reference: str | None = None
    line: int | None = None
    source: Literal["content", "infrastructure"] = "content"


class Stage(BaseModel):
    """The outcome of one stage."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    status: StageStatus
    summary: str
    errors: int = Field(0, ge=0)
    warnings: int = Field(0, ge=0)
    error_code: str | None = None
    retryable: bool = False


class Stages(BaseModel):
    """Both stages of a validation."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    compile: Stage
    render: Stage


class ValidationResult(BaseModel):
    """A page's (or a deck's) validation result, as stored with a page version and served."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    status: ValidationStatus
    success: bool
    retryable: bool
    summary: str
    stages: Stages
    diagnostics: list[Diagnostic] = Field(default_factory=list)
    error_code: str | None = None


@dataclass(frozen=True)
class StageOutcome:
    """A stage and the diagnostics it produced, before they are combined into a result."""

    stage: Stage
    diagnostics: list[Diagnostic] = field(default_factory=list)
