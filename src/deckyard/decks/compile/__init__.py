"""Stage 2, compile: a `DeckSource`'s pages as self-contained HTML documents sized to the slide.

* `documents`: `compile_page`, `compile_deck`, `compile_deck_report`, `compile_print_document`
  and `CompiledPage`
* `html_page`: one page parsed and inlined (`compile_part`); Markdown pages go through
  `markdown.render_markdown` first
* `css_scope`: CSS scoped to the slide, `url()` inlined
* `assets`: references resolved to the deck's assets and inlined as `data:` URIs
"""
