"""Chromium under the renderer: `pool` (browsers), `tabs` (document tabs), `capture`, `watchdog`."""
