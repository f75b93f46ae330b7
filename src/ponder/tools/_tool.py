"""``@tool``: turn a Python function into a tool a model can call.

Why this module exists: the model sees a tool as a name, a description and a JSON Schema for its arguments;
the agent must check what the model sent before running anything. Deriving both from the function's own type
hints and docstring (through pydantic) keeps the schema, the validation and the code in one place, the way
Pydantic AI and the AI SDK's zod tools do.
"""

from __future__ import annotations

import inspect
import re
import types
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, get_type_hints, overload

from pydantic import BaseModel, ConfigDict, ValidationError, create_model
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined, to_jsonable_python

from ..models import ToolDefinition

if TYPE_CHECKING:
    from ..runtime import Agent

__all__ = ["Tool", "ToolContext", "ToolInputError", "to_tool", "to_tools", "tool"]

NeedsApproval = bool | Callable[[dict[str, Any]], bool | Awaitable[bool]]


class ToolInputError(ValueError):
    """The model's arguments do not match the tool's schema; the message is shown to the model."""


@dataclass(slots=True)
class ToolContext:
    """What a running tool may know: the agent, the call id and the turn's request id."""

    agent: Agent | None
    tool_call_id: str
    tool_name: str
    request_id: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


_SECTION = re.compile(
    r"^\s*(Args|Arguments|Parameters|Returns|Return|Raises|Yields|Examples?|Notes?)\s*:\s*$"
)
_ARG_LINE = re.compile(r"^\s*(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def _parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into (description, {param: description})."""
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    description: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    arg_indent: int | None = None
    for line in lines:
        match = _SECTION.match(line)
        if match:
            section = match.group(1).lower()
            current = None
            arg_indent = None
            continue
        if section is None:
            description.append(line)
        elif section in ("args", "arguments", "parameters") and line.strip():
            indent = len(line) - len(line.lstrip())
            arg = _ARG_LINE.match(line)
            if arg and (arg_indent is None or indent <= arg_indent):
                arg_indent = indent
                current = arg.group(1).lstrip("*")
                params[current] = arg.group(2).strip()
            elif current is not None:
                params[current] = f"{params[current]} {line.strip()}".strip()
    return "\n".join(description).strip(), params


def _strip_titles(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: _strip_titles(v) for k, v in schema.items() if k != "title" or not isinstance(v, str)}
    if isinstance(schema, list):
        return [_strip_titles(v) for v in schema]
    return schema


class Tool:
    """A function the model may call.

    Build one with ``@tool`` (or ``Tool(fn)``). ``definition`` is what the model sees; ``validate`` checks
    the model's arguments; ``invoke`` runs the function. ``needs_approval`` (a bool, or a function of the
    validated input) pauses the call until a user approves it; ``idempotent`` tells recovery it may safely
    run the call again.
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        needs_approval: NeedsApproval = False,
        idempotent: bool = False,
        strict: bool | None = None,
    ) -> None:
        self.fn = fn
        self.name = name or getattr(fn, "__name__", "tool")
        self.needs_approval = needs_approval
        self.idempotent = idempotent
        self.strict = strict
        doc_description, param_docs = _parse_docstring(inspect.getdoc(fn))
        self.description = description if description is not None else doc_description
        self._ctx_param: str | None = None
        self._params: list[str] = []
        self._model = self._build_model(fn, param_docs)
        self.parameters: dict[str, Any] = _strip_titles(self._model.model_json_schema())
        self.parameters.setdefault("properties", {})
        self._bound: Any = None

    def __repr__(self) -> str:
        return f"Tool({self.name!r})"

    # -- schema --------------------------------------------------------------------------------------

    def _build_model(self, fn: Callable[..., Any], param_docs: dict[str, str]) -> type[BaseModel]:
        from pydantic import Field

        signature = inspect.signature(fn)
        try:
            hints = get_type_hints(fn, include_extras=True)
        except Exception:  # unresolvable forward references: fall back to raw annotations
            hints = {}
        fields: dict[str, Any] = {}
        params = list(signature.parameters.values())
        if params and params[0].name == "self":
            params = params[1:]
        for param in params:
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                continue
            annotation = hints.get(param.name, param.annotation)
            if param.name == "ctx" or annotation is ToolContext or annotation == "ToolContext":
                self._ctx_param = param.name
                continue
            if annotation is inspect.Parameter.empty:
                annotation = Any
            default = PydanticUndefined if param.default is inspect.Parameter.empty else param.default
            doc = param_docs.get(param.name)
            if isinstance(default, FieldInfo):  # ``x: int = Field(1, ge=1)``
                if doc and default.description is None:
                    annotation = Annotated[annotation, Field(description=doc)]
                fields[param.name] = (annotation, default)
            else:
                fields[param.name] = (annotation, Field(default, description=doc) if doc else default)
            self._params.append(param.name)
        model_name = "".join(part.capitalize() for part in re.split(r"[^0-9A-Za-z]+", self.name) if part)
        return create_model(  # type: ignore[call-overload, no-any-return]
            f"{model_name or 'Tool'}Input", __config__=ConfigDict(extra="forbid"), **fields
        )

    @property
    def definition(self) -> ToolDefinition:
        return ToolDefinition(self.name, self.description, self.parameters, self.strict)

    # -- binding (a @tool method on an agent class) --------------------------------------------------

    def __get__(self, instance: Any, owner: type | None = None) -> Tool:
        if instance is None:
            return self
        bound = object.__new__(Tool)
        bound.__dict__.update(self.__dict__)
        bound.fn = types.MethodType(self.fn, instance)
        return bound

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    # -- running -------------------------------------------------------------------------------------

    def validate(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """Validate the model's arguments; raise ``ToolInputError`` with a readable message."""
        try:
            validated = self._model.model_validate(dict(args))
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or 'input'}: {err['msg']}" for err in exc.errors()
            )
            raise ToolInputError(f"Invalid input for tool {self.name}: {problems}") from None
        return {name: getattr(validated, name) for name in self._params}

    async def requires_approval(self, args: Mapping[str, Any]) -> bool:
        rule = self.needs_approval
        if not callable(rule):
            return bool(rule)
        result = rule(dict(args))
        if inspect.isawaitable(result):
            result = await result
        return bool(result)

    async def invoke(
        self,
        args: Mapping[str, Any],
        ctx: ToolContext,
        on_preliminary: Callable[[Any], Awaitable[None]] | None = None,
        *,
        validate: bool = True,
    ) -> Any:
        """Run the tool and return its JSON-ready output.

        An async generator's yielded values are passed to ``on_preliminary`` as they come; the last one is
        the output. Exceptions propagate (the caller turns them into a tool error).
        """
        kwargs = self.validate(args) if validate else dict(args)
        if self._ctx_param is not None:
            kwargs[self._ctx_param] = ctx
        result = self.fn(**kwargs)
        if inspect.isasyncgen(result):
            last: Any = None
            async for value in result:
                last = to_jsonable_python(value)
                if on_preliminary is not None:
                    await on_preliminary(last)
            return last
        if inspect.isawaitable(result):
            result = await result
        return to_jsonable_python(result)


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    needs_approval: NeedsApproval = False,
    idempotent: bool = False,
    strict: bool | None = None,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    needs_approval: NeedsApproval = False,
    idempotent: bool = False,
    strict: bool | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a function a tool: ``@tool`` or ``@tool(needs_approval=True, name="get_weather")``."""

    def wrap(f: Callable[..., Any]) -> Tool:
        return Tool(
            f,
            name=name,
            description=description,
            needs_approval=needs_approval,
            idempotent=idempotent,
            strict=strict,
        )

    return wrap(fn) if fn is not None else wrap


def to_tool(value: Tool | Callable[..., Any], name: str | None = None) -> Tool:
    """A ``Tool`` from a tool or a plain function (renamed when ``name`` differs)."""
    if isinstance(value, Tool):
        if name is None or name == value.name:
            return value
        renamed = object.__new__(Tool)
        renamed.__dict__.update(value.__dict__)
        renamed.name = name
        return renamed
    if callable(value):
        return Tool(value, name=name)
    raise TypeError(f"not a tool: {value!r} (use @tool on a function)")


def to_tools(tools: Mapping[str, Any] | Iterable[Any] | None) -> dict[str, Tool]:
    """Normalise a list or a name→tool dict of tools and functions into ``{name: Tool}``."""
    if not tools:
        return {}
    if isinstance(tools, Mapping):
        return {key: to_tool(value, key) for key, value in tools.items()}
    result: dict[str, Tool] = {}
    for value in tools:
        converted = to_tool(value)
        result[converted.name] = converted
    return result
