"""Taking page source out of model answers: fences, chatter, and answers with no page."""

from __future__ import annotations

import pytest

from deckyard.ai.extract import extract_page_source
from deckyard.ai.prompts import PageContext, edit_messages, repair_message
from deckyard.decks.source.deck_source import PageKind
from deckyard.decks.validation.result import Diagnostic

MD, HTML = PageKind.MARKDOWN, PageKind.HTML


@pytest.mark.parametrize(
    ("answer", "kind", "expected"),
    [
        ("# Title\n\nBody", MD, "# Title\n\nBody\n"),
        (
            "Sure! Here is the slide:\n\n```markdown\n# New\n- a\n```\nHope it helps.",
            MD,
            "# New\n- a\n",
        ),
        ("```md\n# A\n```\nor\n```md\n# Longer one\n\ntext\n```", MD, "# Longer one\n\ntext\n"),
        ("```\n<h1>x</h1>\n```", HTML, "<h1>x</h1>\n"),
        (
            "Here you go:\n<section>\n<h1>Hi</h1>\n</section>\nLet me know!",
            HTML,
            "<section>\n<h1>Hi</h1>\n</section>\n",
        ),
        ("```html\r\n<p>crlf</p>\r\n```", HTML, "<p>crlf</p>\n"),
    ],
)
def test_source_found(answer: str, kind: PageKind, expected: str) -> None:
    assert extract_page_source(answer, kind) == expected


@pytest.mark.parametrize(
    ("answer", "kind"),
    [
        ("", MD),
        ("I cannot help with that.", MD),
        ("I cannot help with that.", HTML),
        ("```python\nprint('hi')\n```", MD),
        ("```html\n\n```", HTML),
        ("```\njust words, no tags\n```", HTML),
    ],
)
def test_no_usable_source(answer: str, kind: PageKind) -> None:
    assert extract_page_source(answer, kind) is None


def test_prompts_carry_rules_page_and_problems() -> None:
    ctx = PageContext("Deck", 1280, 720, ".title { color: red }", ["assets/logo.png"])
    system, user = edit_messages(ctx, "02-agenda", MD, "# Agenda\n", "add a third item")
    assert "1280x720" in system["content"] and "assets/logo.png" in system["content"]
    assert ".title { color: red }" in system["content"]
    assert "# Agenda" in user["content"] and "add a third item" in user["content"]
    problem = Diagnostic(
        stage="compile",
        severity="error",
        code="COMPILE_MISSING_ASSET",
        message="no such asset",
        page="02-agenda",
        reference="assets/nope.png",
        line=3,
    )
    text = repair_message("failed", [problem])["content"]
    assert "page 02-agenda, line 3: COMPILE_MISSING_ASSET: no such asset (assets/nope.png)" in text
