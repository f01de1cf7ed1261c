"""Reads ZIP archives that may be hostile: path escapes, symlinks, bombs, duplicates.

Every entry name is checked before any byte is inflated; declared sizes are checked against the
limits first, and the bytes actually inflated are counted again while reading, because a bomb's
headers may lie. Every bad entry name, kind or declared size is reported at once (one
`DeckSourceError`, the others in its `also`); a problem found while inflating stops at once.
Nothing read so far is returned.
"""

from __future__ import annotations

import io
import re
import stat
import zipfile
from pathlib import Path

from deckyard.decks.errors import DeckSourceError
from deckyard.decks.errors import DeckSourceErrorCode as Code
from deckyard.decks.source.deck_source import MAX_PATH_LENGTH
from deckyard.decks.source.limits import ZipLimits

_CHUNK = 64 * 1024
_DRIVE = re.compile(r"^[A-Za-z]:")
_UNIX_SYSTEM = 3
_ENCRYPTED_FLAG = 0x1
MAX_REPORTED = 50
"""The most bad entries one refusal lists; an archive of thousands needs no more to be fixed."""


def check_entry_name(name: str) -> str:
    """Return `name` as a safe relative POSIX path, or raise naming the rule it breaks."""
    if not name or "\x00" in name or any(ord(ch) < 0x20 for ch in name):
        raise DeckSourceError(Code.BAD_NAME, f"bad entry name {name!r}", file=name)
    if len(name.rstrip("/")) > MAX_PATH_LENGTH:
        raise DeckSourceError(
            Code.BAD_NAME,
            f"entry name {name[:60]!r}... is {len(name)} characters; "
            f"at most {MAX_PATH_LENGTH} are allowed",
            file=name[:MAX_PATH_LENGTH],
        )
    if "\\" in name:
        raise DeckSourceError(
            Code.BAD_NAME, f"entry {name!r} uses backslashes; use '/' in paths", file=name
        )
    if name.startswith("/") or _DRIVE.match(name):
        raise DeckSourceError(Code.ABSOLUTE_PATH, f"entry {name!r} is absolute", file=name)
    parts = name.rstrip("/").split("/")
    if any(part == ".." for part in parts):
        raise DeckSourceError(
            Code.PATH_ESCAPE, f"entry {name!r} escapes the archive with '..'", file=name
        )
    if any(part in ("", ".") for part in parts):
        raise DeckSourceError(Code.BAD_NAME, f"entry {name!r} has an empty part", file=name)
    return name


def _check_kind(info: zipfile.ZipInfo) -> None:
    if info.flag_bits & _ENCRYPTED_FLAG:
        raise DeckSourceError(
            Code.ZIP_ENCRYPTED, f"entry {info.filename!r} is encrypted", file=info.filename
        )
    if info.create_system != _UNIX_SYSTEM:
        return
    mode = info.external_attr >> 16
    kind = stat.S_IFMT(mode)
    if stat.S_ISLNK(mode):
        raise DeckSourceError(
            Code.SYMLINK, f"entry {info.filename!r} is a symbolic link", file=info.filename
        )
    if kind not in (0, stat.S_IFREG, stat.S_IFDIR):
        raise DeckSourceError(
            Code.SPECIAL_FILE,
            f"entry {info.filename!r} is not a regular file or folder",
            file=info.filename,
        )


def _open(data: bytes) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError) as exc:
        raise DeckSourceError(Code.ZIP_INVALID, f"not a readable ZIP archive: {exc}") from None


def _check_entry(info: zipfile.ZipInfo, seen: set[str], limits: ZipLimits) -> str:
    """`info`'s name once its name, kind, uniqueness and declared size are checked."""
    # zipfile cuts a name at its first NUL; the name as stored in the archive keeps it.
    check_entry_name(info.orig_filename)
    name = check_entry_name(info.filename)
    _check_kind(info)
    key = name.rstrip("/")
    if key.casefold() in seen:
        raise DeckSourceError(
            Code.DUPLICATE_ENTRY, f"entry {key!r} appears more than once", file=key
        )
    seen.add(key.casefold())
    if not info.is_dir() and info.file_size > limits.max_file_bytes:
        raise DeckSourceError(
            Code.FILE_TOO_LARGE,
            f"{key!r} unpacks to {info.file_size} bytes; at most "
            f"{limits.max_file_bytes} are allowed per file",
            file=key,
        )
    return key


def _check_entries(archive: zipfile.ZipFile, limits: ZipLimits) -> list[zipfile.ZipInfo]:
    """The file entries to read, once every entry's name, kind and size passed.

    Each entry is checked, so one upload reports all its bad entries (up to
    `MAX_REPORTED` of them); the totals are checked after.
    """
    infos = archive.infolist()
    if len(infos) > limits.max_entries:
        raise DeckSourceError(
            Code.TOO_MANY_FILES,
            f"the archive has {len(infos)} entries; at most {limits.max_entries} are allowed",
        )
    seen: set[str] = set()
    problems: list[DeckSourceError] = []
    files: list[zipfile.ZipInfo] = []
    for info in infos:
        try:
            _check_entry(info, seen, limits)
        except DeckSourceError as exc:
            problems.append(exc)
            if len(problems) >= MAX_REPORTED:
                break
            continue
        if not info.is_dir():
            files.append(info)
    if problems:
        raise DeckSourceError.of_all(problems)
    declared = sum(info.file_size for info in files)
    if declared > limits.max_total_bytes:
        raise DeckSourceError(
            Code.TOO_LARGE, f"the archive unpacks to more than {limits.max_total_bytes} bytes"
        )
    return files


def _inflate(archive: zipfile.ZipFile, info: zipfile.ZipInfo, budget: int, cap: int) -> bytes:
    """Read one entry, stopping as soon as it passes its declared size, `cap` or `budget`."""
    allowed = min(info.file_size, cap, budget)
    out = bytearray()
    try:
        with archive.open(info) as stream:
            while chunk := stream.read(_CHUNK):
                out += chunk
                if len(out) > allowed:
                    break
    except NotImplementedError as exc:
        raise DeckSourceError(
            Code.ZIP_UNSUPPORTED, f"{info.filename!r}: {exc}", file=info.filename
        ) from None
    except (zipfile.BadZipFile, EOFError, OSError, ValueError) as exc:
        raise DeckSourceError(
            Code.ZIP_CORRUPT, f"{info.filename!r} is damaged: {exc}", file=info.filename
        ) from None
    if len(out) > allowed:
        code = Code.FILE_TOO_LARGE if len(out) > cap else Code.TOO_LARGE
        raise DeckSourceError(
            code,
            f"{info.filename!r} inflates past its declared size or the limits",
            file=info.filename,
        )
    if len(out) != info.file_size:
        raise DeckSourceError(
            Code.ZIP_CORRUPT,
            f"{info.filename!r} inflated to {len(out)} bytes, not the {info.file_size} declared",
            file=info.filename,
        )
    return bytes(out)


def read_zip(data: bytes, limits: ZipLimits) -> dict[str, bytes]:
    """Every file in the ZIP `data` by its path, after checking names, kinds and sizes.

    Folders are not returned. Raises `DeckSourceError` on the first unsafe or damaged entry.
    """
    with _open(data) as archive:
        infos = _check_entries(archive, limits)
        files: dict[str, bytes] = {}
        remaining = limits.max_total_bytes
        for info in infos:
            content = _inflate(archive, info, remaining, limits.max_file_bytes)
            remaining -= len(content)
            files[info.filename] = content
        return files


def extract_zip(data: bytes, limits: ZipLimits, dest: Path) -> dict[str, bytes]:
    """Check and read the ZIP `data` like `read_zip`, then write its files under `dest`.

    Nothing is written until every entry has been read and checked; each target path is
    confirmed to stay inside `dest` before it is created.
    """
    files = read_zip(data, limits)
    root = dest.resolve()
    for name, content in files.items():
        target = (root / name).resolve()
        if not target.is_relative_to(root):
            raise DeckSourceError(Code.PATH_ESCAPE, f"{name!r} escapes {dest}", file=name)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
    return files
