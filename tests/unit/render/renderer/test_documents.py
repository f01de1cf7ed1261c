"""The renderer's document cache: by content key, bounded in bytes, least recently used out."""

from __future__ import annotations

from deckyard.render.protocol import document_key
from deckyard.render.renderer.registry import DocumentCache


def doc(n: int, size: int = 100) -> str:
    return f"{n:04d}" + "x" * (size - 4)


def test_the_cache_never_holds_more_than_its_limit_and_drops_the_least_recently_used() -> None:
    cache = DocumentCache(limit_bytes=300)
    keys = [cache.keep(doc(n)) for n in range(3)]
    assert cache.size_bytes == 300 and len(cache) == 3
    assert cache.get(keys[0]) == doc(0)  # now the most recently used
    fourth = cache.keep(doc(3))
    assert cache.size_bytes <= 300
    assert keys[1] not in cache and cache.get(keys[1]) is None
    assert keys[0] in cache and keys[2] in cache and fourth in cache
    assert cache.evictions == 1


def test_a_key_is_the_documents_sha256_and_an_oversized_document_is_not_kept() -> None:
    cache = DocumentCache(limit_bytes=150)
    small = cache.keep(doc(1))
    assert small == document_key(doc(1))
    big = cache.keep(doc(2, size=151))
    assert big not in cache and small in cache and cache.size_bytes == 100
    assert cache.keep(doc(1)) == small and cache.size_bytes == 100
