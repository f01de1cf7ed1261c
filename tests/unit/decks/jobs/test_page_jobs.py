"""The screenshot spec a `page.screenshot` job asks for, from the deck's slide and the config."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from deckyard.decks.jobs.page_jobs import slide_spec_for
from deckyard.decks.source.deck_source import DEFAULT_SLIDE_HEIGHT, DEFAULT_SLIDE_WIDTH


def test_defaults_are_the_default_slide_as_png_at_scale_one() -> None:
    spec = slide_spec_for("<p>x</p>", {}, {})
    assert (spec.width, spec.height) == (DEFAULT_SLIDE_WIDTH, DEFAULT_SLIDE_HEIGHT)
    assert (spec.format, spec.scale, spec.html) == ("png", 1.0, "<p>x</p>")


def test_slide_size_and_config_are_used() -> None:
    spec = slide_spec_for(
        "<p>x</p>", {"width": 1280, "height": 720}, {"format": "jpeg", "scale": 2}
    )
    assert (spec.width, spec.height, spec.format, spec.scale) == (1280, 720, "jpeg", 2.0)


def test_a_config_the_renderer_would_refuse_is_refused_here() -> None:
    with pytest.raises(ValidationError):
        slide_spec_for("<p>x</p>", {}, {"format": "gif"})
