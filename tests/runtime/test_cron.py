from datetime import UTC, datetime

import pytest

from ponder.runtime import CronError
from ponder.runtime._cron import CronSchedule, next_cron_time

NOW = datetime(2026, 12, 2, 16, 59, 30, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("* * * * *", datetime(2026, 12, 2, 17, 0, tzinfo=UTC)),
        ("*/15 * * * *", datetime(2026, 12, 2, 17, 0, tzinfo=UTC)),
        ("5 17 * * *", datetime(2026, 12, 2, 17, 5, tzinfo=UTC)),
        ("0 9 * * mon-fri", datetime(2026, 12, 3, 9, 0, tzinfo=UTC)),
        ("0 0 29 2 *", datetime(2028, 2, 29, 0, 0, tzinfo=UTC)),
        ("@daily", datetime(2026, 12, 3, 0, 0, tzinfo=UTC)),
        ("0 12 1 jan *", datetime(2027, 1, 1, 12, 0, tzinfo=UTC)),
        ("0 0 * * 7", datetime(2026, 12, 6, 0, 0, tzinfo=UTC)),  # 7 is Sunday
        ("30 2 1 * sun", datetime(2026, 12, 6, 2, 30, tzinfo=UTC)),  # day OR weekday when both set
    ],
)
def test_next_occurrence(expression: str, expected: datetime) -> None:
    assert next_cron_time(expression, NOW) == expected.timestamp()


def test_next_occurrence_is_strictly_after() -> None:
    on_the_minute = datetime(2026, 12, 2, 17, 0, tzinfo=UTC).timestamp()
    assert next_cron_time("0 17 * * *", on_the_minute) == datetime(2026, 12, 3, 17, 0, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("* * * *", "5 fields"),
        ("60 * * * *", "out of range"),
        ("* 24 * * *", "out of range"),
        ("*/0 * * * *", "step"),
        ("5-1 * * * *", "backwards"),
        ("x * * * *", "invalid value"),
        ("0 0 31 2 *", "never matches"),
    ],
)
def test_invalid_expressions_say_why(expression: str, message: str) -> None:
    with pytest.raises(CronError, match=message):
        CronSchedule.parse(expression).next_after(datetime.fromtimestamp(NOW, UTC))
