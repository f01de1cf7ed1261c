"""`deckyard render` run again: unchanged pages come from the render cache, changed ones and
the PDF of a changed deck are rendered, and the files are the same as a full render's."""

from __future__ import annotations

import re
import shutil
import sqlite3
import subprocess
from contextlib import closing
from pathlib import Path

import pytest

from tests.e2e.conftest import DECKYARD, clean_env
from tests.helpers.decks import EXAMPLE

pytestmark = [pytest.mark.chromium, pytest.mark.processes]

REUSED = re.compile(r"render cache: (\d+) of (\d+) renders reused from earlier runs, (\d+) kept")


def render(tmp_path: Path, deck: Path, name: str, *more: str) -> tuple[str, Path, Path]:
    """One run (its own output folder and database); its stdout, output and database."""
    out, db = tmp_path / name, tmp_path / f"{name}.db"
    env = clean_env(
        tmp_path,
        XDG_CACHE_HOME=str(tmp_path / "cache"),
        DECKYARD_RENDER_RESULT_CACHE_MAX_BYTES=str(200 * 1024 * 1024),
    )
    database = f"sqlite+aiosqlite:///{db}"
    args = ["render", str(deck), "--out", str(out), "--format", "png,pdf", "--database", database]
    done = subprocess.run(
        [*DECKYARD, *args, *more],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "every page passed" in done.stdout
    return done.stdout, out, db


def reused(stdout: str) -> tuple[int, int, int]:
    found = REUSED.search(stdout)
    assert found is not None, stdout
    hits, asked, kept = (int(n) for n in found.groups())
    return hits, asked, kept


def pngs(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((out / "pages").glob("*.png"))}


def rendered_pages(db: Path) -> int:
    """Pages this run sent to the renderer (every request has its pages: one for a single
    render)."""
    with closing(sqlite3.connect(db)) as conn:
        return int(conn.execute("SELECT count(*) FROM render_pages").fetchone()[0])


def pdf_pages(path: Path) -> int:
    return len(re.findall(rb"/Type\s*/Page(?![s\w])", path.read_bytes()))


def test_a_second_run_renders_only_what_changed(tmp_path: Path) -> None:
    deck = tmp_path / "deck"
    shutil.copytree(EXAMPLE, deck)
    pages = len(list((deck / "pages").iterdir()))

    first, out1, db1 = render(tmp_path, deck, "first")
    assert reused(first) == (0, pages + 1, pages + 1)  # every page and the PDF, kept
    assert rendered_pages(db1) == pages + 1
    assert "05-fine-print" in first and "RENDER_OVERFLOW" in first

    # the same deck again: nothing is rendered, and the run says the same about every page
    second, out2, db2 = render(tmp_path, deck, "second")
    assert reused(second) == (pages + 1, pages + 1, 0)
    assert rendered_pages(db2) == 0
    assert "RENDER_OVERFLOW" in second  # the kept findings, as the render found them
    assert len(re.findall(r"\bcached\b", second)) == pages  # no render time of this run's
    assert pngs(out2) == pngs(out1)
    assert pdf_pages(out2 / "deck.pdf") == pages

    # one page changed: that page and the PDF (of the whole deck) are rendered, nothing else
    agenda = next((deck / "pages").glob("02-*"))
    agenda.write_text(agenda.read_text(encoding="utf-8") + "\n\nOne more line.\n")
    third, out3, db3 = render(tmp_path, deck, "third")
    assert reused(third) == (pages - 1, pages + 1, 2)
    assert len(re.findall(r"\bcached\b", third)) == pages - 1
    assert rendered_pages(db3) == 2
    before, after = pngs(out1), pngs(out3)
    changed = {name for name in before if before[name] != after[name]}
    assert changed == {f"{agenda.stem}.png"}

    # --no-cache renders every page and neither reads nor writes the cache
    fourth, _out4, db4 = render(tmp_path, deck, "fourth", "--no-cache")
    assert REUSED.search(fourth) is None
    assert rendered_pages(db4) == pages + 1
