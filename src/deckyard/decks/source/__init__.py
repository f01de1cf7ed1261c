"""Stage 1, source: a deck as the author wrote it, loaded and checked into a `DeckSource`.

* `deck_source`: the source shapes (`DeckManifest`, `PageSource`, `Asset`, `DeckSource`)
* `assemble`: the rules every form shares (`deck.toml`, page order, theme, fonts, limits)
* `folder`, `zip_archive`, `json_body`: one loader per form (`load_deck_folder`,
  `load_deck_zip`, `load_deck_json`); a new form gets its own module that ends in `assemble_deck`
* `zipsafe`: reading hostile ZIP archives (also used to verify built sites)
* `limits`: `DeckLimits.from_settings`, `site_zip_limits`
"""
