"""The shared lifecycle: one ACTIVE/TERMINAL split, and predicates equal to the migrations' SQL."""

from __future__ import annotations

import pytest

from deckyard.jobs.status import ACTIVE, ACTIVE_PREDICATE, TERMINAL, Lifecycle, status_in


def test_every_state_is_active_or_terminal_never_both() -> None:
    assert set(ACTIVE) | set(TERMINAL) == {s.value for s in Lifecycle}
    assert not set(ACTIVE) & set(TERMINAL)
    for s in Lifecycle:
        assert s.is_active is (s.value in ACTIVE)
        assert s.is_terminal is (s.value in TERMINAL)


def test_predicates_are_the_text_the_migrations_wrote() -> None:
    assert ACTIVE_PREDICATE == "status IN ('pending', 'running')"
    assert status_in([Lifecycle.PENDING]) == "status = 'pending'"
    assert status_in([Lifecycle.RUNNING]) == "status = 'running'"


def test_a_predicate_refuses_a_value_outside_the_lifecycle() -> None:
    with pytest.raises(ValueError, match="is not a valid Lifecycle"):
        status_in(["pending'; DROP TABLE jobs; --"])
