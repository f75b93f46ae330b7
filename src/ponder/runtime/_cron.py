"""Five-field cron expressions (minute hour day-of-month month day-of-week), evaluated in UTC.

Supports ``*``, lists, ranges, steps (``*/5``, ``1-10/2``), month and weekday names, and the usual
``@hourly``/``@daily``/``@weekly``/``@monthly``/``@yearly`` shorthands. As in Vixie cron, when both
day-of-month and day-of-week are restricted a day matches if either does. Only the next occurrence
is ever computed: missed runs are not backfilled.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

__all__ = ["CronError", "CronSchedule", "next_cron_time"]

_MONTHS = {n: i for i, n in enumerate("jan feb mar apr may jun jul aug sep oct nov dec".split(), 1)}
_DAYS = {n: i for i, n in enumerate("sun mon tue wed thu fri sat".split())}
_ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


class CronError(ValueError):
    """A cron expression that cannot be parsed."""


def _parse_field(text: str, low: int, high: int, names: dict[str, int], what: str) -> frozenset[int]:
    values: set[int] = set()
    for item in text.split(","):
        body, _, step_text = item.partition("/")
        step = 1
        if step_text:
            if not step_text.isdigit() or int(step_text) == 0:
                raise CronError(f"invalid step {step_text!r} in the {what} field")
            step = int(step_text)
        if body == "*":
            start, end = low, high
        else:
            first, dash, last = body.partition("-")
            start = _parse_value(first, names, what)
            end = _parse_value(last, names, what) if dash else (high if step_text else start)
        if not (low <= start <= high and low <= end <= high):
            raise CronError(f"{item!r} is out of range {low}-{high} in the {what} field")
        if start > end:
            raise CronError(f"range {item!r} runs backwards in the {what} field")
        values.update(range(start, end + 1, step))
    return frozenset(values)


def _parse_value(text: str, names: dict[str, int], what: str) -> int:
    lowered = text.lower()
    if lowered in names:
        return names[lowered]
    if not text.isdigit():
        raise CronError(f"invalid value {text!r} in the {what} field")
    return int(text)


@dataclass(frozen=True, slots=True)
class CronSchedule:
    """A parsed cron expression."""

    expression: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    days_restricted: bool
    weekdays_restricted: bool

    @classmethod
    def parse(cls, expression: str) -> CronSchedule:
        text = _ALIASES.get(expression.strip().lower(), expression.strip())
        fields = text.split()
        if len(fields) != 5:
            raise CronError(
                f"cron expression {expression!r} must have 5 fields (minute hour day month weekday)"
            )
        return cls(
            expression=expression,
            minutes=_parse_field(fields[0], 0, 59, {}, "minute"),
            hours=_parse_field(fields[1], 0, 23, {}, "hour"),
            days=_parse_field(fields[2], 1, 31, {}, "day-of-month"),
            months=_parse_field(fields[3], 1, 12, _MONTHS, "month"),
            # 0 and 7 are both Sunday.
            weekdays=frozenset(d % 7 for d in _parse_field(fields[4], 0, 7, _DAYS, "day-of-week")),
            days_restricted=fields[2] != "*",
            weekdays_restricted=fields[4] != "*",
        )

    def _day_matches(self, day: datetime) -> bool:
        in_days = day.day in self.days
        in_weekdays = (day.isoweekday() % 7) in self.weekdays
        if self.days_restricted and self.weekdays_restricted:
            return in_days or in_weekdays
        return in_days and in_weekdays

    def next_after(self, moment: datetime) -> datetime:
        """The first matching minute strictly after ``moment`` (an aware datetime), in UTC."""
        start = moment.astimezone(UTC).replace(second=0, microsecond=0) + timedelta(minutes=1)
        day = start.replace(hour=0, minute=0)
        for _ in range(366 * 5):  # every valid expression matches within five years (29 Feb)
            if day.month in self.months and self._day_matches(day):
                for hour in sorted(self.hours):
                    for minute in sorted(self.minutes):
                        candidate = day.replace(hour=hour, minute=minute)
                        if candidate >= start:
                            return candidate
            day += timedelta(days=1)
        raise CronError(f"cron expression {self.expression!r} never matches")


def next_cron_time(expression: str, after: float) -> float:
    """The next run of ``expression`` strictly after the epoch time ``after``, as an epoch time."""
    return CronSchedule.parse(expression).next_after(datetime.fromtimestamp(after, UTC)).timestamp()
