"""`DocumentsHeld` and `document_keys`: which documents a renderer is known to hold."""

from __future__ import annotations

from deckyard.render.control.requests import DocumentsHeld, document_keys


def test_document_keys_of_an_attempt_and_of_a_deck_attempt_in_order_once_each() -> None:
    assert document_keys({"document_key": "a", "width": 1}) == ["a"]
    assert document_keys({"document": "<p>"}) == []
    deck = {"pages": [{"document_key": "b"}, {"document_key": "a"}, {"document_key": "b"}]}
    assert document_keys(deck) == ["b", "a"]


def test_keys_taken_are_known_per_renderer_and_epoch() -> None:
    held = DocumentsHeld()
    assert held.unknown("r1", "e1", ["a", "b"]) == ["a", "b"]
    held.took("r1", "e1", ["a"])
    assert held.unknown("r1", "e1", ["a", "b"]) == ["b"]
    assert held.unknown("r2", "e1", ["a"]) == ["a"]  # another renderer
    assert held.unknown("r1", "e2", ["a"]) == ["a"]  # a restart forgets everything
    assert held.unknown("r1", "e1", ["a"]) == ["a"]  # and the old epoch is not coming back


def test_only_the_newest_keys_are_kept() -> None:
    held = DocumentsHeld(limit=2)
    held.took("r", "e", ["a", "b"])
    held.took("r", "e", ["a"])  # used again: newest
    held.took("r", "e", ["c"])
    assert held.unknown("r", "e", ["a", "b", "c"]) == ["b"]
