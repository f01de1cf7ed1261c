"""What every command shares: readable failures on stderr and settings with CLI overrides."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NoReturn

import typer
from rich.console import Console

from deckyard.outputs import OUTPUTS

if TYPE_CHECKING:
    from deckyard.config import Settings

err = Console(stderr=True, highlight=False, soft_wrap=True)
# What `deckyard render --format` accepts; shared by the command and the pipeline it runs.
FORMATS = tuple(OUTPUTS)
CLI_SPARE_TABS = 0
"""A run's renderer keeps no spare tab warm beyond one per slot (`DECKYARD_RENDERER_SPARE_TABS`
overrides): a deck attempt carries each slot's tab from page to page, and the spare's context,
a Chromium renderer process, cost a 30-slide run 8 % of its wall time and 12 % of its CPU
(`farm-bench -n 4`, 2026-12-06)."""


def fail(lines: list[str] | str, code: int = 2) -> NoReturn:
    """Print one readable line per problem to stderr and exit with `code`."""
    for line in [lines] if isinstance(lines, str) else lines:
        err.print(f"deckyard: {line}", markup=False)
    raise typer.Exit(code)


def load_settings(**overrides: Any) -> Settings:
    """Settings from the environment plus command-line overrides; exit 2 when invalid."""
    # Imported here: building the settings model costs ~0.3 s, which a usage error or
    # `--help` should not pay.
    from deckyard.config import Settings, SettingsError

    given = {k: v for k, v in overrides.items() if v is not None}
    try:
        return Settings.load(**given)
    except SettingsError as exc:
        fail(exc.problems)
