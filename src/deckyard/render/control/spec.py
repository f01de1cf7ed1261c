"""`ScreenshotSpec`: what a client may ask to be rendered, validated with field-named errors."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from deckyard.render.protocol import WaitRules


class ScreenshotSpec(BaseModel):
    """A screenshot of a self-contained HTML document or of a URL.

    Exactly one of `html` and `url`. Limits the renderer enforces from its own settings (pixel
    budget, document size) are checked there and come back as `RENDER_INVALID_INPUT`.
    """

    model_config = ConfigDict(extra="forbid")

    html: str | None = Field(None, min_length=1)
    files: dict[str, str] | None = Field(
        None,
        description="With `html`: more files (relative path -> base64) the document may load "
        "from its own origin, e.g. a built site's pages and assets; nothing else loads.",
    )
    url: str | None = Field(None, min_length=1, max_length=8192, validate_default=True)
    width: int = Field(1920, ge=1, le=16384)
    height: int = Field(1080, ge=1, le=16384)
    scale: float = Field(1.0, gt=0, le=4)
    format: Literal["png", "jpeg", "webp", "pdf"] = "png"
    quality: int | None = Field(None, ge=1, le=100)
    full_page: bool = False
    clip_selector: str | None = Field(None, min_length=1, max_length=1000)
    omit_background: bool = False
    media: Literal["screen", "print"] = "screen"
    wait: WaitRules = Field(default_factory=WaitRules)
    fail_on_page_error: bool = False

    @field_validator("url")
    @classmethod
    def _one_source(cls, url: str | None, info: ValidationInfo) -> str | None:
        html = info.data.get("html")
        if url is None and html is None:
            raise ValueError("give html or url")
        if url is not None and html is not None:
            raise ValueError("give either html or url, not both")
        if url is not None and not url.lower().startswith(("http://", "https://")):
            raise ValueError("must be an http or https URL")
        return url

    @field_validator("quality")
    @classmethod
    def _quality_format(cls, quality: int | None, info: ValidationInfo) -> int | None:
        if quality is not None and info.data.get("format") not in ("jpeg", "webp"):
            raise ValueError("applies only to jpeg and webp")
        return quality

    @field_validator("clip_selector")
    @classmethod
    def _clip_or_full(cls, selector: str | None, info: ValidationInfo) -> str | None:
        if selector is not None and info.data.get("full_page"):
            raise ValueError("excludes full_page")
        return selector

    def render_input(self) -> dict[str, Any]:
        """The renderer's `RenderInput` fields (without the per-attempt id and timeout)."""
        data = self.model_dump(mode="json", exclude={"html", "files"})
        data["document"] = self.html
        if self.files is not None:
            data["files"] = self.files
        return data

    def input_hash(self) -> str:
        """SHA-256 of the canonical render input: the same target and config hash the same."""
        canonical = json.dumps(self.render_input(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()
