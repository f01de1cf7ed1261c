"""The renderer process: a Chromium pool behind a signed HTTP control API (`deckyard renderer`)."""
