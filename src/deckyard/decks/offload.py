"""`Offload`: runs CPU-bound deck work (loading a source, compiling pages) off the event loop.

Compiling is pure Python (html5lib, soupsieve, tinycss2) and holds the GIL. Run in a thread,
a 1.6 MB deck still stalled the loop: `/healthz` waited up to ~130 ms while it compiled (the
loop's thread gets the GIL back only every switch interval, and the collector's passes over
the compile's millions of objects stop every thread). So input of at least
`deck_compile_process_min_bytes` goes to a small pool of worker processes
(`deck_compile_processes`, started with `spawn` on first use, so a process that never
compiles much never starts one; each in a session of its own at `deck_compile_nice`);
anything smaller, where a process round trip costs more than the work, runs in a thread.
A worker whose parent died exits at once, whatever it was doing.

Workers are started with `spawn`, which imports the parent's main module again under another
name: a program that runs a `Node` itself must keep its top-level work under
`if __name__ == "__main__":` (the `deckyard` command and `python -m deckyard` do).

The domain's exceptions keep their codes and fields across the process boundary: their own
`__init__` takes other arguments than `args`, so the workers pickle them by state instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import os
import threading
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from multiprocessing.reduction import ForkingPickler
from typing import TYPE_CHECKING, Any, TypeVar

from deckyard.decks.errors import CompileError, DeckSourceError

if TYPE_CHECKING:
    # Not at run time: a worker imports this module before `_worker_init` has moved it to a
    # session of its own and lowered its priority; the heavy imports come after, with its
    # first call.
    from deckyard.config import Settings
    from deckyard.decks.source.deck_source import DeckSource

T = TypeVar("T")
E = TypeVar("E", bound=BaseException)

log = logging.getLogger(__name__)

_BY_STATE = (DeckSourceError, CompileError)


def _rebuild(cls: type[E], args: tuple[Any, ...], state: dict[str, Any]) -> E:
    exc = cls.__new__(cls)
    exc.args = args
    exc.__dict__.update(state)
    return exc


def _by_state(exc: BaseException) -> tuple[Any, ...]:
    return _rebuild, (type(exc), exc.args, exc.__dict__)


def _exit_with_parent() -> None:
    parent = multiprocessing.parent_process()
    if parent is not None:
        parent.join()
    os._exit(1)


def _worker_init(nice: int) -> None:
    # A session of its own puts the worker in its own scheduler autogroup (Linux): otherwise it
    # shares the API process's CPU share, and a busy machine then lets the compile starve the
    # event loop as surely as running it there. The nice value ranks it below the loop where
    # autogroups are off. Out of the API process's group, a signal to that group misses it,
    # and it holds its own end of the call queue, so it would never see the parent go: a
    # thread waits for that and ends the worker.
    os.setsid()
    threading.Thread(target=_exit_with_parent, name="deckyard-parent-watch", daemon=True).start()
    with contextlib.suppress(OSError):
        os.nice(nice)
    for cls in _BY_STATE:
        ForkingPickler.register(cls, _by_state)


def source_bytes(source: DeckSource) -> int:
    """About how much text compiling `source` parses: its pages and its theme."""
    return sum(len(p.text) for p in source.pages) + len(source.theme_css or "")


class Offload:
    """Runs a function with its arguments in a worker process or a thread, never on the loop.

    `stop()` shuts the worker processes down (waiting for work in flight); a later call starts
    new ones.
    """

    def __init__(self, settings: Settings) -> None:
        self.processes = settings.deck_compile_processes
        self.min_bytes = settings.deck_compile_process_min_bytes
        self.nice = settings.deck_compile_nice
        self._pool: ProcessPoolExecutor | None = None
        self.calls_in_processes = 0
        """Calls sent to a worker process (whatever their outcome)."""

    def _executor(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(
                self.processes,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_worker_init,
                initargs=(self.nice,),
            )
        return self._pool

    async def run(self, size: int, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)` in a worker process when `size` (bytes of input) is large, else a thread.

        `fn` and its arguments must pickle when `size` is large. A pool whose worker died
        (killed, out of memory) is replaced and the call runs once more in the new one.
        """
        if self.processes <= 0 or size < self.min_bytes:
            return await asyncio.to_thread(fn, *args)
        loop = asyncio.get_running_loop()
        for tries_left in (1, 0):
            pool = self._executor()
            self.calls_in_processes += 1
            try:
                result: T = await loop.run_in_executor(pool, fn, *args)
            except BrokenProcessPool:
                log.warning("a deck compile process died; starting new ones")
                if self._pool is pool:
                    self._pool = None
                    pool.shutdown(wait=False, cancel_futures=True)
                if not tries_left:
                    raise
                continue
            return result
        raise AssertionError("unreachable")

    async def stop(self) -> None:
        """Shut the worker processes down, once the work in flight is done."""
        pool, self._pool = self._pool, None
        if pool is not None:
            await asyncio.to_thread(pool.shutdown, True, cancel_futures=True)
