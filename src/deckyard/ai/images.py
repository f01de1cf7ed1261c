"""The `ai.image` job: generate an image, check it, store it as a content-addressed deck asset.

The bytes must be a real PNG, JPEG or WebP (Pillow parses and verifies them), of exactly the
size asked for, and under the asset size limit. The asset's path is named by its SHA-256, so
storing the same image twice is one row; it is written in the job's finish compare-and-set.
"""

from __future__ import annotations

import hashlib
import io
import re
import warnings
from dataclasses import dataclass
from typing import Any

from PIL import Image, UnidentifiedImageError
from sqlalchemy.ext.asyncio import AsyncConnection

from deckyard.ai.errors import AiErrorCode, AiEvent
from deckyard.ai.provider import AiProvider
from deckyard.clock import Clock
from deckyard.config import Settings
from deckyard.db import Database
from deckyard.decks.jobs.handler_support import refused, workspace_of
from deckyard.decks.jobs.names import DeckJobErrorCode
from deckyard.decks.store import deck_asset_put, deck_get, deck_touch
from deckyard.jobs import JobContext, JobError

FORMATS = {
    "PNG": ("image/png", "png"),
    "JPEG": ("image/jpeg", "jpg"),
    "WEBP": ("image/webp", "webp"),
}
ASSET_DIR = "assets/generated"


@dataclass(frozen=True)
class CheckedImage:
    """An image that passed the checks."""

    media_type: str
    extension: str
    width: int
    height: int
    sha256: str


def parse_size(size: str) -> tuple[int, int]:
    """`"1024x768"` as (1024, 768)."""
    width, _, height = size.partition("x")
    return int(width), int(height)


def check_image(data: bytes, width: int, height: int, max_bytes: int) -> CheckedImage:
    """The image's type and hash; a `JobError` naming what is wrong otherwise (not retryable)."""
    if len(data) > max_bytes:
        raise JobError(
            AiErrorCode.IMAGE_TOO_LARGE,
            f"the image has {len(data)} bytes; the limit is {max_bytes}",
            retryable=False,
        )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as probe:
                fmt, size = probe.format, probe.size
                if fmt not in FORMATS:
                    raise JobError(
                        AiErrorCode.IMAGE_INVALID,
                        f"{fmt} is not PNG, JPEG or WebP",
                        retryable=False,
                    )
                if size != (width, height):
                    raise JobError(
                        AiErrorCode.IMAGE_WRONG_SIZE,
                        f"the image is {size[0]}x{size[1]}, not the {width}x{height} asked for",
                        retryable=False,
                    )
                probe.verify()
            with Image.open(io.BytesIO(data)) as full:
                full.load()
    except (
        OSError,
        SyntaxError,
        ValueError,
        Image.DecompressionBombWarning,
        Image.DecompressionBombError,
    ) as exc:
        raise JobError(AiErrorCode.IMAGE_INVALID, unreadable(exc), retryable=False) from exc
    media_type, extension = FORMATS[fmt]
    return CheckedImage(media_type, extension, width, height, hashlib.sha256(data).hexdigest())


def unreadable(exc: Exception) -> str:
    """What was wrong with image bytes Pillow could not read, in words.

    Pillow's own messages name the in-memory file it read from (`<_io.BytesIO object at
    0x…>`), which tells the reader nothing; that part is left out.
    """
    if isinstance(exc, UnidentifiedImageError):
        return "the answer's bytes are not an image file (no PNG, JPEG or WebP header)"
    if isinstance(exc, Image.DecompressionBombWarning | Image.DecompressionBombError):
        return "the image declares too many pixels to decode safely (a decompression bomb)"
    detail = re.sub(r"\s*<[^<>]* object at 0x[0-9a-fA-F]+>", "", str(exc)).strip()
    return "the image is damaged or incomplete" + (f": {detail}" if detail else "")


class ImageJobs:
    """The handler of `ai.image`."""

    def __init__(
        self, db: Database, settings: Settings, provider: AiProvider, clock: Clock
    ) -> None:
        self.db = db
        self.settings = settings
        self.provider = provider
        self.clock = clock

    @property
    def max_bytes(self) -> int:
        """The stricter of the image limit and the deck's asset limit."""
        return min(self.settings.ai_image_max_bytes, self.settings.deck_max_file_bytes)

    async def generate(self, ctx: JobContext) -> dict[str, Any]:
        """Generate, check and store one image; the result names its asset path."""
        workspace = workspace_of(ctx)
        deck_id = int(ctx.payload["deck_id"])
        async with self.db.read_connection() as conn:
            if await deck_get(conn, deck_id, workspace) is None:
                raise refused(DeckJobErrorCode.DECK_NOT_FOUND, f"no deck {deck_id}")
        size = str(ctx.payload["size"])
        width, height = parse_size(size)
        answer = await self.provider.image(
            str(ctx.payload["prompt"]), size, workspace_id=workspace, remaining=ctx.remaining()
        )
        await ctx.emit(AiEvent.IMAGE, {"bytes": len(answer.data), "tokens": answer.usage.as_dict()})
        image = check_image(answer.data, width, height, self.max_bytes)
        path = f"{ASSET_DIR}/{image.sha256[:32]}.{image.extension}"

        async def store(conn: AsyncConnection) -> None:
            now = self.clock.now()
            if await deck_asset_put(
                self.db, conn, deck_id, path, image.media_type, answer.data, now
            ):
                await deck_touch(conn, deck_id, now)

        ctx.on_success(store)
        return {
            "deck_id": deck_id,
            "path": path,
            "media_type": image.media_type,
            "width": width,
            "height": height,
            "size": len(answer.data),
            "sha256": image.sha256,
            "model": answer.model,
            "usage": answer.usage.as_dict(),
        }
