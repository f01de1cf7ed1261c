"""Task routes: list, get, events, cancel."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, Field

from deckyard.api.auth import Principal, current_principal
from deckyard.api.errors import ApiError
from deckyard.api.params import RowId
from deckyard.tasks import TaskExecutor

router = APIRouter(prefix="/v1/tasks", tags=["tasks"])
Caller = Annotated[Principal, Depends(current_principal)]


class TaskOut(BaseModel):
    """A task as the API shows it."""

    id: int
    kind: str
    status: str
    stage: int
    stages: list[str]
    params: Any
    state: Any
    result: Any
    error_code: str | None
    error_message: str | None
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None
    actor_token_id: int | None = Field(
        None, description="The token whose request created this task (None: the system)."
    )


class TaskEventOut(BaseModel):
    """One execution event of a task."""

    id: int
    created_at: datetime
    type: str
    data: Any


def executor_of(request: Request) -> TaskExecutor:
    """The app's task executor."""
    ex: TaskExecutor = request.app.state.tasks
    return ex


def task_out(ex: TaskExecutor, row: dict[str, Any]) -> TaskOut:
    """The API view of a task row."""
    kind = ex.kinds.get(row["kind"])
    return TaskOut(
        **{k: row[k] for k in TaskOut.model_fields if k in row},
        stages=[s.name for s in kind.stages] if kind else [],
    )


async def owned_task(request: Request, principal: Principal, task_id: int) -> dict[str, Any]:
    """The task if it belongs to the caller's workspace; 404 otherwise."""
    row = await executor_of(request).get(task_id)
    if row is None or row["workspace_id"] != principal.workspace_id:
        raise ApiError(404, "NOT_FOUND", f"no task {task_id}")
    return row


@router.get("", response_model=list[TaskOut])
async def list_tasks(
    request: Request,
    principal: Caller,
    status: Annotated[str | None, Query(max_length=16)] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> list[TaskOut]:
    """The workspace's tasks, newest first."""
    ex = executor_of(request)
    rows = await ex.of_workspace(principal.workspace_id, status=status, limit=limit)
    return [task_out(ex, row) for row in rows]


@router.get("/{task_id:int}", response_model=TaskOut)
async def get_task(request: Request, principal: Caller, task_id: RowId) -> TaskOut:
    """One task with its stage."""
    return task_out(executor_of(request), await owned_task(request, principal, task_id))


@router.get("/{task_id:int}/events", response_model=list[TaskEventOut])
async def task_events_route(
    request: Request, principal: Caller, task_id: RowId
) -> list[TaskEventOut]:
    """The task's execution events, oldest first."""
    await owned_task(request, principal, task_id)
    events = await executor_of(request).events(task_id)
    return [TaskEventOut(**{k: e[k] for k in TaskEventOut.model_fields}) for e in events]


@router.post("/{task_id:int}/cancel", response_model=TaskOut)
async def cancel_task(request: Request, principal: Caller, task_id: RowId) -> TaskOut:
    """Cancel a task and its running stage's jobs."""
    await owned_task(request, principal, task_id)
    await executor_of(request).cancel(task_id)
    return task_out(executor_of(request), await owned_task(request, principal, task_id))
