"""Render inputs by reference: documents stored once by content key, sent to renderers by key.

A render request's row and the renderer call carry a page's `document_key` (the SHA-256 of its
HTML) instead of the document (the example deck's pages are ~780 KiB each, their font inlined).
The document itself is stored once under `render-documents/<key>.html` of the artefact store,
before the row that names it commits (the sweeper's rule: an object may lack a row, never the
reverse); the sweep keeps it while a render request's input names it
(`render_document_keys_referenced`). A renderer that does not hold a key refuses the call with
`RENDER_DOCUMENT_UNKNOWN` and its `missing` keys; `documents_by_value` then puts those
documents back into the body for one more submission, and the renderer keeps them by key.

`DocumentsHeld` remembers which keys each renderer took, so a document it was never sent goes by
value in the first submission: a new page (every validation, every first render of a deck
version) does not pay a refused call first.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

from deckyard.artifacts import ArtifactStore
from deckyard.render.protocol import document_key

DOCUMENT_PREFIX = "render-documents/"


def document_object_key(key: str) -> str:
    """The artefact store key of the document whose content key is `key`."""
    return f"{DOCUMENT_PREFIX}{key}.html"


async def documents_by_reference(
    store: ArtifactStore, render_input: dict[str, Any]
) -> dict[str, Any]:
    """`render_input` (one render or `{"pages": [...]}`) with each document stored and replaced by
    its key. Storing again refreshes the object's age, so a sweep in progress keeps it."""
    if "pages" in render_input:
        pages = [await _one_by_reference(store, page) for page in render_input["pages"]]
        return {**render_input, "pages": pages}
    return await _one_by_reference(store, render_input)


async def _one_by_reference(store: ArtifactStore, render: dict[str, Any]) -> dict[str, Any]:
    document = render.get("document")
    if document is None:
        return render
    key = document_key(document)
    await store.put(document_object_key(key), document.encode("utf-8"))
    rest = {k: v for k, v in render.items() if k != "document"}
    return {**rest, "document_key": key}


async def documents_by_value(
    store: ArtifactStore, body: dict[str, Any], missing: list[str]
) -> dict[str, Any] | None:
    """`body` (an attempt or a deck attempt) with the `missing` keys' documents by value, or None
    when one of them is no longer stored."""
    wanted = set(missing)
    loaded: dict[str, str] = {}
    renders = body.get("pages", [body])
    keys = {str(r["document_key"]) for r in renders if r.get("document_key") in wanted}
    datas = await asyncio.gather(*(store.get(document_object_key(k)) for k in sorted(keys)))
    for key, data in zip(sorted(keys), datas, strict=True):
        if data is None:
            return None
        loaded[key] = data.decode("utf-8")

    def fill(render: dict[str, Any]) -> dict[str, Any]:
        key = render.get("document_key")
        if key not in loaded:
            return render
        rest = {k: v for k, v in render.items() if k != "document_key"}
        return {**rest, "document": loaded[key]}

    if "pages" in body:
        return {**body, "pages": [fill(page) for page in body["pages"]]}
    return fill(body)


def document_keys(body: dict[str, Any]) -> list[str]:
    """The document keys `body` (an attempt or a deck attempt) names, in order, once each."""
    keys = (r.get("document_key") for r in body.get("pages", [body]))
    return list(dict.fromkeys(k for k in keys if isinstance(k, str)))


class DocumentsHeld:
    """The document keys each renderer took (by value, or by key without a refusal), as far as
    this process saw, for the renderer's current epoch; the newest `limit` per renderer.

    A guess, never a promise: a renderer that dropped a key from its bounded cache, or took it
    from another node, is corrected by its refusal or costs one document sent by value.
    """

    def __init__(self, limit: int = 1024) -> None:
        self.limit = limit
        self._held: dict[str, tuple[str, OrderedDict[str, None]]] = {}

    def _keys(self, renderer: str, epoch: str) -> OrderedDict[str, None]:
        known = self._held.get(renderer)
        if known is None or known[0] != epoch:
            known = (epoch, OrderedDict())
            self._held[renderer] = known
        return known[1]

    def unknown(self, renderer: str, epoch: str, keys: Iterable[str]) -> list[str]:
        """Those of `keys` the renderer was not seen to take in this epoch."""
        held = self._keys(renderer, epoch)
        return [k for k in keys if k not in held]

    def took(self, renderer: str, epoch: str, keys: Iterable[str]) -> None:
        """The renderer accepted a submission naming `keys`: it holds them now."""
        held = self._keys(renderer, epoch)
        for key in keys:
            held[key] = None
            held.move_to_end(key)
        while len(held) > self.limit:
            held.popitem(last=False)
