from __future__ import annotations

from typing import Annotated, Any

import pytest
from pydantic import BaseModel, Field

from ponder.tools import Tool, ToolContext, ToolInputError, to_tools, tool


class Location(BaseModel):
    city: str
    country: str = "PT"


def ctx() -> ToolContext:
    return ToolContext(agent=None, tool_call_id="call_1", tool_name="t", request_id="r1")


def test_schema_from_hints_and_docstring() -> None:
    @tool
    def get_weather(
        location: Location, unit: str = "c", days: Annotated[int, Field(ge=1, le=7)] = 1, ctx: Any = None
    ) -> dict[str, Any]:
        """Get the weather for a place.

        Args:
            location: Where to look.
            unit: ``c`` or ``f``.
        """
        return {}

    d = get_weather.definition
    assert d.name == "get_weather"
    assert d.description == "Get the weather for a place."
    props = d.parameters["properties"]
    assert set(props) == {"location", "unit", "days"}  # ctx is not part of the schema
    assert props["unit"]["description"] == "``c`` or ``f``."
    assert props["days"]["maximum"] == 7
    assert d.parameters["required"] == ["location"]
    assert "Location" in d.parameters["$defs"]
    assert "title" not in d.parameters


def test_options_are_kept() -> None:
    @tool(name="lookup", description="Find things.", needs_approval=True, idempotent=True)
    def find(q: str) -> str:
        return q

    assert find.name == "lookup" and find.description == "Find things."
    assert find.idempotent is True and find.needs_approval is True


async def test_validation_errors_are_readable() -> None:
    @tool
    def add(a: int, b: int) -> int:
        return a + b

    with pytest.raises(ToolInputError, match="Invalid input for tool add: b: Field required"):
        add.validate({"a": 1})
    with pytest.raises(ToolInputError, match="a: Input should be a valid integer"):
        add.validate({"a": "x", "b": 1})
    assert await add.invoke({"a": 1, "b": "2"}, ctx()) == 3


async def test_sync_async_and_generator_tools() -> None:
    @tool
    async def slow(x: int) -> dict[str, int]:
        return {"x": x}

    @tool
    async def progress(n: int):
        for i in range(n):
            yield {"done": i + 1}

    seen: list[Any] = []

    async def on_preliminary(value: Any) -> None:
        seen.append(value)

    assert await slow.invoke({"x": 2}, ctx()) == {"x": 2}
    assert await progress.invoke({"n": 3}, ctx(), on_preliminary) == {"done": 3}
    assert seen == [{"done": 1}, {"done": 2}, {"done": 3}]


async def test_ctx_injected_and_pydantic_output_serialised() -> None:
    @tool
    def where(city: str, ctx: ToolContext) -> Location:
        assert ctx.tool_call_id == "call_1"
        return Location(city=city)

    assert "ctx" not in where.parameters["properties"]
    assert await where.invoke({"city": "Porto"}, ctx()) == {"city": "Porto", "country": "PT"}


async def test_needs_approval_function() -> None:
    @tool(needs_approval=lambda args: args["amount"] > 100)
    def pay(amount: int) -> str:
        return "paid"

    assert await pay.requires_approval({"amount": 500}) is True
    assert await pay.requires_approval({"amount": 5}) is False


async def test_method_tools_bind_to_the_instance() -> None:
    class Holder:
        factor = 10

        @tool
        def scale(self, x: int) -> int:
            """Scale."""
            return x * self.factor

    h = Holder()
    bound = h.scale
    assert isinstance(bound, Tool)
    assert "self" not in bound.parameters["properties"]
    assert await bound.invoke({"x": 2}, ctx()) == 20


def test_to_tools_accepts_lists_dicts_and_plain_functions() -> None:
    def echo(text: str) -> str:
        """Echo."""
        return text

    assert list(to_tools([echo])) == ["echo"]
    renamed = to_tools({"say": echo})
    assert renamed["say"].name == "say"
    with pytest.raises(TypeError):
        to_tools([42])


def test_field_default_keeps_docstring_description() -> None:
    @tool
    def forecast(days: int = Field(1, ge=1, le=7)) -> int:
        """Forecast.

        Args:
            days: How many days ahead.
        """
        return days

    prop = forecast.parameters["properties"]["days"]
    assert prop == {
        "default": 1,
        "description": "How many days ahead.",
        "maximum": 7,
        "minimum": 1,
        "type": "integer",
    }
