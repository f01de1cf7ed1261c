"""The dashboard's template environment: how times, durations and JSON read on a page."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fastapi.templating import Jinja2Templates

UNITS = (("d", 86400), ("h", 3600), ("min", 60), ("s", 1))

templates = Jinja2Templates(directory=Path(__file__).parent / "templates")


def _as_datetime(value: datetime | str) -> datetime:
    return datetime.fromisoformat(value) if isinstance(value, str) else value


def span(seconds: int) -> str:
    """A whole number of seconds in its largest unit: `3 min`, `2 h`, `0 s`."""
    for unit, size in UNITS:
        if seconds >= size:
            return f"{seconds // size} {unit}"
    return "0 s"


def when(value: datetime | str | None) -> str:
    """A timestamp in UTC to the second, or a dash."""
    if value is None:
        return "—"
    return _as_datetime(value).astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def ago(value: datetime | str | None) -> str:
    """How long ago a timestamp was: `12 s ago`, or `never`."""
    if value is None:
        return "never"
    seconds = int((datetime.now(UTC) - _as_datetime(value)).total_seconds())
    return f"{span(max(0, seconds))} ago"


def until(value: datetime) -> str:
    """How far in the future a timestamp is (`in 59 min`); empty when it has passed."""
    seconds = int((value - datetime.now(UTC)).total_seconds())
    return f"in {span(seconds)}" if seconds > 0 else ""


def took(start: datetime | None, end: datetime | None) -> str:
    """The time between two timestamps in ms or s; empty unless both are set."""
    if start is None or end is None:
        return ""
    ms = (end - start).total_seconds() * 1000
    return f"{ms:.0f} ms" if ms < 1000 else f"{ms / 1000:.1f} s"


def brief(data: Any) -> str:
    """Event data on one line: `stage: build · jobs: [12]`."""
    if not isinstance(data, dict):
        return json.dumps(data, default=str)
    return " · ".join(
        f"{k}: {v if isinstance(v, str) else json.dumps(v, default=str)}" for k, v in data.items()
    )


def pretty(data: Any) -> str:
    """JSON indented for reading."""
    return json.dumps(data, indent=2, sort_keys=True, default=str)


templates.env.filters.update(when=when, ago=ago, until=until, brief=brief, pretty=pretty)
templates.env.globals.update(took=took, static_version=int(time.time()))
