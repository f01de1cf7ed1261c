"""`ScreenshotSpec.input_hash`: what makes two screenshot inputs the same render."""

from __future__ import annotations

from deckyard.render.control.models import ScreenshotSpec
from deckyard.render.protocol import document_key


def spec(**over: object) -> ScreenshotSpec:
    return ScreenshotSpec.model_validate({"html": "<h1>Hi</h1>", "width": 800, **over})


def test_the_same_target_and_config_hash_the_same() -> None:
    assert spec().input_hash() == spec().input_hash()
    assert spec(url=None).input_hash() == spec().input_hash()


def test_the_document_and_every_setting_count() -> None:
    base = spec().input_hash()
    others = [
        spec(html="<h1>Hi</h1> ").input_hash(),
        spec(width=801).input_hash(),
        spec(format="jpeg").input_hash(),
        spec(files={"a.css": "Ym9keXt9"}).input_hash(),
        spec().input_hash(capture=False),
        ScreenshotSpec.model_validate({"url": "https://example.test/", "width": 800}).input_hash(),
    ]
    assert base not in others
    assert len(set(others)) == len(others)


def test_a_document_is_not_the_same_as_its_key() -> None:
    """The document enters the hash by its content key; HTML that is that key's text differs."""
    assert spec(html=document_key("<h1>Hi</h1>")).input_hash() != spec().input_hash()


def test_a_screenshot_is_not_audited_unless_asked_and_the_audit_leaves_the_picture_alike() -> None:
    plain, audited = spec(), spec(audit=True)
    assert plain.render_input()["audit"] is False  # the renderer audits unless told not to
    assert "audit" not in audited.render_input()
    assert plain.input_hash() != audited.input_hash()
    # the picture is the same: a screenshot may use the PNG its page's validation drew
    assert plain.picture_hash() == audited.picture_hash() == audited.input_hash()
    assert spec(width=801).picture_hash() != plain.picture_hash()
