"""Decks: sources, compilation, validation results and static site builds, without a database.

The pure parts import nothing from the database or the renderer process:

* `decks.source`: `load_deck_folder`, `load_deck_zip`, `load_deck_json` -> `DeckSource`
* `decks.compile`: `compile_page`, `compile_deck`, `compile_deck_report`, `compile_print_document`
* `decks.validation`: the compile and render stages, `validation_result`, `combine_results`,
  and `is_validation_passed`, the one predicate that decides whether a result passed;
  `decks.deck_result.combine_results` for a whole deck
* `decks.build`: `build_site` and `verify_site_zip`
* `decks.limits`: `DeckLimits.from_settings`, `site_zip_limits`

The package itself imports nothing, so storage code in `decks` stays cheap to import.
"""
