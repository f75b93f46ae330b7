"""Tools an agent's model can call: plain Python functions turned into JSON-Schema tool definitions.

``@tool`` reads a function's type hints (pydantic models, dataclasses, ``Annotated[..., Field(...)]``) and
docstring, validates the model's arguments with pydantic before calling it, and supports sync, async and
async-generator functions (each yielded value is a preliminary output, the last one is final). See
``docs/tools.md``.
"""

from ._tool import Tool, ToolContext, ToolInputError, to_tool, to_tools, tool

__all__ = ["Tool", "ToolContext", "ToolInputError", "to_tool", "to_tools", "tool"]
