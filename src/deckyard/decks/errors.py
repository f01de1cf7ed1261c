"""Error codes and exceptions of the deck domain: loading sources, compiling, verifying sites.

Each stage raises one exception type carrying a machine-readable `StrEnum` code, so the HTTP
layer can map codes to statuses (`http_status`) without matching on message text.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class DeckSourceErrorCode(StrEnum):
    """Why a deck source (folder, ZIP upload or JSON body) was refused."""

    BODY_TOO_LARGE = "DECK_BODY_TOO_LARGE"
    ZIP_INVALID = "DECK_ZIP_INVALID"
    ZIP_CORRUPT = "DECK_ZIP_CORRUPT"
    ZIP_ENCRYPTED = "DECK_ZIP_ENCRYPTED"
    ZIP_UNSUPPORTED = "DECK_ZIP_UNSUPPORTED"
    PATH_ESCAPE = "DECK_PATH_ESCAPE"
    ABSOLUTE_PATH = "DECK_ABSOLUTE_PATH"
    BAD_NAME = "DECK_BAD_NAME"
    SYMLINK = "DECK_SYMLINK"
    SPECIAL_FILE = "DECK_SPECIAL_FILE"
    DUPLICATE_ENTRY = "DECK_DUPLICATE_ENTRY"
    TOO_MANY_FILES = "DECK_TOO_MANY_FILES"
    TOO_LARGE = "DECK_TOO_LARGE"
    FILE_TOO_LARGE = "DECK_FILE_TOO_LARGE"
    MANIFEST_MISSING = "DECK_MANIFEST_MISSING"
    MANIFEST_SYNTAX = "DECK_MANIFEST_SYNTAX"
    JSON_SYNTAX = "DECK_JSON_SYNTAX"
    FIELD_UNKNOWN = "DECK_FIELD_UNKNOWN"
    FIELD_MISSING = "DECK_FIELD_MISSING"
    FIELD_INVALID = "DECK_FIELD_INVALID"
    NOT_UTF8 = "DECK_NOT_UTF8"
    NO_PAGES = "DECK_NO_PAGES"
    TOO_MANY_PAGES = "DECK_TOO_MANY_PAGES"
    PAGE_KIND_UNKNOWN = "DECK_PAGE_KIND_UNKNOWN"
    PAGE_NAME_INVALID = "DECK_PAGE_NAME_INVALID"
    PAGE_DUPLICATE = "DECK_PAGE_DUPLICATE"
    PAGE_NOT_FOUND = "DECK_PAGE_NOT_FOUND"
    PAGE_NOT_LISTED = "DECK_PAGE_NOT_LISTED"
    THEME_NOT_FOUND = "DECK_THEME_NOT_FOUND"
    FONT_NOT_FOUND = "DECK_FONT_NOT_FOUND"
    ASSET_PATH_INVALID = "DECK_ASSET_PATH_INVALID"
    ASSET_DUPLICATE = "DECK_ASSET_DUPLICATE"
    SLIDE_TOO_LARGE = "DECK_SLIDE_TOO_LARGE"
    FOLDER_NOT_FOUND = "DECK_FOLDER_NOT_FOUND"
    MARP_UNAVAILABLE = "DECK_MARP_UNAVAILABLE"
    MARP_FAILED = "DECK_MARP_FAILED"


_TOO_LARGE = frozenset(
    {
        DeckSourceErrorCode.BODY_TOO_LARGE,
        DeckSourceErrorCode.TOO_LARGE,
        DeckSourceErrorCode.FILE_TOO_LARGE,
    }
)


class DeckSourceError(Exception):
    """Raised when a deck source is refused; nothing of the source is returned with it."""

    def __init__(
        self,
        code: DeckSourceErrorCode,
        message: str,
        *,
        file: str | None = None,
        field: str | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.file = file
        self.field = field
        self.also: list[DeckSourceError] = []

    @classmethod
    def of_all(cls, problems: list[DeckSourceError]) -> DeckSourceError:
        """The first of `problems`, carrying the others in `also` (one run reports them all)."""
        first = problems[0]
        first.also = problems[1:]
        return first

    def every(self) -> list[DeckSourceError]:
        """This problem and the ones found with it."""
        return [self, *self.also]

    @property
    def http_status(self) -> int:
        """413 when the refusal is about size, else 422."""
        return 413 if self.code in _TOO_LARGE else 422

    def to_dict(self) -> dict[str, str | None]:
        """The error as a JSON-ready body: code, message, file and field."""
        return {"code": self.code, "message": self.message, "file": self.file, "field": self.field}

    def __repr__(self) -> str:
        return f"DeckSourceError({self.code!s}, {self.message!r}, file={self.file!r})"


class CompileErrorCode(StrEnum):
    """Why a page did not compile."""

    MISSING_ASSET = "COMPILE_MISSING_ASSET"
    ESCAPING_PATH = "COMPILE_ESCAPING_PATH"
    ABSOLUTE_PATH = "COMPILE_ABSOLUTE_PATH"
    EXTERNAL_REFERENCE = "COMPILE_EXTERNAL_REFERENCE"
    INVALID_REFERENCE = "COMPILE_INVALID_REFERENCE"
    CSS_SYNTAX = "COMPILE_CSS_SYNTAX"
    CSS_UNSUPPORTED = "COMPILE_CSS_UNSUPPORTED"
    NOT_TEXT = "COMPILE_NOT_TEXT"
    DOCUMENT_TOO_LARGE = "COMPILE_DOCUMENT_TOO_LARGE"
    PAGE_NOT_FOUND = "COMPILE_PAGE_NOT_FOUND"
    FRAMEWORK_DECK = "COMPILE_FRAMEWORK_DECK"


@dataclass(frozen=True)
class CompileProblem:
    """One thing wrong with a page: what, where (page, line) and which reference."""

    code: CompileErrorCode
    message: str
    page: str
    reference: str | None = None
    line: int | None = None

    def describe(self) -> str:
        """One readable line: `page:line: message`."""
        where = self.page if self.line is None else f"{self.page}:{self.line}"
        return f"{where}: {self.message}"


class CompileError(Exception):
    """Raised when one or more pages do not compile; `problems` lists every one found."""

    def __init__(self, problems: list[CompileProblem]) -> None:
        if not problems:
            raise ValueError("a CompileError needs at least one problem")
        first = problems[0]
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        super().__init__(first.describe() + more)
        self.problems = problems

    @property
    def code(self) -> CompileErrorCode:
        """The code of the first problem."""
        return self.problems[0].code

    @property
    def page(self) -> str:
        """The page of the first problem."""
        return self.problems[0].page

    @property
    def reference(self) -> str | None:
        """The reference of the first problem, when it is about one."""
        return self.problems[0].reference

    @property
    def line(self) -> int | None:
        """The line of the first problem, when known."""
        return self.problems[0].line


class SiteErrorCode(StrEnum):
    """Why a built site ZIP failed verification (ZIP safety codes are `DeckSourceErrorCode`)."""

    MANIFEST_MISSING = "SITE_MANIFEST_MISSING"
    MANIFEST_INVALID = "SITE_MANIFEST_INVALID"
    INDEX_MISSING = "SITE_INDEX_MISSING"
    FILE_MISSING = "SITE_FILE_MISSING"
    FILE_UNLISTED = "SITE_FILE_UNLISTED"
    SIZE_MISMATCH = "SITE_SIZE_MISMATCH"
    HASH_MISMATCH = "SITE_HASH_MISMATCH"
    PAGE_COUNT_MISMATCH = "SITE_PAGE_COUNT_MISMATCH"


class SiteVerificationError(Exception):
    """Raised when a built site ZIP is unsafe or does not match its manifest."""

    def __init__(
        self, code: SiteErrorCode | DeckSourceErrorCode, message: str, *, file: str | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.file = file


class DeckEditErrorCode(StrEnum):
    """Why a direct deck edit (delete, rename, reorder a page) was refused."""

    EDIT_CONFLICT = "EDIT_CONFLICT"
    PAGE_NOT_FOUND = "PAGE_NOT_FOUND"
    DECK_NOT_FOUND = "NOT_FOUND"
    PAGE_EXISTS = "PAGE_EXISTS"
    LAST_PAGE = "DECK_LAST_PAGE"
    ORDER_MISMATCH = "PAGE_ORDER_MISMATCH"


class DeckEditError(Exception):
    """A refused deck edit; `current` is the version the conflicting row is at, when known."""

    def __init__(
        self,
        code: DeckEditErrorCode,
        message: str,
        *,
        current: int | None = None,
        field: str | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.current = current
        self.field = field
