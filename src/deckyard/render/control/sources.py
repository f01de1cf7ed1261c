"""Where the renderers are: supervised local ones and configured remote ones, with secrets."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RendererSource:
    """How to reach one renderer: its stable name, its current URL and its shared secret."""

    name: str
    url: str
    secret: str


class RendererSources:
    """The renderers this process can talk to, by name; the supervisor updates URLs on restart."""

    def __init__(self) -> None:
        self._by_name: dict[str, RendererSource] = {}

    def put(self, source: RendererSource) -> None:
        """Add a renderer or replace how to reach it."""
        self._by_name[source.name] = source

    def remove(self, name: str) -> None:
        """Forget a renderer."""
        self._by_name.pop(name, None)

    def get(self, name: str) -> RendererSource | None:
        """The source called `name`, if this process knows it."""
        return self._by_name.get(name)

    def all(self) -> list[RendererSource]:
        """Every known source, by name."""
        return [self._by_name[n] for n in sorted(self._by_name)]

    def names(self) -> set[str]:
        """The names of every known source."""
        return set(self._by_name)


def configured_sources(urls: list[str], secret: str | None) -> list[RendererSource]:
    """Sources for `DECKYARD_RENDERER_URLS`, all under `DECKYARD_RENDERER_SECRET`."""
    if urls and not secret:
        raise ValueError(
            "DECKYARD_RENDERER_URLS needs DECKYARD_RENDERER_SECRET, the renderers' shared secret"
        )
    return [
        RendererSource(name=url.rstrip("/"), url=url.rstrip("/"), secret=secret or "")
        for url in urls
    ]
