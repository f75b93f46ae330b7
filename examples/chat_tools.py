"""A chat agent with server tools: plain Python functions, typed and documented.

    PONDER_MODEL=openai:gpt-4.1-mini ponder serve examples/chat_tools.py

The model sees each tool's docstring and a JSON Schema built from its type hints; arguments are validated
before the function runs, and a bad call comes back to the model as a tool error it can correct.
"""

from __future__ import annotations

import asyncio
import os
from datetime import UTC, datetime

from pydantic import BaseModel, Field

from ponder.think import Think, ToolContext, tool


class Forecast(BaseModel):
    city: str
    temperature_c: float
    summary: str


@tool
def get_weather(city: str, days: int = Field(1, ge=1, le=7)) -> Forecast:
    """Get the weather forecast for a city.

    Args:
        city: The city name, e.g. "Lisbon".
        days: How many days ahead (1-7).
    """
    return Forecast(city=city, temperature_c=21.5, summary=f"sunny for {days} day(s)")


@tool
def current_time(ctx: ToolContext) -> str:
    """The current UTC time (ISO 8601)."""
    return datetime.now(UTC).isoformat()


@tool
async def research(topic: str):
    """Research a topic; progress is streamed to the user while it runs."""
    for step in ("searching", "reading", "summarising"):
        await asyncio.sleep(0.2)
        yield {"topic": topic, "status": step}
    yield {"topic": topic, "status": "done", "summary": f"{topic} is an interesting topic."}


class ToolChat(Think):
    max_steps = 5

    def get_model(self) -> str:
        return os.environ.get("PONDER_MODEL", "test")

    def get_system_prompt(self) -> str:
        return "You are a helpful assistant. Use the tools when they help."

    def get_tools(self) -> list:
        return [get_weather, current_time, research]
