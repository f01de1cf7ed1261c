"""The artefact store: rendered images and exports, in a local directory or any fsspec URL.

Lite keeps artefacts under `<data_dir>/artifacts`; `DECKYARD_ARTIFACT_STORE_URL` (or
`DECKYARD_ARTIFACTS_URL`) points at any filesystem fsspec knows (`s3://bucket/prefix` through
s3fs, `memory://x`, `file:///srv/artefacts`). Keys are relative paths with `/` separators; a key
that tries to climb out of the store is refused.

A reader never sees half an artefact. A local write goes to a temporary name and is renamed into
place (one `rename(2)`). An object store gets one PUT of the whole object, which becomes visible
only complete (s3fs switches to a multipart upload above 100 MiB, visible only once completed):
there a rename is a copy and a delete, so a temporary name would only double the traffic and
leave `.tmp-` objects behind when the node dies in between.

Every blocking call runs in a thread (s3fs's own calls then run on fsspec's I/O loop, never on
ours). An S3 that cannot be reached, or answers 5xx, after `artifact_store_max_attempts` tries
of `artifact_store_timeout_seconds` each raises `ArtifactStoreUnavailable`, which the API answers
with 503 `ARTIFACT_STORE_UNAVAILABLE`; the next call tries again, so a node recovers by itself
when S3 is back.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import botocore.exceptions  # type: ignore[import-untyped]
import fsspec  # type: ignore[import-untyped]
from fsspec.implementations.local import LocalFileSystem  # type: ignore[import-untyped]

from deckyard.config import Settings

T = TypeVar("T")

S3_PROTOCOLS = ("s3", "s3a")


class ArtifactKeyError(ValueError):
    """A key that is empty, absolute or climbs out of the store."""


class ArtifactStoreUnavailable(Exception):
    """The store could not be reached (connection refused or lost, timeout, a 5xx answer).

    Nothing was written by the call that raised it; the same call may succeed later.
    """


def _check_key(key: str) -> str:
    parts = key.split("/")
    if not key or key.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise ArtifactKeyError(f"bad artefact key {key!r}")
    return key


TEMP_PREFIX = ".tmp-"
"""The name prefix of a local write in progress (renamed into place when complete)."""

_UNREACHABLE = (
    botocore.exceptions.ConnectionError,
    botocore.exceptions.HTTPClientError,
    ConnectionError,
    TimeoutError,
)
"""Connect failures and timeouts (fsspec's `FSTimeoutError` is a `TimeoutError`); botocore's
`HTTPClientError` covers a connection closed or a read timed out mid-answer."""


def _unreachable(exc: BaseException) -> bool:
    """True when `exc`, or an error it was raised from, says the store did not answer (or
    answered 5xx: s3fs turns a `ClientError` into an `OSError` raised from it)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, _UNREACHABLE):
            return True
        response = getattr(seen, "response", None)
        if isinstance(response, dict):
            status = response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
            if isinstance(status, int) and status >= 500:
                return True
        seen = seen.__cause__
    return False


@dataclass(frozen=True)
class StoredObject:
    """One object in the store: its key, size and when it was last written (None: unknown)."""

    key: str
    size: int
    modified: datetime | None


def _modified(info: dict[str, Any]) -> datetime | None:
    """The write time fsspec reports (`mtime` local, `LastModified` S3, `created` memory)."""
    for name in ("mtime", "LastModified", "last_modified", "created"):
        value = info.get(name)
        if isinstance(value, datetime):
            return value if value.tzinfo else value.replace(tzinfo=UTC)
        if isinstance(value, int | float):
            return datetime.fromtimestamp(value, UTC)
    return None


def s3_options(settings: Settings) -> dict[str, Any]:
    """s3fs options from the `artifact_store_*` settings.

    Listings are not cached: another node writes and deletes in the same bucket. Retries are
    botocore's (standard mode: connect errors, timeouts, 5xx and throttling, with backoff).
    """
    client: dict[str, Any] = {}
    if settings.artifact_store_region:
        client["region_name"] = settings.artifact_store_region
    options: dict[str, Any] = {
        "client_kwargs": client,
        "config_kwargs": {
            "connect_timeout": settings.artifact_store_timeout_seconds,
            "read_timeout": settings.artifact_store_timeout_seconds,
            "retries": {
                "total_max_attempts": settings.artifact_store_max_attempts,
                "mode": "standard",
            },
            "s3": {"addressing_style": settings.artifact_store_addressing_style},
        },
        "use_listings_cache": False,
    }
    if settings.artifact_store_endpoint_url:
        options["endpoint_url"] = settings.artifact_store_endpoint_url
    if settings.artifact_store_access_key_id:
        options["key"] = settings.artifact_store_access_key_id
    if settings.artifact_store_secret_access_key:
        options["secret"] = settings.artifact_store_secret_access_key.get_secret_value()
    return options


class ArtifactStore:
    """Put, get and delete artefacts by key; blocking filesystem calls run in a thread."""

    def __init__(self, url: str, **options: Any) -> None:
        self.url = url.rstrip("/")
        fs, root = fsspec.core.url_to_fs(self.url, **options)
        self._fs: Any = fs
        self._root: str = root.rstrip("/")
        self._local = isinstance(fs, LocalFileSystem)
        if self._local:
            fs.makedirs(self._root, exist_ok=True)
        elif fsspec.core.split_protocol(self.url)[0] in S3_PROTOCOLS:
            # s3fs also retries, five times per botocore call: a read timeout would then take
            # five times `artifact_store_max_attempts` timeouts. Retries are botocore's alone.
            fs.retries = 1

    @classmethod
    def from_settings(cls, settings: Settings) -> ArtifactStore:
        """The configured store, or `<data_dir>/artifacts` by default."""
        url = settings.artifact_store_url
        if not url:
            return cls(str((Path(settings.data_dir) / "artifacts").resolve()))
        if fsspec.core.split_protocol(url)[0] in S3_PROTOCOLS:
            return cls(url, **s3_options(settings))
        return cls(url)

    @property
    def ephemeral(self) -> bool:
        """True when artefacts do not survive this process (an in-memory filesystem)."""
        return self.url.startswith("memory:")

    def free_bytes(self) -> int | None:
        """Free space where a local store writes, or None for stores that are not local."""
        if not self._local:
            return None
        return shutil.disk_usage(self._root).free

    async def _run(self, call: Callable[..., T], *args: Any) -> T:
        """`call(*args)` in a thread; a store that did not answer is `ArtifactStoreUnavailable`."""
        try:
            return await asyncio.to_thread(call, *args)
        except Exception as exc:
            if _unreachable(exc):
                raise ArtifactStoreUnavailable(
                    f"artefact store {self.url} unavailable: {type(exc).__name__}: {exc}"
                ) from exc
            raise

    def _path(self, key: str) -> str:
        return f"{self._root}/{_check_key(key)}"

    def _put(self, key: str, data: bytes) -> None:
        path = self._path(key)
        if not self._local:
            self._fs.pipe_file(path, data)
            return
        parent = path.rsplit("/", 1)[0]
        self._fs.makedirs(parent, exist_ok=True)
        tmp = f"{parent}/{TEMP_PREFIX}{uuid.uuid4().hex}"
        try:
            self._fs.pipe_file(tmp, data)
            self._fs.mv(tmp, path)
        except BaseException:
            # A write that failed half-way (a full disk) leaves its partial file: remove it.
            with contextlib.suppress(OSError):
                self._fs.rm_file(tmp)
            raise

    async def put(self, key: str, data: bytes) -> None:
        """Store `data` under `key`, replacing what was there."""
        await self._run(self._put, key, data)

    def _get(self, key: str) -> bytes | None:
        path = self._path(key)
        try:
            data: bytes = self._fs.cat_file(path)
        except FileNotFoundError:
            return None
        return data

    async def get(self, key: str) -> bytes | None:
        """The bytes under `key`, or None when there are none."""
        return await self._run(self._get, key)

    def _exists(self, key: str) -> bool:
        return bool(self._fs.exists(self._path(key)))

    async def exists(self, key: str) -> bool:
        """True when something is stored under `key` (nothing is read)."""
        return await self._run(self._exists, key)

    def _delete(self, key: str) -> bool:
        path = self._path(key)
        try:
            if not self._local and self._fs.info(path).get("type") != "file":
                # S3 answers a DELETE of a missing key like any other: ask first (one HEAD).
                return False
            self._fs.rm_file(path)
        except FileNotFoundError:
            return False
        return True

    async def delete(self, key: str) -> bool:
        """Remove `key`; False when it did not exist."""
        return await self._run(self._delete, key)

    def _keys(self) -> list[str]:
        try:
            found = self._fs.find(self._root)
        except FileNotFoundError:
            return []
        prefix = self._root + "/"
        return sorted(str(p)[len(prefix) :] for p in found if str(p).startswith(prefix))

    async def keys(self) -> list[str]:
        """Every key in the store (temporary names included), for tests and audits."""
        return await self._run(self._keys)

    def _listing(self) -> list[StoredObject]:
        try:
            found = self._fs.find(self._root, detail=True)
        except FileNotFoundError:
            return []
        prefix = self._root + "/"
        out = []
        for path, info in found.items():
            name = str(path)
            if name.startswith(prefix) and info.get("type", "file") == "file":
                out.append(
                    StoredObject(name[len(prefix) :], int(info.get("size") or 0), _modified(info))
                )
        return sorted(out, key=lambda o: o.key)

    async def listing(self) -> list[StoredObject]:
        """Every object (temporary names included) with its size and write time, by key."""
        return await self._run(self._listing)
