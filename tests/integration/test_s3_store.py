"""The artefact store on a real S3 API (moto's server on loopback), as `s3://bucket/prefix`.

Objects round-trip with their sizes and write times, keys that leave the store are refused
before any request, a write is one PUT (no temporary object, no copy), and an S3 that stops
answering raises `ArtifactStoreUnavailable` within the configured timeouts, without blocking the
event loop and without writing anything; the same store works again once S3 is back.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from deckyard.artifacts import ArtifactKeyError, ArtifactStore, ArtifactStoreUnavailable
from deckyard.config import Settings
from tests.helpers.s3 import PREFIX, S3Server, s3_server, s3_settings
from tests.unit.test_artifacts import BAD_KEYS


@pytest.fixture
def s3() -> Iterator[S3Server]:
    with s3_server() as server:
        yield server


def store_on(s3: S3Server, bucket: str, prefix: str = PREFIX, **over: Any) -> ArtifactStore:
    return ArtifactStore.from_settings(Settings.load(**s3_settings(s3, bucket, prefix, **over)))


async def test_objects_round_trip_with_size_and_write_time(s3: S3Server) -> None:
    bucket = s3.create_bucket()
    store = store_on(s3, bucket)
    neighbour = store_on(s3, bucket, PREFIX + "-other")
    before = datetime.now(UTC) - timedelta(seconds=2)
    await store.put("renders/7/page..1.png", b"png")
    await store.put("documents/abc.html", b"<h1>x</h1>")
    await store.put("renders/7/page..1.png", b"png, again")
    await neighbour.put("renders/7/page..1.png", b"not mine")

    assert await store.get("renders/7/page..1.png") == b"png, again"
    assert await store.get("renders/7/missing.png") is None
    assert await store.exists("documents/abc.html") is True
    assert await store.exists("documents/none.html") is False
    assert await store.keys() == ["documents/abc.html", "renders/7/page..1.png"]
    listing = await store.listing()
    assert [(o.key, o.size) for o in listing] == [
        ("documents/abc.html", 10),
        ("renders/7/page..1.png", 10),
    ]
    for obj in listing:
        assert obj.modified is not None and before <= obj.modified <= datetime.now(UTC)

    assert await store.delete("documents/abc.html") is True
    assert await store.delete("documents/abc.html") is False
    assert await store.delete("renders/nothing.png") is False
    assert s3.object_keys(bucket) == [
        f"{PREFIX}-other/renders/7/page..1.png",
        f"{PREFIX}/renders/7/page..1.png",
    ]


async def test_a_write_is_one_put_never_a_temporary_object(
    s3: S3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On S3 a rename is a copy and a delete: a put must not go through one."""
    bucket = s3.create_bucket()
    store = store_on(s3, bucket)

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the store renamed or copied an object")

    for name in ("mv", "copy", "rename"):
        monkeypatch.setattr(store._fs, name, refuse)
    for i in range(3):
        await store.put(f"renders/{i}.png", b"x" * (i + 1))
    assert s3.object_keys(bucket) == [f"{PREFIX}/renders/{i}.png" for i in range(3)]


async def test_a_key_that_escapes_the_prefix_is_refused(s3: S3Server) -> None:
    bucket = s3.create_bucket()
    store = store_on(s3, bucket)
    for key in BAD_KEYS:
        with pytest.raises(ArtifactKeyError):
            await store.put(key, b"x")
        with pytest.raises(ArtifactKeyError):
            await store.get(key)
        with pytest.raises(ArtifactKeyError):
            await store.delete(key)
    assert s3.object_keys(bucket) == []


def test_the_issue_s_variable_name_is_accepted(
    s3: S3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DECKYARD_ARTIFACTS_URL", "s3://from-alias/p")
    assert Settings.load().artifact_store_url == "s3://from-alias/p"
    monkeypatch.setenv("DECKYARD_ARTIFACT_STORE_URL", "s3://from-name/p")
    assert Settings.load().artifact_store_url == "s3://from-name/p"
    assert Settings.load(artifact_store_url="s3://given/p").artifact_store_url == "s3://given/p"


async def test_an_outage_raises_unavailable_writes_nothing_and_the_store_recovers(
    s3: S3Server,
) -> None:
    bucket = s3.create_bucket()
    store = store_on(s3, bucket)
    await store.put("renders/kept.png", b"before")
    s3.stop()
    calls = [
        lambda: store.put("renders/new.png", b"during"),
        lambda: store.get("renders/kept.png"),
        lambda: store.exists("renders/kept.png"),
        lambda: store.delete("renders/kept.png"),
        store.listing,
    ]
    for call in calls:
        with pytest.raises(ArtifactStoreUnavailable, match="Could not connect"):
            await call()

    s3.start()
    assert s3.object_keys(bucket) == [f"{PREFIX}/renders/kept.png"]
    assert await store.get("renders/kept.png") == b"before"
    await store.put("renders/new.png", b"after")
    assert await store.keys() == ["renders/kept.png", "renders/new.png"]


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A loopback port that accepts connections (the kernel's backlog) and never answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield int(listener.getsockname()[1])


async def test_a_store_that_never_answers_times_out_without_blocking_the_loop(
    silent_port: int,
) -> None:
    settings = Settings.load(
        artifact_store_url="s3://silent/p",
        artifact_store_endpoint_url=f"http://127.0.0.1:{silent_port}",
        artifact_store_access_key_id="k",
        artifact_store_secret_access_key="s",
        artifact_store_region="us-east-1",
        artifact_store_timeout_seconds=1.0,
        artifact_store_max_attempts=1,
    )
    store = ArtifactStore.from_settings(settings)
    call = asyncio.create_task(store.get("renders/a.png"))
    other = asyncio.create_task(asyncio.sleep(0))
    # A store call that blocked the loop would run first and end (timed out) before `other`.
    done, _ = await asyncio.wait({call, other}, return_when=asyncio.FIRST_COMPLETED)
    assert done == {other}
    async with asyncio.timeout(15):
        with pytest.raises(ArtifactStoreUnavailable, match="timeout"):
            await call
