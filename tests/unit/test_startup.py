"""`deckyard.startup`: imports with the collector paused, then frozen; a cheap exit."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from deckyard.startup import before_exit, heavy_imports


@pytest.fixture(autouse=True)
def _restore_gc() -> Iterator[None]:
    enabled = gc.isenabled()
    yield
    gc.unfreeze()
    if enabled:
        gc.enable()
    else:
        gc.disable()


def test_the_collector_is_paused_inside_and_back_after() -> None:
    gc.enable()
    with heavy_imports():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_what_the_block_made_is_frozen() -> None:
    gc.unfreeze()
    with heavy_imports():
        made = [{"n": i} for i in range(1000)]
    assert gc.get_freeze_count() >= len(made)


def test_a_paused_collector_stays_paused() -> None:
    gc.disable()
    with heavy_imports():
        pass
    assert not gc.isenabled()


def test_the_collector_comes_back_when_an_import_fails() -> None:
    gc.enable()
    with pytest.raises(ImportError), heavy_imports():
        import deckyard.no_such_module  # type: ignore[import-not-found]  # noqa: F401
    assert gc.isenabled()


def test_before_exit_freezes_what_is_left() -> None:
    gc.unfreeze()
    kept = [[i] for i in range(1000)]
    before_exit()
    assert gc.get_freeze_count() >= len(kept)
