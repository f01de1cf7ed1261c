"""Storage operations on the model catalog (`ai_models`), noun-first: `model_*`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from deckyard.ai.provider import ModelInfo
from deckyard.ai.schema import ai_models


@dataclass(frozen=True)
class CatalogChange:
    """What a catalog sync changed (all empty: nothing was written)."""

    added: list[str]
    removed: list[str]
    updated: list[str]

    @property
    def changed(self) -> bool:
        """True when the stored catalog differed from the provider's list."""
        return bool(self.added or self.removed or self.updated)


@dataclass(frozen=True)
class StoredModel:
    """A catalog row."""

    model_id: str
    owned_by: str | None
    created: int | None
    first_seen_at: datetime


async def model_list(conn: AsyncConnection) -> list[StoredModel]:
    """The stored catalog, by id."""
    rows = await conn.execute(select(ai_models).order_by(ai_models.c.model_id))
    return [StoredModel(r.model_id, r.owned_by, r.created, r.first_seen_at) for r in rows]


def catalog_diff(stored: Sequence[StoredModel], fetched: Sequence[ModelInfo]) -> CatalogChange:
    """What must change for the stored catalog to equal `fetched` (pure)."""
    have = {m.model_id: (m.owned_by, m.created) for m in stored}
    want = {m.id: (m.owned_by, m.created) for m in fetched}
    return CatalogChange(
        added=sorted(set(want) - set(have)),
        removed=sorted(set(have) - set(want)),
        updated=sorted(k for k in set(want) & set(have) if want[k] != have[k]),
    )


async def model_sync(
    conn: AsyncConnection, change: CatalogChange, fetched: Sequence[ModelInfo], now: datetime
) -> None:
    """Apply a non-empty `change` in the caller's write transaction."""
    by_id = {m.id: m for m in fetched}
    if change.removed:
        await conn.execute(delete(ai_models).where(ai_models.c.model_id.in_(change.removed)))
    if change.added:
        await conn.execute(
            insert(ai_models),
            [
                {
                    "model_id": k,
                    "owned_by": by_id[k].owned_by,
                    "created": by_id[k].created,
                    "first_seen_at": now,
                }
                for k in change.added
            ],
        )
    for k in change.updated:
        await conn.execute(
            update(ai_models)
            .where(ai_models.c.model_id == k)
            .values(owned_by=by_id[k].owned_by, created=by_id[k].created)
        )
