"""`deckyard renderer`: start the watchdog, the runtime and the HTTP server, and stop cleanly.

On start the renderer prints one JSON line to stdout, `{"event": "listening", "url": ...,
"renderer_id": ..., "epoch": ..., "pid": ...}`, once it accepts requests; supervisors and tests
read it to learn the port when `--port 0` was given.

SIGTERM drains it (`drain.py`): it prints `{"event": "draining", ...}`, takes no new attempts,
lets the running ones finish within `renderer_drain_timeout_seconds`, waits for their results to
be fetched, prints `{"event": "drained", ...}` and exits 0. SIGINT, a second SIGTERM, or a
SIGTERM that comes because its parent died (`die_with_parent`: nobody would fetch anything)
stop it at once: active attempts fail with `RENDER_WORKER_STOPPED`, browsers close, the temp
root is removed.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from types import FrameType

import uvicorn

from deckyard import tracing
from deckyard.config import Settings
from deckyard.render.processes import EPOCH_ENV
from deckyard.render.renderer.app import RendererRuntime, create_app
from deckyard.render.renderer.browser.pool import ChromiumNotFoundError

log = logging.getLogger("deckyard.renderer")


def generate_secret() -> str:
    """A fresh random secret suitable for `DECKYARD_RENDERER_SECRET`."""
    return secrets.token_urlsafe(32)


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP, not 0: asyncio turns TCP_NODELAY on for accepted connections only on a
    # socket that says it is TCP. Without it every response written in two pieces waited ~40 ms
    # for the client's delayed ACK (tests/unit/render/renderer/test_listening_socket.py).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    sock.set_inheritable(False)
    return sock


class _Server(uvicorn.Server):
    """uvicorn's server: SIGTERM begins a drain, other stop signals also begin the runtime's stop
    at once.

    uvicorn notices the signal at its next tick and then waits a fixed tenth of a second for
    connections to close; the runtime's stop (attempts failed, browsers killed, tabs dropped)
    runs meanwhile instead of after, a sixth of a second off every renderer's stop.
    """

    def __init__(self, config: uvicorn.Config, runtime: RendererRuntime) -> None:
        super().__init__(config)
        self._runtime = runtime
        self._loop = asyncio.get_running_loop()
        self._parent = os.getppid()
        self._drain_asked = False

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        # a signal handler may run between any two bytecodes of the loop's own work
        first = not (self._drain_asked or self._runtime.drain.draining or self.should_exit)
        if sig == signal.SIGTERM and first and os.getppid() == self._parent:
            self._drain_asked = True
            self._loop.call_soon_threadsafe(self._runtime.drain.begin)
            return
        super().handle_exit(sig, frame)
        self._loop.call_soon_threadsafe(self._runtime.begin_stop)

    def drained(self) -> None:
        """The drain is over: stop serving (the runtime stops after `serve` returns)."""
        self._drain_asked = True
        self.should_exit = True


def _announce(event: str, runtime: RendererRuntime, **extra: object) -> None:
    """Print one JSON line about the renderer's life to stdout (its supervisor reads them)."""
    line = {"event": event, "renderer_id": runtime.renderer_id, "epoch": runtime.epoch}
    print(json.dumps({**line, "pid": os.getpid(), **extra}), flush=True)


def start_watchdog(epoch: str, root: Path, settings: Settings) -> subprocess.Popen[bytes]:
    """Start the watchdog in its own session, holding its stdin; see `browser/watchdog.py`."""
    env = {k: v for k, v in os.environ.items() if k != EPOCH_ENV}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "deckyard.render.renderer.browser.watchdog",
            "--tag",
            epoch,
            "--parent",
            str(os.getpid()),
            "--root",
            str(root),
            "--grace",
            str(settings.renderer_watchdog_grace_seconds),
        ],
        stdin=subprocess.PIPE,
        env=env,
        start_new_session=True,
    )


def _tell_watchdog(watchdog: subprocess.Popen[bytes], pgid: int) -> None:
    if watchdog.stdin is not None:
        watchdog.stdin.write(f"pgid {pgid}\n".encode("ascii"))
        watchdog.stdin.flush()


def _stop_watchdog(watchdog: subprocess.Popen[bytes], settings: Settings) -> None:
    if watchdog.stdin is not None:
        watchdog.stdin.close()
    try:
        watchdog.wait(timeout=settings.renderer_watchdog_grace_seconds + 1)
    except subprocess.TimeoutExpired:
        watchdog.kill()
        watchdog.wait()


async def serve(settings: Settings) -> None:
    """Run the renderer until SIGTERM or SIGINT."""
    epoch = secrets.token_hex(8)
    base = settings.renderer_tmp_dir or Path(tempfile.gettempdir())
    root = base / f"dyr-{epoch}"
    (root / "b").mkdir(parents=True)
    os.environ[EPOCH_ENV] = epoch
    os.environ["TMPDIR"] = str(root / "b")
    watchdog = start_watchdog(epoch, root, settings)
    sock: socket.socket | None = None
    runtime: RendererRuntime | None = None
    try:
        sock = _bind(settings.renderer_host, settings.renderer_port)
        host, port = sock.getsockname()[:2]
        renderer_id = settings.renderer_id or f"{socket.gethostname()}:{port}"
        tracing.configure(settings, "renderer", node_id=renderer_id)
        runtime = RendererRuntime(
            settings,
            epoch=epoch,
            renderer_id=renderer_id,
            root=root,
            on_process_group=lambda pgid: _tell_watchdog(watchdog, pgid),
        )
        await runtime.start()
        config = uvicorn.Config(
            create_app(runtime), log_level="warning", access_log=False, lifespan="off"
        )
        server = _Server(config, runtime)

        def drained() -> None:
            _announce("drained", runtime, handed_back=runtime.drain.handed_back)
            server.drained()

        runtime.drain.on_begin = lambda: _announce("draining", runtime)
        runtime.drain.on_end = drained
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda _signum, _frame: None)
        shown = f"[{host}]" if ":" in host else host
        ready = {
            "event": "listening",
            "url": f"http://{shown}:{port}",
            "renderer_id": renderer_id,
            "epoch": epoch,
            "pid": os.getpid(),
        }
        print(json.dumps(ready), flush=True)
        await server.serve(sockets=[sock])
    finally:
        if runtime is not None:
            await runtime.stop()
        if sock is not None:
            sock.close()
        _stop_watchdog(watchdog, settings)
        shutil.rmtree(root, ignore_errors=True)


def run_renderer(settings: Settings) -> None:
    """Entry point of `deckyard renderer`; exits 2 without a secret, 1 without Chromium."""
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if not settings.renderer_secret:
        print(
            "deckyard: the renderer needs a shared secret: set DECKYARD_RENDERER_SECRET (16+ "
            "characters) or pass --secret-file; `deckyard renderer --generate-secret` prints one.",
            file=sys.stderr,
        )
        raise SystemExit(2)
    try:
        asyncio.run(serve(settings))
    except ChromiumNotFoundError as exc:
        print(f"deckyard: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    except OSError as exc:
        print(f"deckyard: cannot start the renderer: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
