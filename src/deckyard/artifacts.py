"""The artefact store: rendered images and exports, in a local directory or any fsspec URL.

Lite keeps artefacts under `<data_dir>/artifacts`; `DECKYARD_ARTIFACT_STORE_URL` points at any
filesystem fsspec knows (`s3://bucket/prefix`, `memory://x`, `file:///srv/artefacts`). Keys are
relative paths with `/` separators; a key that tries to climb out of the store is refused.
Writes go to a temporary name first and are renamed into place where the filesystem allows, so a
reader never sees half an artefact.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import fsspec  # type: ignore[import-untyped]
from fsspec.implementations.local import LocalFileSystem  # type: ignore[import-untyped]

from deckyard.config import Settings


class ArtifactKeyError(ValueError):
    """A key that is empty, absolute or climbs out of the store."""


def _check_key(key: str) -> str:
    parts = key.split("/")
    if not key or key.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise ArtifactKeyError(f"bad artefact key {key!r}")
    return key


TEMP_PREFIX = ".tmp-"
"""The name prefix of a write in progress (renamed into place when complete)."""


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


class ArtifactStore:
    """Put, get and delete artefacts by key; blocking filesystem calls run in a thread."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        fs, root = fsspec.core.url_to_fs(self.url)
        self._fs: Any = fs
        self._root: str = root.rstrip("/")
        if isinstance(fs, LocalFileSystem):
            fs.makedirs(self._root, exist_ok=True)

    @classmethod
    def from_settings(cls, settings: Settings) -> ArtifactStore:
        """The configured store, or `<data_dir>/artifacts` by default."""
        if settings.artifact_store_url:
            return cls(settings.artifact_store_url)
        return cls(str((Path(settings.data_dir) / "artifacts").resolve()))

    @property
    def ephemeral(self) -> bool:
        """True when artefacts do not survive this process (an in-memory filesystem)."""
        return self.url.startswith("memory:")

    def free_bytes(self) -> int | None:
        """Free space where a local store writes, or None for stores that are not local."""
        if not isinstance(self._fs, LocalFileSystem):
            return None
        return shutil.disk_usage(self._root).free

    def _path(self, key: str) -> str:
        return f"{self._root}/{_check_key(key)}"

    def _put(self, key: str, data: bytes) -> None:
        path = self._path(key)
        parent = path.rsplit("/", 1)[0]
        self._fs.makedirs(parent, exist_ok=True)
        tmp = f"{parent}/.tmp-{uuid.uuid4().hex}"
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
        await asyncio.to_thread(self._put, key, data)

    def _get(self, key: str) -> bytes | None:
        path = self._path(key)
        try:
            data: bytes = self._fs.cat_file(path)
        except FileNotFoundError:
            return None
        return data

    async def get(self, key: str) -> bytes | None:
        """The bytes under `key`, or None when there are none."""
        return await asyncio.to_thread(self._get, key)

    def _exists(self, key: str) -> bool:
        return bool(self._fs.exists(self._path(key)))

    async def exists(self, key: str) -> bool:
        """True when something is stored under `key` (nothing is read)."""
        return await asyncio.to_thread(self._exists, key)

    def _delete(self, key: str) -> bool:
        path = self._path(key)
        try:
            self._fs.rm_file(path)
        except FileNotFoundError:
            return False
        return True

    async def delete(self, key: str) -> bool:
        """Remove `key`; False when it did not exist."""
        return await asyncio.to_thread(self._delete, key)

    def _keys(self) -> list[str]:
        try:
            found = self._fs.find(self._root)
        except FileNotFoundError:
            return []
        prefix = self._root + "/"
        return sorted(str(p)[len(prefix) :] for p in found if str(p).startswith(prefix))

    async def keys(self) -> list[str]:
        """Every key in the store (temporary names included), for tests and audits."""
        return await asyncio.to_thread(self._keys)

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
        return await asyncio.to_thread(self._listing)
