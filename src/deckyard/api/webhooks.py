"""Webhook routes (admin tokens only): endpoints, their secret, deliveries and redelivery.

An endpoint's secret is in the answer of its creation and of each rotation, never again.
Another workspace's endpoints and deliveries are 404, as everything else of another
workspace is. docs/webhooks.md describes the events, the signature and the retries.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, field_validator

from deckyard.api.auth import Principal, admin_principal
from deckyard.api.errors import ApiError
from deckyard.api.params import BeforeId, RowId
from deckyard.webhooks import (
    SUBSCRIBABLE,
    Attempt,
    Delivery,
    DeliveryStatus,
    Endpoint,
    WebhookEventType,
)
from deckyard.webhooks.service import WebhookError, WebhookService

router = APIRouter(prefix="/v1/webhooks", tags=["webhooks"])
Admin = Annotated[Principal, Depends(admin_principal)]
EventList = Annotated[
    list[WebhookEventType],
    Field(
        min_length=1,
        max_length=len(SUBSCRIBABLE),
        description="Events to receive: "
        + ", ".join(f"`{e.value}`" for e in SUBSCRIBABLE)
        + " (`webhook.ping` comes on request only).",
    ),
]
DISABLED: dict[int | str, dict[str, Any]] = {
    409: {"description": "`WEBHOOK_ENDPOINT_DISABLED`: enable the endpoint first (PATCH)."}
}


def _subscribable(events: list[WebhookEventType] | None) -> list[WebhookEventType] | None:
    if events is not None and WebhookEventType.PING in events:
        raise ValueError("webhook.ping is sent on request (POST .../ping), not subscribed to")
    return events


class EndpointCreate(BaseModel):
    """A new endpoint: where to POST, which events."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"url": "https://hooks.example.com/deckyard", "events": ["job.finished"]}]
        },
    )

    url: str = Field(min_length=1, max_length=2000, description="http(s) URL to POST to.")
    events: EventList
    description: str | None = Field(None, max_length=200)

    _events = field_validator("events")(_subscribable)


class EndpointUpdate(BaseModel):
    """Changes to an endpoint; `enabled: true` again sends only events from then on."""

    model_config = ConfigDict(extra="forbid")

    url: str | None = Field(None, min_length=1, max_length=2000)
    events: EventList | None = None
    description: str | None = Field(None, max_length=200)
    enabled: bool | None = None

    _events = field_validator("events")(_subscribable)


class EndpointOut(BaseModel):
    """An endpoint (never its secret)."""

    id: int
    url: str
    description: str | None
    events: list[str]
    enabled: bool
    created_at: datetime
    updated_at: datetime
    secret_rotated_at: datetime | None

    @classmethod
    def of(cls, e: Endpoint) -> EndpointOut:
        """The API view of an endpoint."""
        return cls(
            id=e.id,
            url=e.url,
            description=e.description,
            events=e.events,
            enabled=e.enabled,
            created_at=e.created_at,
            updated_at=e.updated_at,
            secret_rotated_at=e.secret_rotated_at,
        )


class EndpointWithSecret(EndpointOut):
    """An endpoint with its signing secret: shown in this answer only, keep it."""

    secret: str


class DeliveryOut(BaseModel):
    """One event sent (or being sent) to an endpoint."""

    id: int
    endpoint_id: int
    event_id: str
    event_type: str
    event_at: datetime
    status: DeliveryStatus
    attempts: int = Field(description="Attempts made so far, redeliveries included.")
    last_status_code: int | None
    last_error: str | None
    created_at: datetime
    updated_at: datetime
    delivered_at: datetime | None
    payload: dict[str, Any] = Field(description="The JSON body each attempt sends.")

    @classmethod
    def of(cls, d: Delivery) -> DeliveryOut:
        """The API view of a delivery."""
        return cls(**{name: getattr(d, name) for name in cls.model_fields})


class AttemptOut(BaseModel):
    """One HTTP attempt of a delivery."""

    number: int
    job_id: int | None
    started_at: datetime
    duration_ms: int
    status_code: int | None
    error: str | None

    @classmethod
    def of(cls, a: Attempt) -> AttemptOut:
        """The API view of an attempt."""
        return cls(**{name: getattr(a, name) for name in cls.model_fields})


class DeliveryDetail(DeliveryOut):
    """A delivery with every attempt, oldest first."""

    attempt_log: list[AttemptOut]


class Redelivery(DeliveryOut):
    """A delivery sent again, and the job sending it."""

    job_id: int


def service_of(request: Request) -> WebhookService:
    """The app's webhook service."""
    service: WebhookService = request.app.state.webhooks
    return service


def refused(exc: WebhookError) -> ApiError:
    """The API answer of a refused webhook request."""
    return ApiError(exc.status, exc.code, exc.message, field=exc.field)


def with_secret(endpoint: Endpoint, secret: str) -> EndpointWithSecret:
    """An endpoint's view with its secret."""
    return EndpointWithSecret(**EndpointOut.of(endpoint).model_dump(), secret=secret)


@router.post(
    "",
    status_code=201,
    response_model=EndpointWithSecret,
    responses={
        409: {"description": "`WEBHOOK_LIMIT`: the workspace has its most endpoints."},
        422: {
            "description": "`INVALID_INPUT`, or `WEBHOOK_URL_REFUSED`: the SSRF guard refuses "
            "the URL's address (private, loopback, link-local)."
        },
    },
)
async def create_endpoint(request: Request, principal: Admin, body: EndpointCreate) -> JSONResponse:
    """Add an endpoint; the answer holds its signing secret, shown this once."""
    try:
        made = await service_of(request).create(
            principal.workspace_id, body.url, [e.value for e in body.events], body.description
        )
    except WebhookError as exc:
        raise refused(exc) from None
    return JSONResponse(
        with_secret(made.endpoint, made.secret).model_dump(mode="json"),
        status_code=201,
        headers={"Location": f"/v1/webhooks/{made.endpoint.id}"},
    )


@router.get("", response_model=list[EndpointOut])
async def list_endpoints(request: Request, principal: Admin) -> list[EndpointOut]:
    """The workspace's endpoints, oldest first."""
    return [EndpointOut.of(e) for e in await service_of(request).endpoints(principal.workspace_id)]


@router.get("/{endpoint_id:int}", response_model=EndpointOut)
async def get_endpoint(request: Request, principal: Admin, endpoint_id: RowId) -> EndpointOut:
    """One endpoint."""
    try:
        return EndpointOut.of(
            await service_of(request).endpoint(principal.workspace_id, endpoint_id)
        )
    except WebhookError as exc:
        raise refused(exc) from None


@router.patch(
    "/{endpoint_id:int}",
    response_model=EndpointOut,
    responses={422: {"description": "`INVALID_INPUT` or `WEBHOOK_URL_REFUSED`."}},
)
async def update_endpoint(
    request: Request, principal: Admin, endpoint_id: RowId, body: EndpointUpdate
) -> EndpointOut:
    """Change the URL, events, description, or enable/disable the endpoint."""
    changes = body.model_dump(exclude_unset=True)
    for name in ("url", "events", "enabled"):
        if name in changes and changes[name] is None:
            raise ApiError(422, "INVALID_INPUT", f"{name} cannot be null", field=name)
    if "events" in changes:
        changes["events"] = [WebhookEventType(e).value for e in changes["events"]]
    try:
        found = await service_of(request).update(principal.workspace_id, endpoint_id, changes)
    except WebhookError as exc:
        raise refused(exc) from None
    return EndpointOut.of(found)


@router.delete("/{endpoint_id:int}", status_code=204)
async def delete_endpoint(request: Request, principal: Admin, endpoint_id: RowId) -> Response:
    """Delete the endpoint with its deliveries; deliveries on their way are not sent."""
    try:
        await service_of(request).delete(principal.workspace_id, endpoint_id)
    except WebhookError as exc:
        raise refused(exc) from None
    return Response(status_code=204)


@router.post("/{endpoint_id:int}/rotate-secret", response_model=EndpointWithSecret)
async def rotate_secret(
    request: Request, principal: Admin, endpoint_id: RowId
) -> EndpointWithSecret:
    """Give the endpoint a new secret (in this answer only). For
    `DECKYARD_WEBHOOK_SECRET_ROTATION_GRACE_SECONDS` deliveries carry a signature with the old
    secret too, so a receiver can switch without refusing any."""
    try:
        made = await service_of(request).rotate_secret(principal.workspace_id, endpoint_id)
    except WebhookError as exc:
        raise refused(exc) from None
    return with_secret(made.endpoint, made.secret)


@router.post(
    "/{endpoint_id:int}/ping", status_code=202, response_model=DeliveryOut, responses=DISABLED
)
async def ping_endpoint(request: Request, principal: Admin, endpoint_id: RowId) -> DeliveryOut:
    """Send a signed `webhook.ping` event now, to check the receiver and its verification."""
    try:
        return DeliveryOut.of(await service_of(request).ping(principal.workspace_id, endpoint_id))
    except WebhookError as exc:
        raise refused(exc) from None


@router.get("/{endpoint_id:int}/deliveries", response_model=list[DeliveryOut])
async def list_deliveries(
    request: Request,
    principal: Admin,
    endpoint_id: RowId,
    status: Annotated[DeliveryStatus | None, Query()] = None,
    before: BeforeId = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> list[DeliveryOut]:
    """The endpoint's deliveries, newest first; `before` (a delivery id) pages back."""
    try:
        found = await service_of(request).deliveries(
            principal.workspace_id,
            endpoint_id,
            status=None if status is None else status.value,
            before_id=before,
            limit=limit,
        )
    except WebhookError as exc:
        raise refused(exc) from None
    return [DeliveryOut.of(d) for d in found]


@router.get("/{endpoint_id:int}/deliveries/{delivery_id:int}", response_model=DeliveryDetail)
async def get_delivery(
    request: Request, principal: Admin, endpoint_id: RowId, delivery_id: RowId
) -> DeliveryDetail:
    """One delivery with its attempt log: status code, duration and error of each attempt."""
    try:
        found, attempts = await service_of(request).delivery(
            principal.workspace_id, endpoint_id, delivery_id
        )
    except WebhookError as exc:
        raise refused(exc) from None
    return DeliveryDetail(
        **DeliveryOut.of(found).model_dump(), attempt_log=[AttemptOut.of(a) for a in attempts]
    )


@router.post(
    "/{endpoint_id:int}/deliveries/{delivery_id:int}/redeliver",
    status_code=202,
    response_model=Redelivery,
    responses=DISABLED,
)
async def redeliver(
    request: Request, principal: Admin, endpoint_id: RowId, delivery_id: RowId
) -> Redelivery:
    """Send the delivery again, with the same event id and a fresh budget of attempts."""
    try:
        done = await service_of(request).redeliver(principal.workspace_id, endpoint_id, delivery_id)
    except WebhookError as exc:
        raise refused(exc) from None
    return Redelivery(**DeliveryOut.of(done.delivery).model_dump(), job_id=done.job_id)
