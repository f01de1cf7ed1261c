"""A reveal.js HTML deck built from the npm package (`vendor/js`, installed by scripts/setup)."""

from __future__ import annotations

import shutil
from pathlib import Path

ROOT = Path(__file__).parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "reveal_html"
MARKDOWN_FIXTURE = ROOT / "tests" / "fixtures" / "reveal_markdown"
REVEAL_DIST = ROOT / "vendor" / "js" / "node_modules" / "reveal.js" / "dist"


def reveal_deck(dest: Path, fixture: Path = FIXTURE) -> Path:
    """A fixture deck (`index.html`, its files) with reveal.js's `dist/` copied beside it."""
    assert REVEAL_DIST.is_dir(), "scripts/setup installs vendor/js (npm ci)"
    shutil.copytree(fixture, dest)
    shutil.copytree(REVEAL_DIST, dest / "dist", ignore=shutil.ignore_patterns("*.d.ts", "*.mjs"))
    return dest
