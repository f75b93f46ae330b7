"""ConfigStore: a per-agent JSON object that round-trips exactly; bad values change nothing."""

from __future__ import annotations

import math
from typing import Any

import pytest

from ponder.context import ConfigError, ConfigStore
from ponder.storage import Store


async def test_round_trip_and_isolation(store: Store) -> None:
    config = ConfigStore(store, "a")
    assert await config.get() == {}
    value = {"tier": "fast", "n": 3, "ratio": 0.5, "tags": ["x", "ü"], "nested": {"on": True, "none": None}}
    await config.set(value)
    assert await ConfigStore(store, "a").get() == value  # survives a new handle (a cold wake)
    assert await ConfigStore(store, "b").get() == {}
    got = await config.get()
    got["tier"] = "mutated"
    assert (await config.get())["tier"] == "fast"
    await config.set({"tier": "capable"})
    assert await config.get() == {"tier": "capable"}
    await config.clear()
    assert await config.get() == {}


@pytest.mark.parametrize(
    "bad",
    [
        [1, 2],
        "text",
        {"when": object()},
        {"x": math.nan},
        {"x": math.inf},
        {1: "int key"},
        {"t": (1, 2)},
        {"s": {1, 2}},
    ],
)
async def test_bad_values_are_refused_and_change_nothing(store: Store, bad: Any) -> None:
    config = ConfigStore(store, "a")
    await config.set({"keep": 1})
    with pytest.raises(ConfigError):
        await config.set(bad)
    assert await config.get() == {"keep": 1}
