"""`reap_adopted`: exited children nobody owns are reaped, protected ones are left to their owner.

The children are real processes (`true`, `sh -c 'exit 7'`) that exit on their own; the test waits
until the kernel shows them as zombies, so no timing is involved.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest

from deckyard.render import processes
from deckyard.render.processes import reap_adopted
from tests.helpers.eventually import eventually_sync


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rpartition(")")[2].split()[0]
    except OSError:
        return "gone"


def _zombie(argv: list[str]) -> subprocess.Popen[bytes]:
    child = subprocess.Popen(argv)
    eventually_sync(lambda: _state(child.pid) == "Z", what=f"{argv} to exit")
    return child


@pytest.fixture
def children() -> Iterator[list[subprocess.Popen[bytes]]]:
    # exited children an earlier test in this process left unwaited would be counted too
    reap_adopted(set())
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for child in started:
        child.poll()


def test_an_exited_child_nobody_owns_is_reaped_without_a_scan(
    children: list[subprocess.Popen[bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    children.append(_zombie(["true"]))
    scans: list[int] = []
    original = processes._children_of
    monkeypatch.setattr(processes, "_children_of", lambda pid: scans.append(pid) or original(pid))

    assert reap_adopted(set()) == 1
    assert _state(children[0].pid) == "gone"
    assert scans == []
    assert reap_adopted(set()) == 0


def test_a_protected_child_keeps_its_exit_status_for_its_owner(
    children: list[subprocess.Popen[bytes]],
) -> None:
    owned = _zombie(["sh", "-c", "exit 7"])
    orphan = _zombie(["true"])
    children.extend([owned, orphan])

    assert reap_adopted({owned.pid}) == 1
    assert _state(orphan.pid) == "gone"
    assert _state(owned.pid) == "Z"
    assert owned.wait() == 7


def test_no_exited_children_reaps_nothing(children: list[subprocess.Popen[bytes]]) -> None:
    assert reap_adopted(set()) == 0
