"""Builds a checked `DeckSource` from a manifest and a map of deck files, whatever they came from.

Folders (`folder.py`), ZIP uploads (`zip_archive.py`) and JSON bodies (`json_body.py`) all end
here, so the rules (the `deck.toml` manifest, page names and kinds, page order, theme and fonts
present, limits) are the same for each. Every problem raises `DeckSourceError` naming the file
or the field.
"""

from __future__ import annotations

import posixpath
import tomllib
from collections.abc import Mapping
from typing import Any, NoReturn

from pydantic import ValidationError

from deckyard.decks.errors import DeckSourceError
from deckyard.decks.errors import DeckSourceErrorCode as Code
from deckyard.decks.source.deck_source import (
    DEFAULT_SLIDE_HEIGHT,
    DEFAULT_SLIDE_WIDTH,
    PAGE_EXTENSIONS,
    Asset,
    DeckManifest,
    DeckSource,
    PageSource,
    SlideSize,
    SourceWarning,
    media_type_for,
)
from deckyard.decks.source.limits import DeckLimits, ZipLimits
from deckyard.decks.source.theme_names import is_builtin_theme

MANIFEST_FILE = "deck.toml"
PAGES_DIR = "pages/"
ASSETS_DIR = "assets/"
_IGNORED_NAMES = frozenset({".DS_Store", "Thumbs.db", "desktop.ini"})

_PYDANTIC_CODES = {"extra_forbidden": Code.FIELD_UNKNOWN, "missing": Code.FIELD_MISSING}


def field_path(loc: tuple[int | str, ...], prefix: str = "") -> str:
    """`("fonts", 0, "file")` as `fonts[0].file`, after an optional dotted `prefix`."""
    out = prefix
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out


def _field_problem(err: Any, file: str | None, prefix: str) -> DeckSourceError:
    field = field_path(tuple(err["loc"]), prefix)
    code = _PYDANTIC_CODES.get(err["type"], Code.FIELD_INVALID)
    where = f"{file}: " if file else ""
    if code is Code.FIELD_UNKNOWN:
        message = f"{where}unknown field {field!r}"
    elif code is Code.FIELD_MISSING:
        message = f"{where}field {field!r} is required"
    else:
        message = f"{where}field {field!r}: {err['msg']}"
    return DeckSourceError(code, message, file=file, field=field)


def raise_validation_error(
    exc: ValidationError, *, file: str | None = None, prefix: str = ""
) -> NoReturn:
    """Turn pydantic's errors into one `DeckSourceError` naming each field (the rest in `also`)."""
    problems = [_field_problem(err, file, prefix) for err in exc.errors()]
    raise DeckSourceError.of_all(problems) from None


def decode_text(data: bytes, file: str) -> str:
    """UTF-8 text of `data` without a byte-order mark and with `\\n` line ends."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DeckSourceError(
            Code.NOT_UTF8, f"{file} is not UTF-8 text (byte {exc.start})", file=file
        ) from None
    return text.replace("\r\n", "\n").replace("\r", "\n")


def safe_relative(path: str, *, file: str | None, field: str) -> str:
    """`path` normalised as a deck-root relative POSIX path; escaping paths are refused."""
    normal = posixpath.normpath(path.strip())
    if path.startswith("/") or "\\" in path or ":" in path:
        raise DeckSourceError(
            Code.FIELD_INVALID, f"{field}: {path!r} must be relative", file=file, field=field
        )
    if normal in (".", "") or normal.startswith("../") or normal == "..":
        raise DeckSourceError(
            Code.FIELD_INVALID,
            f"{field}: {path!r} escapes the deck folder",
            file=file,
            field=field,
        )
    return normal


def parse_manifest(raw: Mapping[str, Any], *, file: str | None, prefix: str) -> DeckManifest:
    """The manifest in `raw`, or a `DeckSourceError` naming the bad field."""
    try:
        return DeckManifest.model_validate(raw)
    except ValidationError as exc:
        raise_validation_error(exc, file=file, prefix=prefix)


def manifest_from_toml(data: bytes) -> DeckManifest:
    """The manifest in the bytes of a `deck.toml` file."""
    text = decode_text(data, MANIFEST_FILE)
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise DeckSourceError(
            Code.MANIFEST_SYNTAX, f"{MANIFEST_FILE}: {exc}", file=MANIFEST_FILE
        ) from None
    except RecursionError:
        raise DeckSourceError(
            Code.MANIFEST_SYNTAX, f"{MANIFEST_FILE} is nested too deeply", file=MANIFEST_FILE
        ) from None
    return parse_manifest(raw, file=MANIFEST_FILE, prefix="")


def checked_manifest(data: bytes, files: Mapping[str, bytes], limits: DeckLimits) -> DeckManifest:
    """The manifest in `deck.toml`'s bytes `data`, for a deck of `files`.

    When the manifest is refused, the pages are still checked against a default manifest, so
    one run reports the manifest's problems and the pages' together.
    """
    try:
        return manifest_from_toml(data)
    except DeckSourceError as exc:
        problems = exc.every()
        try:
            assemble_deck(DeckManifest(title=MANIFEST_FILE), files, limits)
        except DeckSourceError as more:
            problems += more.every()
        raise DeckSourceError.of_all(problems) from None


def missing_manifest(where: str) -> DeckSourceError:
    """The refusal of a deck without `deck.toml`, saying `where` it was looked for."""
    return DeckSourceError(
        Code.MANIFEST_MISSING, f"{MANIFEST_FILE} not found {where}", file=MANIFEST_FILE
    )


def check_file_totals(count: int, total: int, limits: ZipLimits) -> None:
    """Refuse a deck of more than `limits` files or bytes so far."""
    if count > limits.max_entries:
        raise DeckSourceError(
            Code.TOO_MANY_FILES,
            f"the deck has {count} files; at most {limits.max_entries} are allowed",
        )
    if total > limits.max_total_bytes:
        raise DeckSourceError(
            Code.TOO_LARGE, f"the deck's files exceed {limits.max_total_bytes} bytes"
        )


def _pages(files: Mapping[str, bytes], problems: list[DeckSourceError]) -> dict[str, PageSource]:
    """Page sources keyed by file name (`01-cover.md`); each bad page file is a problem."""
    pages: dict[str, PageSource] = {}
    names: dict[str, str] = {}
    for path, data in files.items():
        if not path.startswith(PAGES_DIR):
            continue
        filename = path[len(PAGES_DIR) :]
        if filename in _IGNORED_NAMES or filename.startswith("."):
            continue
        if "/" in filename:
            problems.append(
                DeckSourceError(Code.BAD_NAME, f"{path}: pages/ must not have folders", file=path)
            )
            continue
        stem, ext = posixpath.splitext(filename)
        kind = PAGE_EXTENSIONS.get(ext.lower())
        if kind is None:
            problems.append(
                DeckSourceError(
                    Code.PAGE_KIND_UNKNOWN,
                    f"{path}: a page must end in .html, .htm, .md or .markdown",
                    file=path,
                )
            )
            continue
        if stem in names:
            problems.append(
                DeckSourceError(
                    Code.PAGE_DUPLICATE,
                    f"{path} and pages/{names[stem]} would both be page {stem!r}",
                    file=path,
                )
            )
            continue
        names[stem] = filename
        try:
            pages[filename] = PageSource(name=stem, kind=kind, text=decode_text(data, path))
        except DeckSourceError as exc:
            problems.append(exc)
        except ValidationError:
            problems.append(
                DeckSourceError(
                    Code.PAGE_NAME_INVALID,
                    f"{path}: a page name uses letters, digits, '.', '_' and '-' (at most 100)",
                    file=path,
                )
            )
    return pages


def _ordered(
    manifest: DeckManifest,
    pages: dict[str, PageSource],
    default_order: list[str],
    manifest_file: str | None,
    prefix: str,
    problems: list[DeckSourceError],
) -> list[PageSource]:
    if manifest.pages is None:
        return [pages[name] for name in default_order]
    ordered: list[PageSource] = []
    for i, filename in enumerate(manifest.pages):
        field = field_path(("pages", i), prefix)
        if filename not in pages:
            problems.append(
                DeckSourceError(
                    Code.PAGE_NOT_FOUND,
                    f"{field}: pages/{filename} does not exist",
                    file=manifest_file,
                    field=field,
                )
            )
        elif pages[filename] in ordered:
            problems.append(
                DeckSourceError(
                    Code.PAGE_DUPLICATE,
                    f"{field}: {filename} is listed twice",
                    file=manifest_file,
                    field=field,
                )
            )
        else:
            ordered.append(pages[filename])
    for unlisted in sorted(set(pages) - set(manifest.pages)):
        problems.append(
            DeckSourceError(
                Code.PAGE_NOT_LISTED,
                f"pages/{unlisted} is not listed in {field_path(('pages',), prefix)}",
                file=f"{PAGES_DIR}{unlisted}",
                field=field_path(("pages",), prefix),
            )
        )
    return ordered


def _complete_slide(
    manifest: DeckManifest, manifest_file: str | None, prefix: str
) -> tuple[DeckManifest, list[SourceWarning]]:
    """A `[slide]` table giving only the width (or height) keeps the default 16:9 aspect."""
    given = manifest.slide.model_fields_set
    if given not in ({"width"}, {"height"}):
        return manifest, []
    width, height = manifest.slide.width, manifest.slide.height
    if given == {"width"}:
        height = max(16, round(width * DEFAULT_SLIDE_HEIGHT / DEFAULT_SLIDE_WIDTH))
        said = f"gives only width = {width}; height = {height} keeps"
    else:
        width = max(16, round(height * DEFAULT_SLIDE_WIDTH / DEFAULT_SLIDE_HEIGHT))
        said = f"gives only height = {height}; width = {width} keeps"
    table = field_path(("slide",), prefix)
    note = SourceWarning(
        file=manifest_file,
        message=f"[{table}] {said} the default 16:9 aspect ratio; give both to choose another",
    )
    slide = SlideSize(width=width, height=height)
    return manifest.model_copy(update={"slide": slide}), [note]


def assemble_deck(
    manifest: DeckManifest,
    files: Mapping[str, bytes],
    limits: DeckLimits,
    *,
    manifest_file: str | None = MANIFEST_FILE,
    prefix: str = "",
    extra_pages: list[PageSource] | None = None,
    theme_css: str | None = None,
) -> DeckSource:
    """A checked deck from `manifest` and deck-root relative `files` (pages, assets, theme).

    `extra_pages` come already parsed (the JSON form) and keep their given order when the
    manifest has none; `theme_css` is inline theme text, used when the manifest names no file.
    Every problem found is raised at once: the first, with the others in its `also`.
    """
    manifest, warnings = _complete_slide(manifest, manifest_file, prefix)
    problems: list[DeckSourceError] = []
    slide = manifest.slide
    for name, value in (("width", slide.width), ("height", slide.height)):
        if value > limits.max_slide_dimension:
            field = field_path(("slide", name), prefix)
            message = f"{field} is {value}; at most {limits.max_slide_dimension} is allowed"
            problems.append(
                DeckSourceError(Code.SLIDE_TOO_LARGE, message, file=manifest_file, field=field)
            )
    pages = _pages(files, problems)
    default_order = sorted(pages)
    for i, page in enumerate(extra_pages or []):
        if any(known.name == page.name for known in pages.values()):
            field = f"pages[{i}].name"
            problems.append(
                DeckSourceError(
                    Code.PAGE_DUPLICATE, f"{field}: page {page.name!r} is given twice", field=field
                )
            )
            continue
        key = f"{page.name}.{page.kind.value}"
        pages[key] = page
        default_order.append(key)
    ordered = _ordered(manifest, pages, default_order, manifest_file, prefix, problems)
    if not ordered and not problems:
        problems.append(
            DeckSourceError(Code.NO_PAGES, "the deck has no pages in pages/", file=PAGES_DIR)
        )
    if len(ordered) > limits.max_pages:
        problems.append(
            DeckSourceError(
                Code.TOO_MANY_PAGES,
                f"the deck has {len(ordered)} pages; at most {limits.max_pages} are allowed",
            )
        )
    assets = {
        path: Asset(path=path, data=data, media_type=media_type_for(path))
        for path, data in sorted(files.items())
        if path.startswith(ASSETS_DIR) and posixpath.basename(path) not in _IGNORED_NAMES
    }
    theme_path: str | None = None
    if manifest.theme is not None:
        theme_field = field_path(("theme",), prefix)
        theme_path = safe_relative(manifest.theme, file=manifest_file, field=theme_field)
        if theme_path not in files and is_builtin_theme(theme_path):
            theme_css = f'@import "{theme_path}";\n'
            theme_path = None
        elif theme_path not in files:
            problems.append(
                DeckSourceError(
                    Code.THEME_NOT_FOUND,
                    f"{theme_field}: {theme_path} does not exist",
                    file=manifest_file,
                    field=theme_field,
                )
            )
        else:
            theme_css = decode_text(files[theme_path], theme_path)
    for i, font in enumerate(manifest.fonts):
        font_field = field_path(("fonts", i, "file"), prefix)
        font_path = safe_relative(font.file, file=manifest_file, field=font_field)
        if font_path not in assets:
            problems.append(
                DeckSourceError(
                    Code.FONT_NOT_FOUND,
                    f"{font_field}: {font.file} is not a file in assets/",
                    file=manifest_file,
                    field=font_field,
                )
            )
    if problems:
        raise DeckSourceError.of_all(problems)
    return DeckSource(
        manifest=manifest,
        pages=ordered,
        assets=assets,
        theme_css=theme_css or "",
        theme_path=theme_path,
        warnings=warnings,
    )
