"""`deckyard render` and `deckyard validate` as a user runs them: subprocesses, real renderer."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import struct
import subprocess
import sys
import uuid
from contextlib import closing
from pathlib import Path

import pytest

from deckyard.config import Settings
from deckyard.decks.site.verify import verify_site_zip
from deckyard.decks.source.limits import site_zip_limits
from tests.e2e.conftest import DECKYARD, clean_env
from tests.helpers.decks import EXAMPLE
from tests.helpers.eventually import eventually_sync

pytestmark = [pytest.mark.chromium, pytest.mark.processes]


def run(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*DECKYARD, *args],
        env=clean_env(tmp_path, **(env or {})),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_render_example_deck(tmp_path: Path) -> None:
    out = tmp_path / "out"
    db = tmp_path / "run.db"
    database = f"sqlite+aiosqlite:///{db}"
    done = run(tmp_path, "render", str(EXAMPLE), "--out", str(out), "--database", database)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "every page passed" in done.stdout
    assert "05-fine-print" in done.stdout and "RENDER_OVERFLOW" in done.stdout
    pngs = sorted((out / "pages").glob("*.png"))
    assert [p.stem for p in pngs] == sorted(p.stem for p in (EXAMPLE / "pages").iterdir())
    assert all(png_size(p) == (1920, 1080) for p in pngs)
    check = verify_site_zip((out / "site.zip").read_bytes(), site_zip_limits(Settings.load()))
    assert check.page_count == 6
    pdf = (out / "deck.pdf").read_bytes()
    assert pdf[:5] == b"%PDF-"
    assert len(re.findall(rb"/Type\s*/Page(?![s\w])", pdf)) == 6
    assert_pdf_queued_behind_the_pages(db)


def assert_pdf_queued_behind_the_pages(db: Path) -> None:
    """The PDF's job was enqueued while the pages rendered; its render (and the built site's
    load) still waited for the deck's attempt, which had taken every slot; the PNGs' export
    opened no render request; no job was left behind."""
    with closing(sqlite3.connect(db)) as conn:
        jobs = {
            f"{kind}:{json.loads(payload).get('format', 'pdf')}"
            if kind == "deck.export"
            else kind: (status, created, finished)
            for kind, status, created, finished, payload in conn.execute(
                "SELECT kind, status, created_at, finished_at, payload FROM jobs "
                "WHERE parent_id IS NULL"
            )
        }
        attempts = conn.execute(
            "SELECT q.kind, a.extra_slots, a.created_at, a.finished_at FROM render_attempts a "
            "JOIN render_requests q ON q.id = a.request_id ORDER BY a.id"
        ).fetchall()
    assert {kind: status for kind, (status, _c, _f) in jobs.items()} == {
        "deck.validate": "succeeded",
        "deck.export:pdf": "succeeded",
        "deck.export:zip": "succeeded",
        "deck.export:png": "succeeded",  # the pictures the validation rendered: no render
    }
    assert jobs["deck.export:pdf"][1] < jobs["deck.validate"][2]
    assert len(attempts) == 3  # the pages (one deck request), the PDF's print, the site's load
    deck = [a for a in attempts if a[0] == "deck"]
    assert len(deck) == 1 and len(json.loads(deck[0][1] or "[]")) == 1  # 2 slots, both its own
    others_started = min(created for kind, _x, created, _f in attempts if kind != "deck")
    assert others_started >= deck[0][3]


def test_validate_exit_codes(tmp_path: Path) -> None:
    ok = run(tmp_path, "validate", str(EXAMPLE))
    assert ok.returncode == 0, ok.stdout + ok.stderr

    broken = tmp_path / "broken"
    shutil.copytree(EXAMPLE, broken)
    (broken / "pages" / "02-agenda.md").write_text("# Agenda\n\n![chart](../assets/nope.png)\n")
    bad = run(tmp_path, "validate", str(broken))
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "02-agenda:3" in bad.stdout and "nope.png" in bad.stdout

    # an honest outage: the only configured renderer does not answer
    down = run(
        tmp_path,
        "validate",
        str(EXAMPLE),
        env={
            "DECKYARD_RENDERER_URLS": '["http://127.0.0.1:9"]',
            "DECKYARD_RENDERER_SECRET": "0123456789abcdef0123",
            "DECKYARD_RENDER_RENDERER_START_TIMEOUT_SECONDS": "3",
        },
    )
    assert down.returncode == 3, down.stdout + down.stderr
    assert "NOT VERIFIED" in down.stdout
    assert "every page passed" not in down.stdout


HEAVY = (
    "deckyard.cli.pipeline",
    "deckyard.render_node",
    "deckyard.node",
    "playwright",
    "fastapi",
    "sqlalchemy",
)
PROBE = """
import sys
import uuid
from deckyard.cli import app
try:
    app(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
heavy = [m for m in {heavy!r} if m in sys.modules]
print(code, heavy)
"""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["render", "missing", "--out", "out"], "missing: no such folder"),
        (["render", "deck.toml", "--out", "out"], "deck.toml is a file"),
        (["validate", "missing"], "missing: no such folder"),
        (["render", ".", "--out", "out", "--format", "png,gif"], "unknown format(s) gif"),
    ],
)
def test_usage_errors_exit_2_before_anything_heavy(
    tmp_path: Path, args: list[str], message: str
) -> None:
    (tmp_path / "deck.toml").write_text('title = "T"\n')
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=HEAVY), *args],
        env=clean_env(tmp_path),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.stdout.strip() == "2 []", done.stdout + done.stderr
    assert message in done.stderr
    assert not (tmp_path / "out").exists()


def _processes_with(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if f"DECKYARD_TEST_MARK={marker}".encode() in environ.split(b"\0"):
            found.append(int(entry.name))
    return found


def test_a_refused_deck_leaves_no_renderer_behind(tmp_path: Path) -> None:
    # `render` spawns its renderer before it reads the deck; a deck refused then stops it.
    deck = tmp_path / "deck"
    (deck / "pages").mkdir(parents=True)
    (deck / "deck.toml").write_text("title = [unclosed\n")
    marker = uuid.uuid4().hex
    done = run(
        tmp_path,
        "render",
        str(deck),
        "--out",
        str(tmp_path / "out"),
        env={"DECKYARD_TEST_MARK": marker},
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "deck.toml" in done.stderr
    eventually_sync(lambda: not _processes_with(marker), timeout=20, what="no process left")
