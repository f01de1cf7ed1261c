"""The renderer's watchdog: kills the renderer's processes once the renderer is gone.

The renderer starts this as a child in its own session, holding the write end of a pipe to the
watchdog's stdin, and writes `pgid N` there for every Chromium it launches (Chromium's helpers
do not inherit the environment tag, but stay in the browser's process group). When the renderer
exits, however it exits (SIGKILL included), the kernel closes that pipe; the watchdog then
SIGKILLs those process groups and every process carrying the renderer's epoch tag (the
Playwright driver, Chromium's crash handlers), wherever they were re-parented, removes the
renderer's temp root, and exits. Its own session keeps it alive when a supervisor kills the
renderer's process group.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import time

from deckyard.render.processes import EPOCH_ENV, kill_groups, kill_tagged, tagged_pids


def sweep(
    tag: str, parent: int, groups: set[int], grace_seconds: float, pause_seconds: float
) -> int:
    """Kill tagged processes and the browsers' process groups until none is left.

    Gives up after `grace_seconds`; returns how many processes were signalled.
    """
    killed = 0
    deadline = time.monotonic() + grace_seconds
    while time.monotonic() < deadline:
        kill_groups(groups)
        if not tagged_pids(EPOCH_ENV, tag, exclude={parent}):
            break
        killed += kill_tagged(EPOCH_ENV, tag, exclude={parent})
        time.sleep(pause_seconds)
    return killed


def main(argv: list[str] | None = None) -> int:
    """Wait for stdin to close, then sweep the renderer's processes and temp root."""
    parser = argparse.ArgumentParser(prog="deckyard-renderer-watchdog")
    parser.add_argument("--tag", required=True)
    parser.add_argument("--parent", type=int, required=True)
    parser.add_argument("--root", required=True)
    parser.add_argument("--grace", type=float, required=True)
    args = parser.parse_args(argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    groups: set[int] = set()
    for line in sys.stdin.buffer:
        word, _, value = line.decode("ascii", "replace").strip().partition(" ")
        if word == "pgid" and value.isdigit():
            groups.add(int(value))
    sweep(args.tag, args.parent, groups, args.grace, pause_seconds=min(0.05, args.grace))
    shutil.rmtree(args.root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
