"""`check_image`: what is wrong with a generated image is said in words, never as a repr."""

from __future__ import annotations

import io
import struct
import zlib

import pytest
from PIL import Image

from deckyard.ai.errors import AiErrorCode
from deckyard.ai.images import check_image
from deckyard.jobs import JobError

LIMIT = 1 << 20


def png(width: int, height: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (10, 20, 30)).save(out, format="PNG")
    return out.getvalue()


def png_header_only(width: int, height: int) -> bytes:
    """A PNG signature and header declaring `width`x`height`, then an empty image: tiny bytes."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b""))
        + chunk(b"IEND", b"")
    )


def refusal(data: bytes, width: int = 64, height: int = 64) -> JobError:
    with pytest.raises(JobError) as caught:
        check_image(data, width, height, LIMIT)
    assert caught.value.retryable is False
    return caught.value


def test_a_good_png_passes() -> None:
    checked = check_image(png(64, 64), 64, 64, LIMIT)
    assert (checked.media_type, checked.extension) == ("image/png", "png")


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"not an image", "not an image file"),
        (png(64, 64)[:-40], "damaged or incomplete"),
    ],
)
def test_unreadable_bytes_are_described_without_a_repr(data: bytes, says: str) -> None:
    error = refusal(data)
    assert error.code == AiErrorCode.IMAGE_INVALID
    message = str(error)
    assert says in message
    assert "BytesIO" not in message and "object at 0x" not in message, message


@pytest.mark.parametrize("factor", [1.5, 3.0])
def test_a_decompression_bomb_is_an_invalid_image_not_a_crash(factor: float) -> None:
    # Past 1x the limit Pillow warns, past 2x it raises: both are a content refusal.
    side = int((Image.MAX_IMAGE_PIXELS * factor) ** 0.5) + 1
    error = refusal(png_header_only(side, side), side, side)
    assert error.code == AiErrorCode.IMAGE_INVALID
    assert "decompression bomb" in str(error)
