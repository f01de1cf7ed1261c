"""Decks: a pipeline from an author's files to a published static site and PDF.

One sub-package per stage, each importing only from the stages before it:

* `decks.source`: load a folder, ZIP upload or JSON body into a checked `DeckSource`
* `decks.compile`: compile its pages into self-contained HTML documents
* `decks.validation`: the compile and render stages of a page, and `is_validation_passed`,
  the one predicate that decides whether a result passed (rule Q0)
* `decks.site`: build the static site ZIP and verify one
* `decks.jobs`: the deck job handlers and the `publish` task

Beside them: `decks.errors` (each stage's exception and codes), `decks.schema` (the deck
tables), `decks.store` (every statement on those tables; no other module touches them) and
`decks.service` (`DeckService`, the entry point for the API and the CLI). The HTTP shapes live in
`deckyard.api.deck_views`.

The packages themselves import nothing, so storage code in `decks` stays cheap to import.
"""
