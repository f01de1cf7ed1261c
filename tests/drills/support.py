"""Helpers for the renderer drills: a renderer subprocess, a test web server, PNG decoding."""

from __future__ import annotations

import json
import os
import select
import signal
import struct
import subprocess
import sys
import threading
import urllib.parse
import zlib
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

from deckyard.render.protocol import HmacAuth
from tests.helpers.eventually import eventually_sync

SECRET = "drill-secret-0123456789abcdef"
SESSION_ENV = "DECKYARD_DRILL_SESSION"
SESSION = os.environ.setdefault(SESSION_ENV, str(os.getpid()))
"""Inherited by every process this test session starts, so its Chromium can be told apart."""
DECKYARD = str(Path(sys.executable).with_name("deckyard"))
CHROMIUM_DIR = "/usr/lib/chromium/"


def one_page(body: dict[str, Any]) -> dict[str, Any]:
    """A single render's body (an `attempt_id` and the fields of a `RenderInput`) as the body
    of the one-page deck attempt the renderer takes for it: the render is page 0."""
    render = {k: v for k, v in body.items() if k != "attempt_id"}
    return {"attempt_id": body["attempt_id"], "pages": [{"index": 0, **render}]}


def page0(receipt: dict[str, Any]) -> dict[str, Any]:
    """Page 0 of a one-page attempt's receipt, asserting it is the only page listed."""
    pages: list[dict[str, Any]] = receipt["pages"] or []
    assert [p["index"] for p in pages] == [0], receipt
    return pages[0]


class RendererProcess:
    """A `deckyard renderer --port 0` subprocess with a signed httpx client."""

    def __init__(self, tmp_dir: Path, env: dict[str, str], slots: int = 2) -> None:
        self.tmp_dir = tmp_dir
        full_env = {
            **os.environ,
            "DECKYARD_RENDERER_SECRET": SECRET,
            "DECKYARD_RENDERER_TMP_DIR": str(tmp_dir),
            **env,
        }
        self.stderr_path = tmp_dir.parent / f"{tmp_dir.name}.stderr"
        self._stderr = self.stderr_path.open("wb")
        self.proc = subprocess.Popen(
            [DECKYARD, "renderer", "--port", "0", "--slots", str(slots)],
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=full_env,
        )
        self.ready = self._read_ready(timeout=60)
        self.url: str = self.ready["url"]
        self.client = httpx.Client(base_url=self.url, auth=HmacAuth(SECRET), timeout=60)

    def _read_ready(self, timeout: float) -> dict[str, Any]:
        assert self.proc.stdout is not None
        readable, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if readable else b""
        if not line:
            self.proc.kill()
            self.proc.wait()
            self.proc.stdout.close()
            self._stderr.close()
            raise RuntimeError(f"renderer did not start: {self.stderr_path.read_text()[-2000:]}")
        ready: dict[str, Any] = json.loads(line)
        return ready

    @property
    def root(self) -> Path:
        """The renderer's temp root."""
        return self.tmp_dir / f"dyr-{self.ready['epoch']}"

    def stop(self) -> int:
        """SIGTERM the renderer and wait for it; SIGKILL after 30 s."""
        self.client.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._stderr.close()
        return code

    def submit_one(self, body: dict[str, Any]) -> httpx.Response:
        """Post a single render (`body`: `attempt_id` and a `RenderInput`) as a one-page deck
        attempt (`one_page`)."""
        return self.client.post("/v1/deck-attempts", json=one_page(body))

    def page_artifact(self, attempt_id: str, index: int = 0) -> httpx.Response:
        """`GET` one page's artefact (page 0: a single render's)."""
        return self.client.get(f"/v1/attempts/{attempt_id}/pages/{index}/artifact")

    def wait_page(
        self, attempt_id: str, timeout: float = 30
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """The terminal receipt of a one-page attempt and its page 0 (`page0`)."""
        receipt = self.wait_terminal(attempt_id, timeout)
        return receipt, page0(receipt)

    def wait_terminal(self, attempt_id: str, timeout: float = 30) -> dict[str, Any]:
        """Poll the receipt until it is terminal."""

        def terminal() -> dict[str, Any] | None:
            receipt: dict[str, Any] = self.client.get(f"/v1/attempts/{attempt_id}").json()
            return receipt if receipt["status"] in ("succeeded", "failed", "cancelled") else None

        return eventually_sync(terminal, timeout=timeout, what=f"attempt {attempt_id} finished")


@dataclass
class SiteLog:
    """What the test web server saw."""

    paths: list[str] = field(default_factory=list)
    cookies: list[str] = field(default_factory=list)


class DrillSite:
    """A web server on 127.0.0.1 with a hanging resource, a redirect and a storage probe."""

    def __init__(self) -> None:
        self.log = SiteLog()
        self.release = threading.Event()
        site = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return

            def _send(self, status: int, body: bytes, headers: dict[str, str]) -> None:
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                site.log.paths.append(self.path)
                site.log.cookies.append(self.headers.get("Cookie") or "")
                html = {"Content-Type": "text/html"}
                if self.path == "/hang":
                    site.release.wait(60)
                    self._send(200, b"", {})
                elif self.path == "/hanging-page":
                    self._send(200, b'<p>wait</p><img src="/hang">', html)
                elif self.path == "/to-private":
                    self._send(302, b"", {"Location": "http://10.0.0.1/secret"})
                elif self.path.startswith("/page?html="):
                    page = urllib.parse.unquote(self.path.split("=", 1)[1]).encode()
                    self._send(200, page, html)
                elif self.path == "/cached.css":
                    css = {"Content-Type": "text/css", "Cache-Control": "max-age=3600"}
                    self._send(200, b"body{margin:0}", css)
                elif self.path == "/storage":
                    page = (
                        b'<link rel="stylesheet" href="/cached.css"><script>'
                        b"if (localStorage.getItem('k'))"
                        b" fetch('/saw-leftover');"
                        b"localStorage.setItem('k','v');</script><p>storage</p>"
                    )
                    self._send(200, page, {**html, "Set-Cookie": "k=v; Max-Age=3600"})
                else:
                    self._send(200, b"<p>ok</p>", html)

        class QuietServer(ThreadingHTTPServer):
            def handle_error(self, request: Any, client_address: Any) -> None:
                return

        self.server = QuietServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.base = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Release hanging requests and stop serving."""
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
        self._thread.join()


def decode_png(data: bytes) -> tuple[int, int, list[bytes], int]:
    """Decode an 8-bit non-interlaced RGB/RGBA PNG into (width, height, rows, channels)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat = 8, b""
    width = height = channels = 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and interlace == 0 and color in (2, 6)
            channels = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    rows: list[bytes] = []
    previous = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind = raw[start]
        line = bytearray(raw[start + 1 : start + 1 + stride])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            up_left = previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - up_left
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - up_left)
                pred = left if pa <= pb and pa <= pc else up if pb <= pc else up_left
                line[i] = (line[i] + pred) & 0xFF
        rows.append(bytes(line))
        previous = line
    return width, height, rows, channels


def pixel(image: tuple[int, int, list[bytes], int], x: int, y: int) -> tuple[int, int, int]:
    """The RGB value at (x, y)."""
    _, _, rows, channels = image
    row = rows[y]
    return row[x * channels], row[x * channels + 1], row[x * channels + 2]


def ink(image: tuple[int, int, list[bytes], int]) -> int:
    """How many pixels are clearly darker than white."""
    width, _height, rows, channels = image
    dark = 0
    for row in rows:
        for x in range(width):
            if sum(row[x * channels : x * channels + 3]) < 3 * 160:
                dark += 1
    return dark


def _stat_fields(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            text = handle.read()
    except OSError:
        return []
    comm = text[text.index("(") + 1 : text.rindex(")")]
    return [comm, *text.rpartition(")")[2].split()]


def processes() -> dict[int, tuple[str, str, int, str]]:
    """Every process as pid -> (comm, state, ppid, exe)."""
    table: dict[int, tuple[str, str, int, str]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        fields = _stat_fields(int(name))
        if len(fields) < 3:
            continue
        try:
            exe = os.readlink(f"/proc/{name}/exe")
        except OSError:
            exe = ""
        table[int(name)] = (fields[0], fields[1], int(fields[2]), exe)
    return table


def _ours(pid: int) -> bool:
    """Whether `pid` inherited this test session's marker (other programs run Chromium too)."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    return f"{SESSION_ENV}={SESSION}".encode() in environ.split(b"\0")


def chromium_outside(live_roots: set[int]) -> list[int]:
    """This session's Chromium processes (any state) not descending from one of `live_roots`."""
    table = processes()
    stray = []
    for pid, (comm, _state, _ppid, exe) in table.items():
        if not (exe.startswith(CHROMIUM_DIR) or comm.startswith("chrom")) or not _ours(pid):
            continue
        cursor = pid
        seen = 0
        while cursor in table and cursor not in live_roots and seen < 64:
            cursor = table[cursor][2]
            seen += 1
        if cursor not in live_roots:
            stray.append(pid)
    return stray


def zombies() -> set[int]:
    """Pids of this session's zombie processes: below this test process, or left unreaped by a
    parent that inherited this session's marker (another pytest worker's are not ours)."""
    table = processes()
    own = os.getpid()

    def ours(pid: int) -> bool:
        parent = table[pid][2]
        for _ in range(64):
            if parent == own:
                return True
            if parent not in table:
                return False
            parent = table[parent][2]
        return False

    return {
        pid
        for pid, (_c, state, ppid, _e) in table.items()
        if state == "Z" and (ours(pid) or _ours(ppid))
    }
