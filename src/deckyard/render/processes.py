"""Process hygiene for renderers and their supervisor: subreap, reap, kill tagged processes.

Chromium forks helpers that outlive their parent when it crashes. The renderer marks itself a
child subreaper (`PR_SET_CHILD_SUBREAPER`), so orphans are re-parented to it instead of to PID 1,
and reaps them. Every process the renderer starts inherits an environment tag
(`DECKYARD_RENDERER_EPOCH`, plus `DECKYARD_BROWSER_TAG` per browser launch); killing "every process
carrying this tag" finds them wherever they were re-parented, which is also how the watchdog
cleans up after a renderer that was itself SIGKILLed. Reading another process's environment needs
the same user (or root); a process that changed its uid or became non-dumpable escapes the scan.

It sits beside `protocol` rather than in `renderer/` because the supervisor in `control/` uses the
same calls on the renderers it spawns, and the two packages do not import each other.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import os
import signal
import sys
from collections.abc import Iterable

EPOCH_ENV = "DECKYARD_RENDERER_EPOCH"
BROWSER_ENV = "DECKYARD_BROWSER_TAG"
PR_SET_CHILD_SUBREAPER = 36
PR_SET_PDEATHSIG = 1


SPARE_TABS_ENV = "DECKYARD_RENDERER_SPARE_TABS"


def renderer_command(slots: int | None) -> list[str]:
    """The command line of a supervised renderer: `deckyard renderer` on a port it picks.

    It runs as `python -m deckyard.render.renderer`, the same renderer without the CLI's
    imports in front of it. Without `slots` it takes its slot count from its own settings.
    """
    cmd = [sys.executable, "-m", "deckyard.render.renderer", "--port", "0"]
    return cmd if slots is None else [*cmd, "--slots", str(slots)]


def renderer_env(secret: str, name: str, spare_tabs: int | None = None) -> dict[str, str]:
    """The environment of a supervised renderer: this one plus its secret, name and host (and
    its spare tabs, when its supervisor's settings say)."""
    env = {
        **os.environ,
        "DECKYARD_RENDERER_SECRET": secret,
        "DECKYARD_RENDERER_ID": name,
        "DECKYARD_RENDERER_HOST": "127.0.0.1",
    }
    if spare_tabs is not None:
        env[SPARE_TABS_ENV] = str(spare_tabs)
    return env


def die_with_parent() -> None:
    """In the forked child: ask for SIGTERM when the parent dies, even by SIGKILL.

    Without it a SIGKILLed `deckyard serve` would leave its renderers running as orphans.
    """
    libc_name = ctypes.util.find_library("c")
    if libc_name is not None:
        ctypes.CDLL(libc_name).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


async def spawn_renderer(
    slots: int | None, secret: str, name: str, spare_tabs: int | None = None
) -> asyncio.subprocess.Process:
    """Start `deckyard renderer` in a session of its own, dying with its parent; its first
    stdout line says where it listens."""
    return await asyncio.create_subprocess_exec(
        *renderer_command(slots),
        preexec_fn=die_with_parent,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        env=renderer_env(secret, name, spare_tabs),
        start_new_session=True,
    )


async def terminate_renderer(proc: asyncio.subprocess.Process, grace_seconds: float) -> bool:
    """SIGTERM a renderer, then SIGKILL its whole group after the grace, and wait for it.

    Returns False when it was still running after the grace (it ignored SIGTERM).
    """
    obeyed = True
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            async with asyncio.timeout(grace_seconds):
                await proc.wait()
        except TimeoutError:
            obeyed = False
    kill_groups([proc.pid])
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    await proc.wait()
    return obeyed


def become_subreaper() -> bool:
    """Ask the kernel to re-parent orphaned descendants to this process; False if unsupported."""
    libc_name = ctypes.util.find_library("c")
    if libc_name is None:
        return False
    libc = ctypes.CDLL(libc_name, use_errno=True)
    return int(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0


def _environ(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            return handle.read()
    except OSError:
        return b""


def _pids() -> Iterable[int]:
    for name in os.listdir("/proc"):
        if name.isdigit():
            yield int(name)


def tagged_pids(name: str, value: str, exclude: Iterable[int] = ()) -> list[int]:
    """Live processes whose initial environment holds `name=value`, minus `exclude`."""
    needle = f"{name}={value}".encode()
    skip = {os.getpid(), *exclude}
    found = []
    for pid in _pids():
        if pid in skip:
            continue
        if needle in _environ(pid).split(b"\0"):
            found.append(pid)
    return found


def kill_pids(pids: Iterable[int], sig: signal.Signals = signal.SIGKILL) -> int:
    """Send `sig` to each pid that still exists; return how many were signalled."""
    sent = 0
    for pid in pids:
        try:
            os.kill(pid, sig)
            sent += 1
        except (ProcessLookupError, PermissionError):
            continue
    return sent


def kill_groups(pgids: Iterable[int]) -> None:
    """SIGKILL every process in each process group, never this process's own group."""
    own = os.getpgid(0)
    for pgid in pgids:
        if pgid <= 1 or pgid == own:
            continue
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            continue


def browser_main_pgid(tag: str) -> int | None:
    """The process group of the Chromium launched with `DECKYARD_BROWSER_TAG=tag`.

    Chromium's helpers (zygotes, GPU, network, renderers) do not inherit the environment tag,
    but they stay in the main process's group, which Playwright makes a group of its own.
    """
    for pid in tagged_pids(BROWSER_ENV, tag):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                cmdline = handle.read()
            if b"--type=" in cmdline or b"crashpad" in cmdline:
                continue
            return os.getpgid(pid)
        except (OSError, ProcessLookupError):
            continue
    return None


def kill_tagged(name: str, value: str, exclude: Iterable[int] = ()) -> int:
    """SIGKILL every process carrying the tag; return how many were signalled."""
    return kill_pids(tagged_pids(name, value, exclude))


def _stat(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            stat = handle.read()
    except OSError:
        return []
    return stat.rpartition(")")[2].split()


def _children_of(pid: int) -> list[int]:
    children: list[int] = []
    for child in _pids():
        fields = _stat(child)
        if len(fields) > 1 and fields[1] == str(pid):
            children.append(child)
    return children


def _is_zombie(pid: int) -> bool:
    fields = _stat(pid)
    return bool(fields) and fields[0] == "Z"


def reap_adopted(protected: set[int]) -> int:
    """Reap exited children that this process did not start itself; return how many.

    Children in `protected` (the Playwright driver, the watchdog) are waited for by their own
    owners; reaping them here would steal their exit status. `waitid(WNOWAIT)` names an exited
    child without reaping it, so the common pass costs a system call or two and no scan of
    `/proc` (whose `stat` files read slowly while Chromium is busy, and the scan blocked the
    event loop for tens of milliseconds on every reap tick). Only when the exited child it names
    is protected (its owner has not waited for it yet) does the pass fall back to the scan,
    which can look past it.
    """
    reaped = 0
    while True:
        try:
            exited = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return reaped
        if exited is None or exited.si_pid == 0:
            return reaped
        if exited.si_pid in protected:
            return reaped + _reap_by_scan(protected)
        try:
            done, _ = os.waitpid(exited.si_pid, os.WNOHANG)
        except ChildProcessError:
            continue
        if not done:
            return reaped
        reaped += 1


def _reap_by_scan(protected: set[int]) -> int:
    reaped = 0
    for pid in _children_of(os.getpid()):
        if pid in protected or not _is_zombie(pid):
            continue
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            continue
        reaped += 1 if done else 0
    return reaped


def children_of(pid: int) -> list[int]:
    """Direct children of `pid`, found by scanning `/proc/*/stat`."""
    return _children_of(pid)
