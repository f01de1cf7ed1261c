"""Chromium under the renderer: the browser pool, tabs, capture, diagnostics and the watchdog."""
