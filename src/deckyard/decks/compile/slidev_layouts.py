"""Puts a Slidev slide's content into Slidev's own layout, read from its vendored `.vue` file.

Slidev wraps each slide in a Vue layout component (`layouts/cover.vue` of the default theme,
`layouts/two-cols.vue` of `@slidev/client`, …). `scripts/setup` installs both packages into
`vendor/js/` (pinned by its lock file), and this module reads their templates: static classes
and elements as written, each marked with the layout's scope attribute as Vue marks them for
its `<style scoped>`, each `<slot>` filled with the slide's part of that name (`::right::`),
the bindings Slidev's layouts use (`:class="props.class"`, `:style="style"` from
`handleBackground`) computed as `layoutHelper.ts` does, and the slide's `class` on the root
element when the layout takes no `class` of its own (Vue's attribute fallthrough). Other Vue
bindings (`v-if`, events) are dropped; no layout of the pinned version has one that shows.
The page is wrapped as Slidev's slide container (`.slidev-slide-content > .slidev-page`) at
Slidev's canvas size and scaled to the slide, so its rem-based sizes come out as Slidev's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from bs4 import BeautifulSoup
from bs4.element import NavigableString, Tag

VENDOR_JS = Path(__file__).resolve().parents[4] / "vendor" / "js"
LAYOUT_DIRS = (
    VENDOR_JS / "node_modules" / "@slidev" / "theme-default" / "layouts",
    VENDOR_JS / "node_modules" / "@slidev" / "client" / "layouts",
)
"""Where Slidev's layouts are, the theme's first: its layouts win over the client's."""

SHELL_CLASSES = "slidev-slide-content bg-main font-sans"
"""Slidev's slide container: its background and font (`SlideContainer.vue`, `index.css`)."""

_TEMPLATE = re.compile(r"^<template>\s*(?P<body>.*)</template>", re.DOTALL | re.MULTILINE)
_SCRIPT = re.compile(r"<script\b[^>]*>(?P<body>.*?)</script>", re.DOTALL)
_PROP = re.compile(r"^\s*(?P<name>\w+)\??\s*:", re.MULTILINE)
_SLOT_LINE = re.compile(r"^::(?P<name>[\w-]+)::\s*$", re.MULTILINE)
_COLOR = ("#", "rgb", "hsl")


@dataclass(frozen=True)
class Layout:
    """One Slidev layout: its template's markup and the props its script declares."""

    name: str
    template: str
    props: frozenset[str]


@lru_cache(maxsize=64)
def slidev_layout(name: str) -> Layout | None:
    """The layout `name` of the vendored Slidev packages, or None when there is none."""
    if not re.fullmatch(r"[\w-]+", name):
        return None
    for folder in LAYOUT_DIRS:
        path = folder / f"{name}.vue"
        if path.is_file():
            source = path.read_text(encoding="utf-8")
            found = _TEMPLATE.search(source)
            if found is None:
                return None
            script = _SCRIPT.search(source)
            declared = script.group("body") if script else ""
            props = declared.split("defineProps", 1)[1] if "defineProps" in declared else ""
            return Layout(name, found.group("body"), frozenset(_PROP.findall(props)))
    return None


def layouts_available() -> bool:
    """Whether the vendored Slidev layouts are installed."""
    return slidev_layout("default") is not None


def split_slots(text: str) -> dict[str, str]:
    """A slide's Markdown parted by Slidev's slot lines (`::right::`); the rest is `default`."""
    slots: dict[str, list[str]] = {"default": []}
    current = "default"
    for line in text.split("\n"):
        found = _SLOT_LINE.match(line)
        if found:
            current = found.group("name")
            slots.setdefault(current, [])
            slots[current].append("")
            continue
        for name, lines in slots.items():
            lines.append(line if name == current else "")
    return {name: "\n".join(lines) for name, lines in slots.items()}


def background_style(background: object, *, dim: bool, size: str = "cover") -> str:
    """Slidev's `handleBackground` (`layoutHelper.ts`) as an inline style."""
    value = str(background).strip() if isinstance(background, str) else ""
    if not value:
        return f"background-repeat: no-repeat; background-position: center; background-size: {size}"
    if value.startswith(_COLOR):
        parts = [f"background: {value}"]
    else:
        image = f"linear-gradient(#0005, #0008), url({value})" if dim else f'url("{value}")'
        parts = ["color: white", f"background-image: {image}"]
    parts += ["background-repeat: no-repeat", "background-position: center"]
    parts.append(f"background-size: {size}")
    return "; ".join(parts)


def _fill(tag: Tag, slots: Mapping[str, str]) -> None:
    """Put the slot's content (its HTML) in place of `<slot>`; an empty slot keeps its fallback."""
    name = str(tag.get("name") or "default")
    content = slots.get(name, "")
    if content.strip():
        fragment = BeautifulSoup(content, "html.parser")
        tag.replace_with(fragment)
    else:
        tag.unwrap()


def scope_attribute(name: str) -> str:
    """The attribute that scopes layout `name`'s `<style scoped>` (`slidev_styles.cjs`)."""
    return f"data-v-slidev-{name}"


def render_layout(layout: Layout, slots: Mapping[str, str], settings: Mapping[str, object]) -> str:
    """The layout's markup with `slots` (rendered HTML by slot name) and the slide's settings."""
    soup = BeautifulSoup(layout.template, "html.parser")
    styles = {
        "cover": background_style(settings.get("background"), dim=True),
        "image": background_style(
            settings.get("image"), dim=False, size=str(settings.get("backgroundSize") or "cover")
        ),
    }
    style = styles["cover"] if "background" in layout.props else styles["image"]
    root = next((t for t in soup.children if isinstance(t, Tag)), None)
    for tag in list(soup.find_all(True)):
        if not isinstance(tag, Tag):
            continue
        if tag.name != "slot":
            tag[scope_attribute(layout.name)] = ""
        for attr in list(tag.attrs):
            value = str(tag.attrs[attr])
            if attr == ":class" and value.startswith("props."):
                extra = str(settings.get(value.removeprefix("props.")) or "")
                tag["class"] = " ".join([*tag.get_attribute_list("class"), *extra.split()])
                del tag.attrs[attr]
            elif attr == ":style" and value == "style":
                tag["style"] = style
                del tag.attrs[attr]
            elif attr.startswith((":", "@", "v-", "#")):
                del tag.attrs[attr]
    extra = str(settings.get("class") or "")
    if root is not None and "class" not in layout.props and extra.strip():
        root["class"] = " ".join([*root.get_attribute_list("class"), *extra.split()])
    for tag in list(soup.find_all("slot")):
        _fill(tag, slots)
    return "".join(
        str(node) for node in soup.contents if not isinstance(node, NavigableString) or node.strip()
    )


def slidev_page(content: str, width: float, height: float, scale: float) -> str:
    """The laid-out slide inside Slidev's slide container, at the canvas size, scaled to the
    slide by a transform, as Slidev scales its canvas."""
    return (
        f'<div class="{SHELL_CLASSES}" style="width: {width:g}px; height: {height:g}px; '
        f'transform: scale({scale:.6g}); transform-origin: 0 0">'
        f'<div class="slidev-page">{content}</div></div>'
    )
