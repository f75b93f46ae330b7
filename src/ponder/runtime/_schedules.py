"""Schedule rows: what ``Agent.schedule`` stores and how the next run time is worked out."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from ._cron import CronError, CronSchedule, next_cron_time

__all__ = ["Schedule", "ScheduleKind", "resolve_when"]

ScheduleKind = Literal["delayed", "scheduled", "cron"]


@dataclass(frozen=True, slots=True)
class Schedule:
    """A persisted schedule: call ``callback(payload)`` on the agent at ``due_at`` (epoch seconds)."""

    id: str
    callback: str
    payload: Any
    kind: ScheduleKind
    due_at: float
    cron: str | None = None
    created_at: float = 0.0

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Schedule:
        return cls(
            id=row["id"],
            callback=row["callback"],
            payload=json.loads(row["payload"]),
            kind=row["kind"],
            due_at=row["due_at"],
            cron=row["cron"],
            created_at=row["created_at"],
        )


def resolve_when(
    when: float | int | datetime | str, now: float | None = None
) -> tuple[ScheduleKind, float, str | None]:
    """Turn ``when`` (seconds from now, an aware datetime, or a cron string) into (kind, due_at, cron)."""
    now = time.time() if now is None else now
    if isinstance(when, bool):
        raise TypeError("schedule(when=...) takes seconds, a datetime or a cron string, not a bool")
    if isinstance(when, int | float):
        if when < 0 or when != when:
            raise ValueError(f"a schedule delay must be zero or more seconds, got {when!r}")
        return "delayed", now + float(when), None
    if isinstance(when, datetime):
        if when.tzinfo is None:
            raise ValueError(
                "schedule() needs a timezone-aware datetime, e.g. datetime.now(timezone.utc) + timedelta(...)"
            )
        return "scheduled", when.timestamp(), None
    if isinstance(when, str):
        try:
            CronSchedule.parse(when)
        except CronError as exc:
            raise ValueError(str(exc)) from exc
        return "cron", next_cron_time(when, now), when
    raise TypeError(
        f"schedule(when=...) takes seconds, a datetime or a cron string, not {type(when).__name__}"
    )
