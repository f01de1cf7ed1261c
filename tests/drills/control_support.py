"""Helpers for the control-plane drills: a fault proxy, a navigation site, the seed-004 gate.

The fault proxy sits between the control plane and a real renderer. It forwards every signed
call byte for byte (so signatures stay valid) and can only *delay*: it holds a real artefact it
already fetched from the renderer until the test releases it. It never invents a receipt or a
result; when its upstream is dead it answers 502, which the control plane treats as unreachable.
The navigation site delays real page loads: `/nav/<name>` is held until released (or for a fixed
time) the first time it is asked for, and served at once afterwards.
"""

from __future__ import annotations

import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

from tests.drills.support import CHROMIUM_DIR, processes

PAGE = (
    b"<html><body style='margin:0;background:#08f'><h1 style='color:#fff'>drill</h1></body></html>"
)


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        return


class NavigationSite:
    """Pages whose first load is held until released; later loads are served at once."""

    def __init__(self) -> None:
        self.gates: dict[str, threading.Event] = {}
        self.hits: dict[str, int] = {}
        self.closed = threading.Event()
        site = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return

            def do_GET(self) -> None:
                name = self.path.rsplit("/", 1)[-1]
                first = site.hits.get(name, 0) == 0
                site.hits[name] = site.hits.get(name, 0) + 1
                if first or name.startswith("always-"):
                    gate = site.gates.setdefault(name, threading.Event())
                    while not gate.wait(0.1) and not site.closed.is_set():
                        continue
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(PAGE)))
                self.end_headers()
                self.wfile.write(PAGE)

        self.server = _QuietServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.base = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def url(self, name: str) -> str:
        """The URL of page `name` (prefix `always-` to hold every load, not just the first)."""
        return f"{self.base}/nav/{name}"

    def release(self, name: str) -> None:
        """Let held loads of `name` complete."""
        self.gates.setdefault(name, threading.Event()).set()

    def close(self) -> None:
        """Release everything and stop serving."""
        self.closed.set()
        self.server.shutdown()
        self.server.server_close()
        self._thread.join()


class FaultProxy:
    """A forwarding proxy that can hold real artefacts on their way back (downloads, and
    change answers that carry artefacts inline)."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.hold_artifacts = False
        self.held = threading.Event()
        self.release = threading.Event()
        self.artifacts_served: list[str] = []
        self.held_keys: set[str] = set()
        self.posted: list[tuple[str, bytes]] = []
        self.lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                return

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                if self.command == "POST":
                    with proxy.lock:
                        proxy.posted.append((self.path, body))
                headers = {
                    k: v
                    for k, v in self.headers.items()
                    if k.lower() not in ("host", "content-length", "connection")
                }
                try:
                    resp = httpx.request(
                        self.command,
                        proxy.upstream + self.path,
                        headers=headers,
                        content=body,
                        timeout=30,
                    )
                except httpx.HTTPError:
                    self._send(502, b'{"error":"proxy: upstream unreachable"}', {})
                    return
                if self.path.endswith("/artifact") and resp.status_code == 200:
                    proxy._maybe_hold([self.path.split("/")[3]])
                elif self.path.startswith("/v1/changes") and b'"artifacts":{"' in resp.content:
                    inline = resp.json()["artifacts"]  # keyed "attempt_key/page index"
                    proxy._maybe_hold(list(dict.fromkeys(k.split("/")[0] for k in inline)))
                out = {
                    k: v
                    for k, v in resp.headers.items()
                    if k.lower() not in ("content-length", "transfer-encoding", "connection")
                }
                self._send(resp.status_code, resp.content, out)

            def _send(self, status: int, body: bytes, headers: dict[str, str]) -> None:
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_DELETE = _forward

        self.server = _QuietServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def _maybe_hold(self, keys: list[str]) -> None:
        """Hold the first artefact to come back after `hold_artifacts` was set, and every
        later one of the same attempts (a download, or a change answer carrying it) until
        `release`; `artifacts_served` records each attempt key served."""
        with self.lock:
            hold = self.hold_artifacts or (
                not self.release.is_set() and bool(self.held_keys.intersection(keys))
            )
            if self.hold_artifacts:
                self.held_keys.update(keys)
            self.hold_artifacts = False
            self.artifacts_served.extend(keys)
        if hold:
            self.held.set()
            self.release.wait(60)

    def close(self) -> None:
        """Release held artefacts and stop."""
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
        self._thread.join()


def tagged_processes(epochs: set[str]) -> list[int]:
    """Live or zombie processes started by a renderer of one of these epochs."""
    found = []
    for pid in processes():
        try:
            with open(f"/proc/{pid}/environ", "rb") as handle:
                env = handle.read().split(b"\0")
        except OSError:
            continue
        if any(f"DECKYARD_RENDERER_EPOCH={e}".encode() in env for e in epochs):
            found.append(pid)
    return found


def descendants(root: int) -> list[int]:
    """Every process below `root`."""
    table = processes()
    out: list[int] = []
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        kids = [pid for pid, (_c, _s, ppid, _e) in table.items() if ppid == parent]
        out.extend(kids)
        frontier.extend(kids)
    return out


def browsers_below(root: int) -> list[int]:
    """Chromium processes (any state) descending from `root`."""
    table = processes()
    return [
        pid
        for pid in descendants(root)
        if pid in table
        and (table[pid][3].startswith(CHROMIUM_DIR) or table[pid][0].startswith("chrom"))
    ]


def zombie_children(root: int) -> list[int]:
    """Zombie children of `root`."""
    return [pid for pid, (_c, s, ppid, _e) in processes().items() if ppid == root and s == "Z"]


def own_pid() -> int:
    """This test process."""
    return os.getpid()
