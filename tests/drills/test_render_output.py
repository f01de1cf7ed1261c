"""Real renders: exact sizes, pixels, CJK glyphs, formats, scale, diagnostics and isolation."""

from __future__ import annotations

import hashlib
import json
import struct
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.drills.support import (
    SECRET,
    DrillSite,
    RendererProcess,
    decode_png,
    ink,
    page0,
    pixel,
    processes,
)

pytestmark = pytest.mark.chromium

BOX_PAGE = """<html><body style="margin:0;background:#ffffff">
<div style="position:absolute;left:40px;top:30px;width:100px;height:60px;background:rgb(255,0,0)">
</div>
<div style="position:absolute;left:200px;top:30px;width:50px;height:50px;background:rgb(0,0,255)">
</div></body></html>"""


def glyph_page(text: str) -> str:
    return (
        '<html><body style="margin:0;background:#fff">'
        f'<p style="margin:0;font-size:80px;line-height:100px;color:#000">{text}</p></body></html>'
    )


def render(renderer: RendererProcess, **body: object) -> httpx.Response:
    return renderer.client.post("/v1/render", json=body)


def test_png_has_exact_size_and_pixels_at_known_coordinates(renderer: RendererProcess) -> None:
    response = render(renderer, document=BOX_PAGE, width=320, height=200)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "image/png"
    assert (
        response.headers["x-deckyard-artifact-sha256"]
        == hashlib.sha256(response.content).hexdigest()
    )
    assert int(response.headers["x-deckyard-artifact-size"]) == len(response.content)
    image = decode_png(response.content)
    assert image[:2] == (320, 200)
    assert pixel(image, 90, 60) == (255, 0, 0)
    assert pixel(image, 225, 55) == (0, 0, 255)
    assert pixel(image, 10, 150) == (255, 255, 255)


def test_device_scale_two_doubles_the_pixels(renderer: RendererProcess) -> None:
    response = render(renderer, document=BOX_PAGE, width=320, height=200, scale=2)
    image = decode_png(response.content)
    assert image[:2] == (640, 400)
    assert pixel(image, 180, 120) == (255, 0, 0)
    assert pixel(image, 450, 110) == (0, 0, 255)


def test_webp_at_scale_two_has_device_pixels_too(renderer: RendererProcess) -> None:
    response = render(renderer, document=BOX_PAGE, width=320, height=200, scale=2, format="webp")
    assert response.status_code == 200, response.text
    data = response.content
    if data[12:16] == b"VP8X":  # extended header: canvas size minus one, 24-bit little-endian
        width, height = (int.from_bytes(data[i : i + 3], "little") + 1 for i in (24, 27))
        size = (width, height)
    else:
        assert data[12:16] == b"VP8 " and data[23:26] == b"\x9d\x01\x2a"
        width, height = struct.unpack("<HH", data[26:30])
        size = (width & 0x3FFF, height & 0x3FFF)
    assert size == (640, 400)


def test_clip_selector_crops_to_the_element(renderer: RendererProcess) -> None:
    page = """<html><body style="margin:0;background:#fff">
    <div id="target" style="position:absolute;left:40px;top:30px;width:100px;height:60px;
      box-sizing:border-box;border-left:10px solid rgb(255,0,0);background:rgb(0,128,0)"></div>
    </body></html>"""
    for scale in (1, 2):
        response = render(
            renderer, document=page, width=320, height=200, scale=scale, clip_selector="#target"
        )
        assert response.status_code == 200, response.text
        image = decode_png(response.content)
        assert image[:2] == (100 * scale, 60 * scale)
        assert pixel(image, 0, 0) == (255, 0, 0)
        assert pixel(image, 9 * scale, 59 * scale) == (255, 0, 0)
        assert pixel(image, 10 * scale + 1, 0) == (0, 128, 0)
        assert pixel(image, 100 * scale - 1, 60 * scale - 1) == (0, 128, 0)
    missing = render(renderer, document=page, width=320, height=200, clip_selector="#nope")
    assert missing.status_code == 422
    assert missing.json()["error"] == "RENDER_SELECTOR_NOT_FOUND"


def test_cjk_text_renders_real_glyphs_not_tofu(renderer: RendererProcess) -> None:
    images = []
    for text in ("你", "好", "界"):
        response = render(renderer, document=glyph_page(text), width=120, height=110)
        images.append(decode_png(response.content))
    coverages = [ink(image) for image in images]
    assert all(c > 300 for c in coverages), coverages
    # Missing glyphs all fall back to the same .notdef box; real glyphs differ from each other.
    assert len({tuple(image[2]) for image in images}) == 3


@pytest.mark.parametrize(
    ("fmt", "magic"),
    [("jpeg", b"\xff\xd8\xff"), ("webp", b"RIFF"), ("pdf", b"%PDF-")],
)
def test_other_formats(renderer: RendererProcess, fmt: str, magic: bytes) -> None:
    response = render(renderer, document=BOX_PAGE, width=320, height=200, format=fmt)
    assert response.status_code == 200, response.text
    assert response.content.startswith(magic)
    if fmt == "webp":
        assert response.content[8:12] == b"WEBP"


def test_attempt_api_gives_receipt_artifact_and_is_idempotent(renderer: RendererProcess) -> None:
    body = {"attempt_id": "output-1", "document": BOX_PAGE, "width": 320, "height": 200}
    first = renderer.submit_one(body)
    assert first.status_code == 202
    assert first.json()["status"] in ("accepted", "running")
    again = renderer.submit_one(body)
    assert again.status_code == 200
    receipt, page = renderer.wait_page("output-1")
    assert (receipt["status"], page["status"]) == ("succeeded", "succeeded"), receipt
    # the attempt has no artefact fields of its own: its pages carry theirs
    assert "artifact" not in receipt and "diagnostics" not in receipt
    artifact = renderer.page_artifact("output-1")
    assert artifact.headers["x-deckyard-attempt-id"] == "output-1"
    assert hashlib.sha256(artifact.content).hexdigest() == page["artifact"]["sha256"]
    assert page["artifact"]["size"] == len(artifact.content)
    other = renderer.submit_one({**body, "width": 100})
    assert other.status_code == 409
    batch = renderer.client.get("/v1/attempts", params={"ids": "output-1,never-seen"}).json()
    assert [r["status"] for r in batch["receipts"]] == ["succeeded", "unknown"]
    caps = renderer.client.get("/v1/capabilities").json()
    assert caps["epoch"] == renderer.ready["epoch"]
    assert caps["formats"] == ["png", "jpeg", "webp", "pdf"]


def test_the_single_attempt_routes_are_gone(renderer: RendererProcess) -> None:
    body = {"attempt_id": "single-gone", "document": BOX_PAGE, "width": 320, "height": 200}
    assert renderer.client.post("/v1/attempts", json=body).status_code == 405
    assert renderer.client.get("/v1/attempts/single-gone").json()["status"] == "unknown"
    assert renderer.submit_one(body).status_code == 202
    renderer.wait_page("single-gone")
    assert renderer.client.get("/v1/attempts/single-gone/artifact").status_code == 404
    assert renderer.page_artifact("single-gone").status_code == 200


def test_sync_render_is_a_one_page_attempt_answered_from_its_page(
    renderer: RendererProcess,
) -> None:
    done = render(renderer, document=BOX_PAGE, width=320, height=200)
    assert done.status_code == 200, done.text
    attempt_id = done.headers["x-deckyard-attempt-id"]
    receipt, page = renderer.wait_page(attempt_id)
    assert (receipt["status"], page["status"]) == ("succeeded", "succeeded"), receipt
    assert page["artifact"]["sha256"] == done.headers["x-deckyard-artifact-sha256"]
    assert page["artifact"]["size"] == int(done.headers["x-deckyard-artifact-size"])

    page_html = '<html><body><p id="here">x</p></body></html>'
    failed = render(renderer, document=page_html, width=320, height=200, clip_selector="#nope")
    assert failed.status_code == 422, failed.text
    error = failed.json()
    assert error["error"] == "RENDER_SELECTOR_NOT_FOUND" and "#nope" in error["message"]
    attempt_id = failed.headers["x-deckyard-attempt-id"]
    assert error["receipt"]["attempt_id"] == attempt_id
    failed_page = page0(error["receipt"])
    assert (failed_page["status"], failed_page["error_code"]) == (
        "failed",
        "RENDER_SELECTOR_NOT_FOUND",
    )
    assert failed_page["message"] == error["message"]
    assert failed_page["diagnostics"]["timings"]["total_ms"] > 0
    assert renderer.page_artifact(attempt_id).status_code == 404

    checked = render(renderer, document=BOX_PAGE, width=320, height=200, capture=False)
    # no picture asked for: nothing to answer with, as before
    assert checked.status_code == 404, checked.text
    assert checked.json()["error"] == "RENDER_RESULT_LOST"


def test_a_deck_page_without_capture_succeeds_with_its_diagnostics_only(
    renderer: RendererProcess,
) -> None:
    checked = '<html><body><p>checked</p><script>console.error("seen")</script></body></html>'
    pages = [
        {"index": 0, "document": checked, "width": 320, "height": 200, "capture": False},
        {"index": 1, "document": BOX_PAGE, "width": 320, "height": 200},
    ]
    body = {"attempt_id": "no-capture-1", "pages": pages}
    assert renderer.client.post("/v1/deck-attempts", json=body).status_code == 202
    receipt = renderer.wait_terminal("no-capture-1")
    assert (receipt["status"], receipt["error_code"]) == ("succeeded", None), receipt
    first, second = receipt["pages"]
    assert (first["status"], first["error_code"], first["artifact"]) == ("succeeded", None, None)
    assert "seen" in first["diagnostics"]["console_errors"]
    assert first["diagnostics"]["timings"]["capture_ms"] == 0
    assert second["status"] == "succeeded" and second["artifact"]["format"] == "png"
    assert renderer.page_artifact("no-capture-1", 0).status_code == 404
    image = decode_png(renderer.page_artifact("no-capture-1", 1).content)
    assert pixel(image, 90, 60) == (255, 0, 0)


def test_diagnostics_report_page_problems(renderer: RendererProcess) -> None:
    page = """<html><body style="margin:0">
    <img src="http://example.com/missing.png">
    <div id="wide" style="position:absolute;left:0;top:0;width:900px;height:10px"></div>
    <script>console.error("boom in console"); setTimeout(() => { throw new Error("kaput") });
    </script></body></html>"""
    body = {"attempt_id": "diag-1", "document": page, "width": 400, "height": 300}
    body["wait"] = {"delay_ms": 100}
    assert renderer.submit_one(body).status_code == 202
    diagnostics = renderer.wait_page("diag-1")[1]["diagnostics"]
    assert "boom in console" in diagnostics["console_errors"]
    assert any("kaput" in e for e in diagnostics["page_errors"])
    assert [b["url"] for b in diagnostics["blocked_requests"]] == ["http://example.com/missing.png"]
    assert diagnostics["broken_images"] == ["http://example.com/missing.png"]
    assert any(o.startswith("div#wide") for o in diagnostics["overflow"])
    assert diagnostics["timings"]["capture_ms"] > 0


def test_text_in_its_background_colour_is_reported_as_invisible(
    renderer: RendererProcess,
) -> None:
    page = """<html><body style="margin:0;background:#fff">
    <section style="background:rgb(250,250,250)"><h1 style="color:#fff">White on white</h1>
    <p style="color:#222">Readable text</p></section>
    <p style="color:rgba(0,0,0,0.02)">Almost transparent</p>
    <div style="position:relative;height:60px">
      <img src="data:image/gif;base64,R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7"
           style="position:absolute;inset:0;width:100%;height:100%">
      <p style="position:relative;color:#fff">White over a picture: unknown, not reported</p>
    </div>
    <p hidden style="color:#fff">Hidden is not shown</p>
    <div style="pointer-events:none;background:#111;color:#fff">
      <span>White on black where hit-testing is off (reveal.js's interactive backgrounds)</span>
      <b style="color:#111">Black on black there too</b></div></body></html>"""
    body = {"attempt_id": "contrast-1", "document": page, "width": 600, "height": 400}
    assert renderer.submit_one(body).status_code == 202
    invisible = renderer.wait_page("contrast-1")[1]["diagnostics"]["invisible_text"]
    assert len(invisible) == 3, invisible
    assert invisible[0].startswith('h1 "White on white": text rgb(255,255,255) on rgb(250,250,250)')
    assert invisible[1].startswith('p "Almost transparent"')
    assert invisible[2].startswith('b "Black on black there too": text rgb(17,17,17) on rgb(17,')


def test_fresh_context_per_attempt_leaks_nothing(
    renderer: RendererProcess, site: DrillSite
) -> None:
    start = len(site.log.paths)
    for attempt in ("leak-1", "leak-2"):
        body = {"attempt_id": attempt, "url": f"{site.base}/storage", "width": 200, "height": 100}
        body["wait"] = {"until": "networkidle"}
        assert renderer.submit_one(body).status_code == 202
        receipt, page = renderer.wait_page(attempt)
        assert (receipt["status"], page["status"]) == ("succeeded", "succeeded"), receipt
    paths = site.log.paths[start:]
    cookies = site.log.cookies[start:]
    assert "/saw-leftover" not in paths
    assert paths.count("/cached.css") == 2, paths
    storage_cookies = [c for p, c in zip(paths, cookies, strict=True) if p == "/storage"]
    assert storage_cookies == ["", ""], storage_cookies


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"document": "x", "width": 0}, "width"),
        ({"document": "x", "width": 100_000}, "width"),
        ({"document": "x", "scale": 50}, "scale"),
        ({"document": "x", "format": "gif"}, "format"),
        ({"document": "x", "quality": 50}, "body"),
        ({"document": "x", "url": "http://example.com"}, "body"),
        ({"document": "x", "timeout_seconds": 100_000}, "timeout_seconds"),
        ({"document": "x", "wait": {"until": "forever"}}, "wait.until"),
        ({"document": "x", "surprise": 1}, "surprise"),
        ({"url": "not a url"}, "url"),
    ],
)
def test_bad_inputs_get_422_naming_the_field(
    renderer: RendererProcess, body: dict[str, object], field: str
) -> None:
    response = renderer.client.post("/v1/render", json=body)
    assert response.status_code == 422, response.text
    assert response.json()["field"] == field
    attempt = renderer.submit_one({"attempt_id": "bad!id", "document": "x"})
    assert attempt.status_code == 422
    assert attempt.json()["field"] == "attempt_id"
    garbage = renderer.client.post("/v1/deck-attempts", content=b"{not json")
    assert garbage.status_code == 422


def test_unsigned_wrong_and_stale_requests_get_401(renderer: RendererProcess) -> None:
    plain = httpx.Client(base_url=renderer.url)
    try:
        assert plain.get("/healthz").status_code == 200
        assert plain.get("/v1/capabilities").status_code == 401
        assert plain.post("/v1/render", json={"document": "x"}).status_code == 401
        wrong = {"X-Deckyard-Timestamp": "1", "X-Deckyard-Signature": "v1=00"}
        assert plain.get("/v1/capabilities", headers=wrong).status_code == 401
        from deckyard.render.protocol import sign

        stale_ts = "1000000000"
        stale = {
            "X-Deckyard-Timestamp": stale_ts,
            "X-Deckyard-Signature": sign(SECRET, "GET", b"/v1/capabilities", stale_ts, b""),
        }
        response = plain.get("/v1/capabilities", headers=stale)
        assert response.status_code == 401
        assert "skew" in response.json()["message"]
    finally:
        plain.close()


# Reports, through the console, every place a previous document could have left state in.
READER = """<html><body><script>
(async () => {
  const permissions = {};
  for (const name of ['geolocation', 'notifications', 'camera', 'microphone']) {
    try { permissions[name] = (await navigator.permissions.query({name})).state; }
    catch (e) { permissions[name] = 'unsupported'; }
  }
  const state = {
    url: location.href, cookie: document.cookie, local: localStorage.length,
    session: sessionStorage.length, databases: (await indexedDB.databases()).map((d) => d.name),
    name: window.name, history: history.length, leftover: typeof window.leftover,
    notification: Notification.permission, permissions,
  };
  console.error('STATE ' + JSON.stringify(state));
  window.done = true;
})();
</script></body></html>"""

# Leaves state everywhere it can, including from its own unload handler and a popup.
WRITER = """<html><body><script>
document.cookie = 'k=v; max-age=3600';
localStorage.setItem('k', 'v');
sessionStorage.setItem('k', 'v');
window.name = 'secret';
window.leftover = 1;
history.pushState({}, '', '#moved');
addEventListener('pagehide', () => localStorage.setItem('late', '1'));
const popup = window.open('about:blank');
if (popup) popup.document.write('<p>popup</p>');
Notification.requestPermission();
const open = indexedDB.open('leak', 1);
open.onupgradeneeded = () => open.result.createObjectStore('s');
open.onsuccess = () => {
  const tx = open.result.transaction('s', 'readwrite');
  tx.objectStore('s').put('v', 'k');
  tx.oncomplete = () => { window.done = true; };
};
</script></body></html>"""


def renderer_processes(renderer: RendererProcess) -> set[int]:
    """Pids of Chromium renderer processes (one per live tab) under this renderer."""
    table = processes()
    found = set()
    for pid in table:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"--type=renderer" not in cmdline or b"--extension-process" in cmdline:
            continue
        cursor = pid
        while cursor in table and cursor != renderer.proc.pid:
            cursor = table[cursor][2]
        if cursor == renderer.proc.pid:
            found.add(pid)
    return found


def document_state(renderer: RendererProcess, attempt_id: str, document: str) -> str:
    body = {"attempt_id": attempt_id, "document": document, "width": 200, "height": 100}
    body["wait"] = {"expression": "window.done === true"}
    assert renderer.submit_one(body).status_code == 202
    receipt, page = renderer.wait_page(attempt_id)
    assert (receipt["status"], page["status"]) == ("succeeded", "succeeded"), receipt
    return " ".join(page["diagnostics"]["console_errors"])


def test_reused_document_tab_is_reset_between_renders(one_tab: RendererProcess) -> None:
    before = document_state(one_tab, "reuse-before", READER)
    assert before.startswith("STATE "), before
    fresh = json.loads(before.removeprefix("STATE "))
    assert fresh["url"] == "http://document.deckyard.invalid/"
    assert (fresh["cookie"], fresh["local"], fresh["databases"]) == ("", 0, [])
    processes_before = renderer_processes(one_tab)
    document_state(one_tab, "reuse-writer", WRITER)
    after = document_state(one_tab, "reuse-after", READER)
    # The same renderer process served all three renders: the tab was reused, not replaced.
    assert renderer_processes(one_tab) == processes_before
    assert after == before


PRINT_STYLED = """<html><head><style>
body{margin:0;background:rgb(0,0,255)} @media print{body{background:rgb(255,0,0)}}
</style></head><body><p>media</p><script>document.title = "scripted"</script></body></html>"""


def pdf_pixel(pdf: bytes, tmp_path: Path) -> tuple[int, ...]:
    """The colour at the middle of the PDF's first page, as poppler draws it."""
    (tmp_path / "page.pdf").write_bytes(pdf)
    subprocess.run(
        ["pdftoppm", "-png", "-r", "20", "-singlefile", "page.pdf", "page"],
        cwd=tmp_path,
        check=True,
        timeout=60,
    )
    image = decode_png((tmp_path / "page.png").read_bytes())
    return pixel(image, image[0] // 2, image[1] // 2)


def test_every_render_gets_the_media_it_asks_for_on_tabs_used_before(
    renderer: RendererProcess, tmp_path: Path
) -> None:
    # A scripted page resets its tab after it, and the renderer keeps a few tabs: by the later
    # renders of each kind, each lands on a tab reset after a render with the same media.
    for turn in range(5):
        printed = render(
            renderer, document=PRINT_STYLED, width=320, height=200, format="pdf", media="screen"
        )
        assert printed.status_code == 200, printed.text
        assert pdf_pixel(printed.content, tmp_path) == (0, 0, 255), turn
    for turn in range(5):
        shot = render(renderer, document=PRINT_STYLED, width=320, height=200, media="print")
        assert shot.status_code == 200, shot.text
        assert pixel(decode_png(shot.content), 160, 100) == (255, 0, 0), turn
