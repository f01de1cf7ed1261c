"""`/openapi.json` that documents every answer: each route's refusals, in the one error shape.

FastAPI documents a route's success answer and a validation 422 in its own shape, which this API
never sends. `install_openapi` completes the document: every operation gets the refusals that
the machinery around its handler can answer (authentication, the body limit, idempotency, a
lost database, a full disk, a crash), and every error response gets `ErrorBody` as its schema.
Codes that a handler answers itself are declared on its route (`responses=`), with a
description; `tests/e2e/test_api_fuzz.py` checks the served answers against the document.
The document is OpenAPI 3.1: FastAPI describes a stream's items with `itemSchema`, a 3.2
member, which is kept as the extension `x-itemSchema` (`tests/integration/test_openapi.py`
validates the document with `openapi-spec-validator`). `/docs` is Swagger UI, served from
the `swagger-ui-bundle-v2` package (the files of the `swagger-ui-dist` release), so it works
offline: the page loads nothing from another origin.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse
from swagger_ui_bundle import swagger_ui_path

from deckyard.api.errors import ApiError, ErrorBody

METHODS = frozenset({"get", "head", "post", "put", "patch", "delete"})
WRITE_METHODS = frozenset({"post", "put", "patch", "delete"})
ERROR_REF = {"$ref": "#/components/schemas/ErrorBody"}
DOCS_URL = "/docs"
DOCS_ASSETS = ("swagger-ui-bundle.js", "swagger-ui.css", "favicon-32x32.png")
FASTAPI_ERROR_SCHEMAS = ("HTTPValidationError", "ValidationError")

DESCRIPTIONS = {
    401: "`UNAUTHENTICATED`: no token, or an unknown or revoked one.",
    403: "`ROLE_FORBIDDEN`: the token's role may not do this (or, for the dashboard's cookie, "
    "`CSRF_TOKEN_REQUIRED` or `CROSS_SITE`).",
    404: "`NOT_FOUND`: nothing of the caller's workspace has that id.",
    409: "`IDEMPOTENCY_IN_PROGRESS`: the first request with this `Idempotency-Key` still runs.",
    413: "`PAYLOAD_TOO_LARGE`: the body is over the server's limit; nothing was stored.",
    422: "`INVALID_INPUT` (or a more precise code): a parameter or the body is refused; "
    "`field` names it (`body` for a body that is not UTF-8 or not JSON).",
    500: "`INTERNAL_ERROR`: a bug; the server log has the details.",
    503: "`DATABASE_UNAVAILABLE`: the database connection was lost, or "
    "`ARTIFACT_STORE_UNAVAILABLE`: the artefact store (S3) could not be reached; nothing was "
    "half-written, retry after `Retry-After`.",
    507: "`STORAGE_FULL`: the server's storage is full; nothing was stored.",
}


def refusals(path: str, method: str, operation: dict[str, Any]) -> set[int]:
    """The status codes of refusals the code around an operation's handler can answer.

    Every `/v1/` route needs a token (`tests/integration/test_openapi.py` calls each without
    one); path parameters name something that may not exist; a body or parameter may be
    invalid; a write may meet the body limit or a full disk; a POST may carry an
    `Idempotency-Key` whose first request still runs.
    """
    codes = {500, 503}
    if "{" in path:
        codes.add(404)
    if path.startswith("/v1/"):
        codes |= {401, 403}
    if operation.get("parameters") or operation.get("requestBody") or method == "post":
        codes.add(422)
    if method in WRITE_METHODS:
        codes |= {413, 507}
    if method == "post":
        codes.add(409)
    return codes


def document_errors(doc: dict[str, Any]) -> dict[str, Any]:
    """Add every operation's refusals to `doc`, each with the `ErrorBody` schema."""
    schemas = doc.setdefault("components", {}).setdefault("schemas", {})
    error_schema = ErrorBody.model_json_schema(ref_template="#/components/schemas/{model}")
    schemas.update(error_schema.pop("$defs", {}))
    schemas["ErrorBody"] = error_schema
    for path, operations in doc["paths"].items():
        for method, operation in operations.items():
            if method not in METHODS:
                continue
            responses = operation.setdefault("responses", {})
            for code in sorted(refusals(path, method, operation)):
                responses.setdefault(str(code), {"description": DESCRIPTIONS[code]})
            for code, response in responses.items():
                if code.isdigit() and int(code) >= 400:
                    _error_content(response)
                _stream_items_as_extension(response)
    text = repr(doc["paths"])
    for name in FASTAPI_ERROR_SCHEMAS:
        if f"#/components/schemas/{name}'" not in text:
            schemas.pop(name, None)
    return doc


def _error_content(response: dict[str, Any]) -> None:
    """Make an error response's JSON body the error shape (FastAPI's 422 shape is never sent)."""
    content = response.setdefault("content", {})
    json_body = content.setdefault("application/json", {})
    schema = json_body.get("schema")
    if not schema or schema.get("$ref", "").rsplit("/", 1)[-1] in FASTAPI_ERROR_SCHEMAS:
        json_body["schema"] = dict(ERROR_REF)
    if response.get("description") == "Validation Error":
        response["description"] = DESCRIPTIONS[422]


def _stream_items_as_extension(response: dict[str, Any]) -> None:
    """Keep a stream's `itemSchema` (OpenAPI 3.2: each event's shape) as `x-itemSchema`.

    No `schema` takes its place: in 3.1 that would describe the whole stream, and tools that
    read streams (schemathesis) check each event against it.
    """
    for media in response.get("content", {}).values():
        if "itemSchema" in media:
            media["x-itemSchema"] = media.pop("itemSchema")


def install_openapi(app: FastAPI) -> None:
    """Serve the completed document at `/openapi.json` (built once, on first use)."""
    generate = app.openapi
    built: list[dict[str, Any]] = []

    def openapi() -> dict[str, Any]:
        if not built:
            built.append(document_errors(generate()))
        return built[0]

    app.openapi = openapi  # type: ignore[method-assign]
    install_docs(app)


def install_docs(app: FastAPI) -> None:
    """Serve Swagger UI at `/docs` with its scripts, style and icon from this server."""

    @app.get(DOCS_URL, include_in_schema=False)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url="/openapi.json",
            title=f"{app.title} API",
            swagger_js_url=f"{DOCS_URL}/assets/swagger-ui-bundle.js",
            swagger_css_url=f"{DOCS_URL}/assets/swagger-ui.css",
            swagger_favicon_url=f"{DOCS_URL}/assets/favicon-32x32.png",
        )

    @app.get(f"{DOCS_URL}/assets/{{name}}", include_in_schema=False)
    async def docs_asset(name: str) -> FileResponse:
        if name not in DOCS_ASSETS:
            raise ApiError(404, "NOT_FOUND", f"no documentation asset {name!r}")
        return FileResponse(swagger_ui_path / name)
