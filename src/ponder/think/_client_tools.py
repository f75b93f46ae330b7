"""Client tools: tools the browser declares and runs itself.

Why this module exists: ``useAgentChat({tools})`` sends the schemas of the tools it can execute as
``clientTools: [{name, description, parameters}]`` in the chat request body. The model must see them like any
other tool, but the server never runs them: a call stays ``input-available`` until the browser answers with
``cf_agent_tool_result``. This module validates those untrusted declarations and turns them into
:class:`ClientTool` objects (a :class:`~ponder.tools.Tool` without a function) the step loop recognises.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..tools import Tool

__all__ = ["MAX_CLIENT_TOOLS", "ClientTool", "client_tools_from", "parse_client_tools"]

#: Most client tools one request may declare.
MAX_CLIENT_TOOLS = 128
_NAME = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")
_EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


class ClientTool(Tool):
    """A tool declared by a client: the model sees its schema; the client executes it.

    ``validate`` only checks that the input is an object (the client validates against its own schema);
    ``invoke`` refuses to run, because the result must come from the client.
    """

    client = True

    def __init__(self, name: str, description: str = "", parameters: dict[str, Any] | None = None) -> None:
        # Deliberately not Tool.__init__: there is no Python function to derive a schema from.
        self.fn = None  # type: ignore[assignment]
        self.name = name
        self.description = description
        self.parameters = dict(parameters or _EMPTY_SCHEMA)
        self.needs_approval = False
        self.idempotent = False
        self.strict = None
        self._ctx_param = None
        self._params = []
        self._bound = None

    def __repr__(self) -> str:
        return f"ClientTool({self.name!r})"

    def __get__(self, instance: Any, owner: type | None = None) -> ClientTool:
        return self

    def validate(self, args: Mapping[str, Any]) -> dict[str, Any]:
        return dict(args)

    async def invoke(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"client tool {self.name!r} runs in the client, not on the server")

    def spec(self) -> dict[str, Any]:
        """The declaration as the client sent it (what is persisted)."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


def _schema(value: Any) -> dict[str, Any]:
    """A JSON Schema object from what a client sent as ``parameters``.

    The AI SDK's ``jsonSchema()`` helper serialises as ``{"jsonSchema": {...}}``; a zod schema serialises as
    its internals, which are not a schema at all. Anything that does not look like an object schema becomes
    the permissive empty object schema, so one odd declaration never breaks the provider call.
    """
    if isinstance(value, Mapping) and isinstance(value.get("jsonSchema"), Mapping):
        value = value["jsonSchema"]
    if isinstance(value, Mapping) and (value.get("type") == "object" or "properties" in value):
        schema = dict(value)
        schema.setdefault("type", "object")
        if not isinstance(schema.get("properties"), Mapping):
            schema["properties"] = {}
        return schema
    return dict(_EMPTY_SCHEMA)


def parse_client_tools(value: Any) -> list[dict[str, Any]]:
    """Validate a ``clientTools`` value; return normalised ``{name, description, parameters}`` dicts.

    Raises ``ValueError`` with a message that names the offending entry. Later duplicates of a name replace
    earlier ones.
    """
    if not isinstance(value, list):
        raise ValueError("'clientTools' must be an array")
    if len(value) > MAX_CLIENT_TOOLS:
        raise ValueError(f"'clientTools' declares {len(value)} tools; at most {MAX_CLIENT_TOOLS} are allowed")
    tools: dict[str, dict[str, Any]] = {}
    for index, item in enumerate(value):
        if not isinstance(item, Mapping):
            raise ValueError(f"clientTools[{index}] must be an object")
        name = item.get("name")
        if not isinstance(name, str) or not _NAME.match(name):
            raise ValueError(
                f"clientTools[{index}].name must be 1-128 letters, digits, '_', '-', '.' or ':' (got {name!r})"
            )
        description = item.get("description")
        if description is not None and not isinstance(description, str):
            raise ValueError(f"clientTools[{index}].description must be a string")
        tools[name] = {
            "name": name,
            "description": description or "",
            "parameters": _schema(item.get("parameters")),
        }
    return list(tools.values())


def client_tools_from(specs: list[dict[str, Any]] | None) -> dict[str, ClientTool]:
    """``{name: ClientTool}`` from normalised declarations (see :func:`parse_client_tools`)."""
    if not specs:
        return {}
    return {
        spec["name"]: ClientTool(spec["name"], spec.get("description") or "", spec.get("parameters"))
        for spec in specs
    }
