"""Issue 29, items 4 and 5 through `deckyard render`: a remote image is fetched (from a
loopback server this test starts, allowed through the SSRF guard by
`DECKYARD_RENDERER_URL_ALLOW_HOSTS`), and a failed slide costs only itself."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from tests.e2e.test_render_cli import run
from tests.helpers.decks import EXAMPLE
from tests.helpers.loopback_http import loopback_server

pytestmark = [pytest.mark.chromium, pytest.mark.processes]
CHART = (EXAMPLE / "assets/img/growth-chart.png").read_bytes()


class _Chart(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        ok = self.path == "/chart.png"
        self.send_response(200 if ok else 404)
        self.end_headers()
        self.wfile.write(CHART if ok else b"")

    def log_message(self, *args: object) -> None:
        return


@pytest.fixture
def chart_host() -> Iterator[str]:
    with loopback_server(_Chart) as host:
        yield host


def _talk(tmp_path: Path, host: str) -> Path:
    talk = tmp_path / "deck" / "talk.md"
    talk.parent.mkdir()
    talk.write_text(
        f"# A\n\nfine\n\n---\n\n![chart](http://{host}/chart.png)\n\n"
        f"![gone](http://{host}/gone.png)\n\n---\n\n# C\n\n![](assets/nothere.png)\n",
        encoding="utf-8",
    )
    return talk


def test_a_failed_slide_costs_only_itself(tmp_path: Path, chart_host: str) -> None:
    out = tmp_path / "out"
    env = {"DECKYARD_RENDERER_URL_ALLOW_HOSTS": json.dumps([chart_host])}
    done = run(tmp_path, "render", str(_talk(tmp_path, chart_host)), "--out", str(out), env=env)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "gone.png was not fetched (HTTP 404)" in done.stdout.replace("\n", " ")
    assert sorted(p.name for p in (out / "pages").iterdir()) == [
        "01-slide-01.png",
        "02-slide-02.png",
    ]
    # the fetched chart is drawn: its orange bar is in the PNG, not only white
    assert (out / "pages/02-slide-02.png").stat().st_size > 20_000
    pdf = (out / "deck.pdf").read_bytes()
    assert len(re.findall(rb"/Type\s*/Page(?![s\w])", pdf)) == 2
    assert (out / "site.zip").is_file()
    manifest = json.loads((out / "deckyard-manifest.json").read_text())
    assert manifest["complete"] is False
    assert [(p["name"], p["status"], p["in_pdf_and_site"]) for p in manifest["pages"]] == [
        ("slide-01", "passed", True),
        ("slide-02", "passed", True),
        ("slide-03", "failed", False),
    ]

    strict = tmp_path / "strict"
    (tmp_path / "s").mkdir()
    talk = _talk(tmp_path / "s", chart_host)
    done = run(tmp_path, "render", str(talk), "--out", str(strict), "--strict", env=env)
    assert done.returncode == 1, done.stdout + done.stderr
    assert not strict.exists()


def test_offline_refuses_remote_images_and_says_how_to_fetch(
    tmp_path: Path, chart_host: str
) -> None:
    out = tmp_path / "out"
    done = run(tmp_path, "render", str(_talk(tmp_path, chart_host)), "--out", str(out), "--offline")
    assert done.returncode == 1
    text = " ".join(done.stdout.split())
    assert "COMPILE_EXTERNAL_REFERENCE" in text
    assert "--offline" in text and "deckyard import --fetch-remote" in text
    assert sorted(p.name for p in (out / "pages").iterdir()) == ["01-slide-01.png"]
