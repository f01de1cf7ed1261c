"""`deckyard import --fetch-remote`: remote images downloaded only through the SSRF guard."""

from __future__ import annotations

from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from deckyard.cli.fetch_remote import guarded_fetcher
from deckyard.config import Settings
from deckyard.decks.source.importer import import_markdown_deck
from deckyard.decks.source.limits import DeckLimits
from tests.helpers.decks import PNG_1PX
from tests.helpers.loopback_http import loopback_server


class _Images(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/moved.png":
            self.send_response(302)
            self.send_header("Location", "/pic.png")
            self.end_headers()
            return
        self.send_response(200 if self.path == "/pic.png" else 404)
        self.send_header("Content-Type", "image/png")
        self.end_headers()
        self.wfile.write(PNG_1PX if self.path == "/pic.png" else b"")

    def log_message(self, *args: object) -> None:
        return


@pytest.fixture
def image_server() -> Iterator[str]:
    with loopback_server(_Images) as host:
        yield host


def _talk(tmp_path: Path, host: str) -> Path:
    talk = tmp_path / "talk.md"
    talk.write_text(f"# Remote\n\n![a](http://{host}/moved.png)\n\n[a link](http://{host}/page)\n")
    return talk


def test_fetch_remote_downloads_allowed_images_and_keeps_links(
    tmp_path: Path, image_server: str
) -> None:
    settings = Settings.load(renderer_url_allow_hosts=[image_server])
    limits = DeckLimits.from_settings(settings)
    report = import_markdown_deck(
        _talk(tmp_path, image_server), tmp_path / "deck", limits, guarded_fetcher(settings)
    )
    assert report.copied == ["assets/remote/127.0.0.1/moved.png"]
    assert (tmp_path / "deck/assets/remote/127.0.0.1/moved.png").read_bytes() == PNG_1PX
    page = (tmp_path / "deck/pages/slide-01.md").read_text()
    assert "![a](assets/remote/127.0.0.1/moved.png)" in page
    assert f"[a link](http://{image_server}/page)" in page


def test_fetch_remote_refuses_what_the_ssrf_guard_refuses(
    tmp_path: Path, image_server: str
) -> None:
    settings = Settings.load()
    report = import_markdown_deck(
        _talk(tmp_path, image_server),
        tmp_path / "deck",
        DeckLimits.from_settings(settings),
        guarded_fetcher(settings),
    )
    assert report.copied == []
    assert any(
        "refused by the SSRF guard" in item and "loopback" in item for item in report.not_carried
    )
