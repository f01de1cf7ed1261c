"""Which of Deckyard's source files one `deckyard render` runs code in (issue 31's file count).

Runs `deckyard render DECK --out OUT --format png,pdf --no-cache` once to warm the cached
database template, then once more with a profile hook (a `sitecustomize` on `PYTHONPATH`, so
the CLI and the renderer process it starts are both traced) that records every file of the
`deckyard` package in which a function (not a module's import-time code) was called. Prints
the count per component and in all, and the count outside the shared infrastructure the
screenshot count leaves out too (`db/`, `loop.py`, `config.py`, `clock.py`, `tracing/`,
`startup.py`, `migrations/`).

    .venv/bin/python bench/files_crossed.py [--slides 1] [--list]
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from marp_deck import write_decks

ROOT = Path(__file__).resolve().parent.parent
DECKYARD = str(ROOT / ".venv" / "bin" / "deckyard")
PACKAGE = ROOT / "src" / "deckyard"
SHARED = ("db/", "loop.py", "config.py", "clock.py", "tracing/", "startup.py", "migrations/")
HOOK = """
import atexit, os, sys, threading
_seen = set()
_root = {root!r}
def _hook(frame, event, arg):
    if event == "call":
        name = frame.f_code.co_filename
        if name.startswith(_root) and frame.f_code.co_name != "<module>":
            _seen.add(name[len(_root):])
sys.setprofile(_hook)
threading.setprofile(_hook)
atexit.register(lambda: open(os.path.join({out!r}, f"files-{{os.getpid()}}.txt"), "w").write(
    "\\n".join(sorted(_seen))))
"""


def component(path: str) -> str:
    """`render/control/` for `render/control/store.py`, `db/` for `db/engine.py`."""
    parts = path.split("/")
    if len(parts) > 2:
        return "/".join(parts[:2]) + "/"
    return parts[0] + ("/" if len(parts) > 1 else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slides", type=int, default=1)
    parser.add_argument("--list", action="store_true", help="print every file")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="deckyard-files-") as tmp:
        root = Path(tmp)
        deck = write_decks(args.slides, root / "decks").deckyard_folder
        hook = root / "hook"
        hook.mkdir()
        (hook / "sitecustomize.py").write_text(HOOK.format(root=f"{PACKAGE}/", out=str(hook)))
        env = {**os.environ, "XDG_CACHE_HOME": str(root / "cache")}
        cmd = [DECKYARD, "render", str(deck), "--format", "png,pdf", "--no-cache"]
        for run, extra in (("warm", {}), ("traced", {"PYTHONPATH": str(hook)})):
            done = subprocess.run(
                [*cmd, "--out", str(root / run)],
                env={**env, **extra},
                capture_output=True,
                text=True,
                timeout=600,
                check=False,
            )
            if done.returncode != 0:
                raise SystemExit(f"{run} run failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
        files: set[str] = set()
        for found in hook.glob("files-*.txt"):
            files.update(line for line in found.read_text().splitlines() if line)
    by = collections.Counter(component(f) for f in files)
    own = sorted(f for f in files if not f.startswith(SHARED))
    print(f"`deckyard render --format png,pdf` of a {args.slides}-slide deck runs code in:")
    for name, count in sorted(by.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"  {count:4}  {name}")
    print(f"  {len(files)} files in all; {len(own)} outside the shared infrastructure")
    print("  target: <= 25 (issue 31)")
    if args.list:
        print("\n".join(own))


if __name__ == "__main__":
    main()
