"""/openapi.json stands on its own: every `$ref` resolves inside the document (issue 14)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.helpers.api import running_app


def resolves(doc: dict[str, Any], ref: str) -> bool:
    node: Any = doc
    for part in ref.removeprefix("#/").split("/"):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
async def test_openapi_has_no_dangling_refs(db_url: str) -> None:
    async with running_app(db_url, background_loops=False) as (_app, client):
        r = await client.get("/openapi.json")
        assert r.status_code == 200
        doc = r.json()
    refs = set(re.findall(r'"\$ref": "([^"]+)"', json.dumps(doc)))
    assert refs, "no $ref at all: the check would prove nothing"
    assert sorted(ref for ref in refs if not resolves(doc, ref)) == []
    bodies = [
        doc["paths"][path][method]["requestBody"]
        for path, method in (("/v1/decks", "post"), ("/v1/validate", "post"))
    ]
    assert all("$defs" not in json.dumps(b) for b in bodies)
