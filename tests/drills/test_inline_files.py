"""A document's large `data:` fonts and images render as they would inline, served by URL."""

from __future__ import annotations

import base64
import os
import struct
import zlib
from pathlib import Path

import pytest

from tests.drills.support import RendererProcess, decode_png, ink, pixel

pytestmark = pytest.mark.chromium

FONT = Path(__file__).resolve().parents[2] / "examples/launch-deck/assets/fonts"
FONT_FILE = FONT / "NotoSerifDisplay-Italic.ttf"


def font_page(src: str, family: str = "Inline Display") -> str:
    return (
        f'<html><head><style>@font-face {{ font-family: "Inline Display"; src: url("{src}"); }}'
        "p { margin: 0; font-size: 64px; line-height: 80px; color: #000;"
        f' font-family: "{family}", monospace; }}</style></head>'
        "<body style='margin:0;background:#fff'><p>Launch Wafflz</p></body></html>"
    )


def png(width: int, height: int, left: tuple[int, int, int]) -> bytes:
    """An RGB PNG: the left half one colour, the right half noise (so it does not compress)."""
    noise = os.urandom(width * height * 3)
    rows = b""
    for y in range(height):
        half = bytes(left) * (width // 2)
        rows += b"\x00" + half + noise[y * width * 3 : y * width * 3 + (width - width // 2) * 3]

    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = zlib.crc32(kind + body)
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows, 0))
        + chunk(b"IEND", b"")
    )


def shot(renderer: RendererProcess, document: str) -> tuple[bytes, dict[str, object]]:
    attempt = f"inline-{os.urandom(6).hex()}"
    body = {"attempt_id": attempt, "document": document, "width": 640, "height": 100}
    accepted = renderer.submit_one(body)
    assert accepted.status_code in (200, 202), accepted.text
    receipt, page = renderer.wait_page(attempt)
    assert (receipt["status"], page["status"]) == ("succeeded", "succeeded"), receipt
    data = renderer.page_artifact(attempt).content
    return data, page["diagnostics"]


def test_a_large_data_font_renders_exactly_as_inline_and_loads_nothing_else(
    renderer: RendererProcess,
) -> None:
    encoded = base64.b64encode(FONT_FILE.read_bytes()).decode()
    served, diagnostics = shot(renderer, font_page(f"data:font/ttf;base64,{encoded}"))
    # An escaped line break (a CSS string continuation, which CSS drops) inside the payload
    # keeps it out of the rewrite: Chromium parses this one inline.
    split = encoded[:64] + "\\\n" + encoded[64:]
    inline, _ = shot(renderer, font_page(f"data:font/ttf;base64,{split}"))
    fallback, _ = shot(renderer, font_page("data:font/ttf;base64,AAAA", family="Nope"))
    assert diagnostics["fonts_not_loaded"] == []
    assert diagnostics["blocked_requests"] == [] and diagnostics["failed_requests"] == []
    assert decode_png(served)[2] == decode_png(inline)[2]
    assert decode_png(served)[2] != decode_png(fallback)[2]  # the font really was used
    assert ink(decode_png(served)) > 0


def test_a_large_data_image_shows_and_a_broken_one_is_named_by_its_data_uri(
    renderer: RendererProcess,
) -> None:
    picture = base64.b64encode(png(200, 60, (0, 128, 0))).decode()
    assert len(picture) > 32 * 1024
    garbage = base64.b64encode(os.urandom(40_000)).decode()
    document = (
        "<html><body style='margin:0;background:#fff'>"
        f"<img src='data:image/png;base64,{picture}' style='display:block'>"
        f"<img src='data:image/png;base64,{garbage}' style='width:10px;height:10px'>"
        "</body></html>"
    )
    data, diagnostics = shot(renderer, document)
    assert pixel(decode_png(data), 20, 30) == (0, 128, 0)
    broken = diagnostics["broken_images"]
    assert isinstance(broken, list) and len(broken) == 1, broken
    assert broken[0].startswith(f"data:image/png;base64,{garbage[:16]}"), broken
    assert diagnostics["blocked_requests"] == []
