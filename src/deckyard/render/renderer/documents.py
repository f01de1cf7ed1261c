"""The renderer's documents by key: a bounded, least-recently-used cache in memory.

The control plane sends a render's document as its SHA-256 (`document_key`). A renderer that
holds it renders at once; one that does not refuses the whole call with 422
`RENDER_DOCUMENT_UNKNOWN` and the `missing` keys, and the control plane submits again with those
documents by value, which the renderer keeps under their key for the next render. The cache
lives as long as the process (a new epoch starts empty) and never holds more than
`renderer_document_cache_bytes`; a document larger than that is rendered and not kept.
"""

from __future__ import annotations

from collections import OrderedDict

from deckyard.render.protocol import document_key


class DocumentCache:
    """Documents by content key, at most `limit_bytes` of them (UTF-8 bytes), LRU first out."""

    def __init__(self, limit_bytes: int) -> None:
        self.limit_bytes = limit_bytes
        self._documents: OrderedDict[str, tuple[str, int]] = OrderedDict()
        self.size_bytes = 0
        self.hits = 0
        self.misses = 0
        self.evictions = 0

    def __contains__(self, key: object) -> bool:
        return key in self._documents

    def __len__(self) -> int:
        return len(self._documents)

    def get(self, key: str) -> str | None:
        """The document under `key` (now the most recently used), or None."""
        entry = self._documents.get(key)
        if entry is None:
            self.misses += 1
            return None
        self._documents.move_to_end(key)
        self.hits += 1
        return entry[0]

    def keep(self, document: str) -> str:
        """Keep `document` under its key (evicting the least recently used); the key."""
        key = document_key(document)
        if key in self._documents:
            self._documents.move_to_end(key)
            return key
        size = len(document.encode("utf-8"))
        if size > self.limit_bytes:
            return key
        while self.size_bytes + size > self.limit_bytes:
            _old, (_doc, old_size) = self._documents.popitem(last=False)
            self.size_bytes -= old_size
            self.evictions += 1
        self._documents[key] = (document, size)
        self.size_bytes += size
        return key
