"""What the app keeps on `app.state`, and the loops of everything it runs."""

from __future__ import annotations

from typing import Any, Protocol

from deckyard.loop import Loop


class HasLoops(Protocol):
    """Anything that runs background loops."""

    @property
    def loops(self) -> list[Loop]:
        """Its loops."""
        ...


def loops_of(state: Any) -> list[Loop]:
    """Every loop of every component registered in `state.loop_owners`."""
    owners: list[HasLoops] = getattr(state, "loop_owners", [])
    return [loop for owner in owners for loop in owner.loops]
