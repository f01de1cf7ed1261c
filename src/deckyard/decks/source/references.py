"""Finds the files a Markdown deck's slides load, the way Marp and Slidev resolve them.

One reading for `deckyard import` (which copies the files into the new deck folder) and for
`deckyard render` of a `.md` file (which reads them as the deck's assets), so render accepts
what import accepts: a local reference resolves relative to the Markdown file
(`./images/x.png`), and a root-absolute one (`/x.png`) first in Slidev's `public/`. Either is
rewritten to `assets/<path>` (`public/` dropped); nothing outside the file's folder is read.
A remote reference (`https://…`, `//host/…`) is a load when it is an image, a `src=` (reveal.js's
`data-src=` too), a `poster=`, a reveal.js background (`data-background[-image|-video]=`), a
slide setting's `image:`/`background:` (Slidev's front matter, also as the JSON directive a
slide's front matter becomes), a CSS `url(…)` (in a style
attribute too, where marp-core writes a `![bg](…)` image as `url(&quot;…&quot;)`) or `@import`,
or a `<link rel=stylesheet href=…>`; a Markdown link (`[text](https://…)`) is a hyperlink and
never loaded.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

REFERENCE = re.compile(
    r"""(?P<lead>!?\[[^\]\n]*\]\(|src=["']|url\((?:["']|&quot;|&#39;)?|@import[ \t]+["']"""
    r"""|<link\b(?=[^>]*\bstylesheet\b)[^>]*?\bhref=["']"""
    r"""|(?:data-background(?:-image|-video)?|poster)=["']"""
    r'''|"_?(?:image|background|backgroundImage)":[ \t]*"'''
    r"""|(?m:^[ \t]*(?:image|background|backgroundImage):[ \t]*["']?))"""
    r"""(?P<ref>(?:(?!&quot;|&#39;)[^)"'\s])+)"""
)
REMOTE = re.compile(r"^(https?:)?//", re.IGNORECASE)


def _path_part(ref: str) -> str:
    return ref.split("#", 1)[0].split("?", 1)[0]


def local_file(source_dir: Path, ref: str) -> tuple[str, Path] | None:
    """(deck path under assets/, file) for a local reference outside assets/, if it exists."""
    path = _path_part(ref)
    if not path or path.startswith(("assets/", "data:", "#", "mailto:")) or ":" in path[:8]:
        return None
    candidates = [source_dir / path.lstrip("/")]
    if path.startswith("/"):
        candidates.insert(0, source_dir / "public" / path.lstrip("/"))
    for found in candidates:
        resolved = found.resolve()
        if resolved.is_file() and resolved.is_relative_to(source_dir.resolve()):
            inside = resolved.relative_to(source_dir.resolve()).as_posix()
            return "assets/" + inside.removeprefix("public/"), resolved
    return None


def is_remote_load(match: re.Match[str]) -> bool:
    """Whether a `REFERENCE` match is a remote file the slide loads (not a hyperlink)."""
    return bool(REMOTE.match(match.group("ref"))) and not match.group("lead").startswith("[")


def remote_loads(text: str) -> list[str]:
    """The remote URLs `text` loads (images, `src=`, `url(…)`), in order, once each."""
    found = (m.group("ref") for m in REFERENCE.finditer(text) if is_remote_load(m))
    return list(dict.fromkeys(found))


def rewrite_local(
    text: str, source_dir: Path, carry: Callable[[str, Path], None] | None = None
) -> str:
    """`text` with each local reference outside `assets/` rewritten to its `assets/` path.

    `carry(deck_path, file)` is called for every file found (once per reference); references
    to files that do not exist are left as written, for the compiler to report.
    """

    def replace(match: re.Match[str]) -> str:
        ref = match.group("ref")
        if REMOTE.match(ref):
            return match.group(0)
        local = local_file(source_dir, ref)
        if local is None:
            return match.group(0)
        target, file = local
        if carry is not None:
            carry(target, file)
        return match.group("lead") + target + ref[len(_path_part(ref)) :]

    return REFERENCE.sub(replace, text)
