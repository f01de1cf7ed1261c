"""The `--out` folder of `deckyard render`: only the artefacts and a small manifest of them.

The run's working database and artefact store live in a temporary folder under the user's
cache (`$XDG_CACHE_HOME/deckyard`, else `~/.cache/deckyard`), never in the output folder.
`deckyard-manifest.json` lists what the run wrote and each page's status (a failed page is
marked, with no PNG and not in the PDF or the site); the next run removes what an earlier run
wrote and it did not (a shorter deck leaves no stale PNGs). A non-empty folder that Deckyard
did not write is refused rather than mixed into.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

MANIFEST = "deckyard-manifest.json"
FORMAT = "deckyard-render/1"
_OLD_WORK_DIR = ".deckyard"


class OutputFolderError(Exception):
    """The output folder cannot be used (a usage error: exit 2)."""


def cache_dir() -> Path:
    """Where runs keep their working database: `$XDG_CACHE_HOME/deckyard` or `~/.cache/…`."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "deckyard"


def _listed(out: Path) -> set[str]:
    try:
        data = json.loads((out / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return set()
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, list):
        return set()
    return {str(f["path"]) for f in files if isinstance(f, dict) and "path" in f}


def prepare_output(out: Path) -> set[str]:
    """Check `out` can take this run's files; the paths an earlier run wrote there."""
    if out.exists() and not out.is_dir():
        raise OutputFolderError(f"--out {out} is a file; give a folder")
    if not out.exists():
        return set()
    entries = [p.name for p in out.iterdir()]
    ours = MANIFEST in entries or _OLD_WORK_DIR in entries
    if entries and not ours:
        raise OutputFolderError(
            f"--out {out} is not empty and was not written by deckyard; give an empty or new folder"
        )
    return _listed(out)


def finish_output(
    out: Path, written: list[Path], earlier: set[str], pages: list[dict[str, Any]] | None = None
) -> list[str]:
    """Remove what an earlier run wrote and this one did not; write the manifest.

    `pages` (each page's name, status, PNG and whether the PDF and the site hold it) goes into
    the manifest, with `complete` false when a page is not in them. Returns the stale paths
    removed, relative to `out`.
    """
    now = {p.relative_to(out).as_posix() for p in written}
    removed = []
    for stale in sorted(earlier - now):
        path = (out / stale).resolve()
        if path.is_relative_to(out.resolve()) and path.is_file():
            path.unlink()
            removed.append(stale)
    old_work = out / _OLD_WORK_DIR
    if old_work.is_dir() and not old_work.is_symlink():
        shutil.rmtree(old_work)
    for folder in sorted({p.parent for p in (out / s for s in removed)}, reverse=True):
        if folder != out and folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
    files = [
        {
            "path": p.relative_to(out).as_posix(),
            "size": p.stat().st_size,
            "sha256": hashlib.sha256(p.read_bytes()).hexdigest(),
        }
        for p in sorted(written)
    ]
    body: dict[str, Any] = {"format": FORMAT, "files": files}
    if pages is not None:
        body["complete"] = all(p["in_pdf_and_site"] for p in pages)
        body["pages"] = pages
    out.mkdir(parents=True, exist_ok=True)
    (out / MANIFEST).write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")
    return removed
