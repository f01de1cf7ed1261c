"""Path and query parameter types shared by the routes, with the bounds the database can hold.

An id outside a 64-bit key's range cannot name a row; refusing it here (422) keeps every route
from handing the driver an integer it overflows on.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Path, Query
from pydantic import BaseModel

from deckyard.db.types import BIG_ID_MAX

RowId = Annotated[int, Path(ge=1, le=BIG_ID_MAX, description="A row id (1 to 2^63 - 1).")]
BeforeId = Annotated[
    int | None, Query(ge=1, le=BIG_ID_MAX, description="Only rows with a smaller id.")
]
AfterId = Annotated[int | None, Query(ge=0, le=BIG_ID_MAX, description="Only rows after this id.")]


def bounded_id(text: str | None) -> int | None:
    """`text` as an id when it is a decimal number in the key range (a header value), else None."""
    if text is None or not text.isascii() or not text.isdigit() or len(text) > 19:
        return None
    value = int(text)
    return value if value <= BIG_ID_MAX else None


def body_schema(model: type[BaseModel]) -> dict[str, Any]:
    """`model`'s JSON schema with its `$defs` inlined, for an `openapi_extra` request body.

    Pydantic points nested models at `#/$defs/...`, which inside /openapi.json would resolve
    against the document root and dangle; an inlined schema stands on its own.
    """
    schema = model.model_json_schema()
    defs: dict[str, Any] = schema.pop("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                rest = {k: v for k, v in node.items() if k != "$ref"}
                return {**inline(defs[ref.removeprefix("#/$defs/")]), **inline(rest)}
            return {k: inline(v) for k, v in node.items()}
        if isinstance(node, list):
            return [inline(v) for v in node]
        return node

    inlined: dict[str, Any] = inline(schema)
    return inlined
