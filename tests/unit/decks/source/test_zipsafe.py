"""Hostile ZIP uploads are refused with the right code, and nothing of them is returned."""

from __future__ import annotations

import io
import os
import stat
import struct
import zipfile

import pytest

from deckyard.decks.errors import DeckSourceError
from deckyard.decks.errors import DeckSourceErrorCode as Code
from deckyard.decks.source.limits import DeckLimits, ZipLimits
from deckyard.decks.source.zip_archive import load_deck_zip
from deckyard.decks.source.zipsafe import read_zip

GOOD = {"deck.toml": b'title = "T"\n', "pages/a.md": b"# A"}


def _zip(entries: list[tuple[zipfile.ZipInfo | str, bytes]]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for info, data in entries:
            archive.writestr(info, data)
    return out.getvalue()


def _good_plus(*extra: tuple[zipfile.ZipInfo | str, bytes]) -> bytes:
    return _zip([*GOOD.items(), *extra])


def _refused(data: bytes, limits: DeckLimits) -> DeckSourceError:
    result = None
    with pytest.raises(DeckSourceError) as excinfo:
        result = load_deck_zip(data, limits)
    assert result is None
    return excinfo.value


def test_a_good_zip_loads(small_limits: DeckLimits) -> None:
    assert [p.name for p in load_deck_zip(_good_plus(), small_limits).pages] == ["a"]


@pytest.mark.parametrize(
    ("name", "code"),
    [
        ("../evil.txt", Code.PATH_ESCAPE),
        ("assets/../../evil.txt", Code.PATH_ESCAPE),
        ("/etc/passwd", Code.ABSOLUTE_PATH),
        ("C:/Windows/evil.txt", Code.ABSOLUTE_PATH),
        ("c:evil.txt", Code.ABSOLUTE_PATH),
        ("..\\evil.txt", Code.BAD_NAME),
        ("assets//x.png", Code.BAD_NAME),
    ],
)
def test_escaping_and_absolute_names_are_refused(
    small_limits: DeckLimits, name: str, code: Code
) -> None:
    error = _refused(_good_plus((zipfile.ZipInfo(name), b"x")), small_limits)
    assert error.code is code
    assert error.file == name


def test_symlink_entries_are_refused(small_limits: DeckLimits) -> None:
    info = zipfile.ZipInfo("assets/link")
    info.create_system = 3
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    error = _refused(_good_plus((info, b"/etc/passwd")), small_limits)
    assert (error.code, error.file) == (Code.SYMLINK, "assets/link")


def test_device_entries_are_refused(small_limits: DeckLimits) -> None:
    info = zipfile.ZipInfo("assets/dev")
    info.create_system = 3
    info.external_attr = (stat.S_IFCHR | 0o644) << 16
    assert _refused(_good_plus((info, b"")), small_limits).code is Code.SPECIAL_FILE


def test_too_many_entries_are_refused(small_limits: DeckLimits) -> None:
    extra = [(f"assets/{i}.txt", b"x") for i in range(small_limits.zip.max_entries)]
    assert _refused(_good_plus(*extra), small_limits).code is Code.TOO_MANY_FILES


def test_duplicate_entries_are_refused(small_limits: DeckLimits) -> None:
    with pytest.warns(UserWarning, match="Duplicate name"):
        data = _good_plus(("assets/a.txt", b"1"), ("assets/a.txt", b"2"))
    error = _refused(data, small_limits)
    assert (error.code, error.file) == (Code.DUPLICATE_ENTRY, "assets/a.txt")


def test_zip_bomb_by_declared_total_is_refused_before_inflating(small_limits: DeckLimits) -> None:
    chunk = b"\0" * (400 * 1024)
    data = _good_plus(*[(f"assets/{i}.bin", chunk) for i in range(3)])
    assert len(data) < 20 * 1024
    error = _refused(data, small_limits)
    assert error.code is Code.TOO_LARGE
    assert error.http_status == 413


def test_zip_bomb_by_one_huge_file_is_refused(small_limits: DeckLimits) -> None:
    data = _good_plus(("assets/bomb.bin", b"\0" * (5 * 1024 * 1024)))
    assert len(data) < 20 * 1024
    assert _refused(data, small_limits).code is Code.FILE_TOO_LARGE


def _lie_about_size(data: bytes, name: bytes, declared: int) -> bytes:
    """Rewrite the uncompressed size of entry `name` in its local and central headers."""
    buf = bytearray(data)
    local = buf.find(b"PK\x03\x04")
    while local != -1:
        name_len = struct.unpack_from("<H", buf, local + 26)[0]
        if bytes(buf[local + 30 : local + 30 + name_len]) == name:
            struct.pack_into("<I", buf, local + 22, declared)
        local = buf.find(b"PK\x03\x04", local + 4)
    central = buf.find(b"PK\x01\x02")
    while central != -1:
        name_len = struct.unpack_from("<H", buf, central + 28)[0]
        if bytes(buf[central + 46 : central + 46 + name_len]) == name:
            struct.pack_into("<I", buf, central + 24, declared)
        central = buf.find(b"PK\x01\x02", central + 4)
    return bytes(buf)


def test_zip_bomb_that_lies_about_its_size_is_caught_while_reading(
    small_zip_limits: ZipLimits,
) -> None:
    honest = _zip([("bomb.bin", b"\0" * (5 * 1024 * 1024))])
    lying = _lie_about_size(honest, b"bomb.bin", 100)
    assert zipfile.ZipFile(io.BytesIO(lying)).getinfo("bomb.bin").file_size == 100
    result = None
    with pytest.raises(DeckSourceError) as excinfo:
        result = read_zip(lying, small_zip_limits)
    assert result is None
    assert excinfo.value.code is Code.ZIP_CORRUPT
    assert excinfo.value.file == "bomb.bin"


def test_upload_over_the_body_limit_is_refused(small_limits: DeckLimits) -> None:
    data = _good_plus(("assets/noise.bin", os.urandom(3 * 1024 * 1024)))
    assert _refused(data, small_limits).code is Code.BODY_TOO_LARGE


def test_not_a_zip_is_refused(small_limits: DeckLimits) -> None:
    assert _refused(b"this is not a zip", small_limits).code is Code.ZIP_INVALID


def test_encrypted_entries_are_refused(small_limits: DeckLimits) -> None:
    data = bytearray(_good_plus(("assets/secret.txt", b"x")))
    for sig, flag_at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        pos = data.find(sig)
        while pos != -1:
            data[pos + flag_at] |= 0x1
            pos = data.find(sig, pos + 4)
    assert _refused(bytes(data), small_limits).code is Code.ZIP_ENCRYPTED


def test_every_bad_entry_is_named_in_one_refusal(small_limits: DeckLimits) -> None:
    link = zipfile.ZipInfo("assets/link")
    link.create_system = 3
    link.external_attr = (stat.S_IFLNK | 0o777) << 16
    data = _good_plus(
        ("../evil.txt", b"x"), (link, b"/etc/passwd"), ("/abs.txt", b"x"), ("PAGES/A.md", b"x")
    )
    found = [(p.code, p.file) for p in _refused(data, small_limits).every()]
    assert found == [
        (Code.PATH_ESCAPE, "../evil.txt"),
        (Code.SYMLINK, "assets/link"),
        (Code.ABSOLUTE_PATH, "/abs.txt"),
        (Code.DUPLICATE_ENTRY, "PAGES/A.md"),
    ]
