"""The `publish` task: validate every page, screenshot every page, build the site (`deck.export`
of `zip`), export the PDF, then put the verified site online (`site.go_live`).

Each stage's jobs are enqueued by the task executor; a stage fails the task (with the first
failed job's error code) unless every job succeeded, so a page whose validation failed or was
`unavailable` stops the publish before anything is built, and a publish that fails anywhere
leaves the previous publication live. Task parameters: `deck_id`, and optionally `visibility`
(`public` or `private`) and `actor_token_id`.
Validate and screenshot are one job each (`deck.validate`, `deck.screenshots`): every page in
one deck render request, and the screenshot stage renders only pages whose validation render
is not already their screenshot.
"""

from __future__ import annotations

from deckyard.db import Database
from deckyard.decks.jobs.names import DECK_QUEUE, PUBLISH_TASK, DeckJobKind
from deckyard.decks.store import DeckRow, deck_get
from deckyard.jobs import EnqueueSpec
from deckyard.outputs.site import SITE
from deckyard.tasks import Stage, StageContext, TaskKind
from deckyard.tasks.executor import StageFailed


def publish_task(db: Database) -> TaskKind:
    """The `publish` task kind over the deck jobs, reading decks from `db`."""

    async def deck_of(ctx: StageContext) -> DeckRow:
        deck_id = int(ctx.params["deck_id"])
        async with db.read_connection() as conn:
            row = await deck_get(conn, deck_id, ctx.workspace_id or "")
        if row is None:
            raise StageFailed("DECK_NOT_FOUND", f"no deck {deck_id}")
        return row

    def spec(kind: DeckJobKind, payload: dict[str, object]) -> EnqueueSpec:
        return EnqueueSpec(kind.value, payload, queue=DECK_QUEUE)

    async def validate(ctx: StageContext) -> list[EnqueueSpec]:
        row = await deck_of(ctx)
        return [spec(DeckJobKind.DECK_VALIDATE, {"deck_id": row.id})]

    async def screenshots(ctx: StageContext) -> list[EnqueueSpec]:
        row = await deck_of(ctx)
        return [
            spec(DeckJobKind.DECK_SCREENSHOTS, {"deck_id": row.id, "config": {"format": "png"}})
        ]

    async def build(ctx: StageContext) -> list[EnqueueSpec]:
        payload = {"deck_id": int(ctx.params["deck_id"]), "format": SITE.name}
        return [spec(DeckJobKind.DECK_EXPORT, payload)]

    async def export(ctx: StageContext) -> list[EnqueueSpec]:
        return [spec(DeckJobKind.DECK_EXPORT, {"deck_id": int(ctx.params["deck_id"])})]

    async def go_live(ctx: StageContext) -> list[EnqueueSpec]:
        built = ctx.state.get("results", {}).get("build", {}).get("results") or [None]
        if not isinstance(built[0], dict):
            raise StageFailed("DECK_SITE_INVALID", "the build stage left no site")
        payload = {
            "deck_id": int(ctx.params["deck_id"]),
            "task_id": ctx.task_id,
            "visibility": ctx.params.get("visibility", "private"),
            "actor_token_id": ctx.params.get("actor_token_id"),
            "build": {
                k: built[0][k] for k in ("artifact_key", "sha256", "deck_version", "site_version")
            },
        }
        return [spec(DeckJobKind.SITE_GO_LIVE, payload)]

    return TaskKind(
        PUBLISH_TASK,
        [
            Stage("validate", validate),
            Stage("screenshot", screenshots),
            Stage("build", build),
            Stage("export", export),
            Stage("live", go_live),
        ],
    )
