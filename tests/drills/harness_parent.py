"""Plays a renderer's supervisor: a child subreaper that starts the renderer and reaps everything.

Usage: `python harness_parent.py <renderer command...>`. The renderer's ready line is passed to
stdout; the harness then reaps every child (the renderer and whatever is re-parented to it) until
its own stdin closes, and prints `reaped <n>` before exiting.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import subprocess
import sys
import threading
import time

PR_SET_CHILD_SUBREAPER = 36


def main() -> int:
    """Become a subreaper, start the renderer, relay its ready line, reap until stdin closes."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    assert libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    child = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE)
    assert child.stdout is not None
    sys.stdout.write(child.stdout.readline().decode())
    sys.stdout.flush()
    child.stdout.close()
    closed = threading.Event()

    def watch_stdin() -> None:
        sys.stdin.read()
        closed.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    reaped = 0
    while not closed.is_set():
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            pid = 0
        if pid:
            reaped += 1
            continue
        time.sleep(0.02)
    print(f"reaped {reaped}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
