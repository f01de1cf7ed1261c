"""The artefact store refuses keys that would leave it, and stores keys that stay inside."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from deckyard.artifacts import ArtifactKeyError, ArtifactStore

BAD_KEYS = [
    "",
    "/etc/passwd",
    "..",
    "../outside",
    "a/../../outside",
    "a/../b",
    "./a",
    "a/.",
    "a//b",
    "a/",
]


@pytest.fixture
def store() -> Iterator[ArtifactStore]:
    s = ArtifactStore(f"memory://artifacts-{uuid.uuid4().hex}")
    yield s
    if s._fs.exists(s._root):
        s._fs.rm(s._root, recursive=True)


@pytest.mark.parametrize("key", BAD_KEYS)
async def test_a_key_that_escapes_or_is_not_plain_is_refused(
    store: ArtifactStore, key: str
) -> None:
    with pytest.raises(ArtifactKeyError):
        await store.put(key, b"x")
    with pytest.raises(ArtifactKeyError):
        await store.get(key)
    with pytest.raises(ArtifactKeyError):
        await store.delete(key)
    assert await store.keys() == []


async def test_a_nested_relative_key_round_trips(store: ArtifactStore) -> None:
    await store.put("renders/7/page..1.png", b"png")
    assert await store.get("renders/7/page..1.png") == b"png"
    assert await store.keys() == ["renders/7/page..1.png"]
    assert await store.delete("renders/7/page..1.png") is True
    assert await store.get("renders/7/page..1.png") is None
