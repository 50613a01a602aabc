"""Plain Python functions as tools: their JSON schema, and validated calls.

    tool = Tool.from_function(get_weather)     # name, description, parameters schema
    tool.spec                                  # the OpenAI tool dict for create(tools=...)
    tool.invoke('{"city": "Paris"}')           # validate + convert the arguments, call, return the result

The schema comes from the signature, the type hints and the docstring through pydantic
(``create_model`` over the parameters, ``model_json_schema``); the docstring's first paragraph is
the description and an ``Args:`` / ``Parameters:`` section describes the parameters. Arguments are
validated and converted by the same model before the call (a ``pydantic.ValidationError`` when
they do not fit). Async functions are run to completion with ``asyncio.run``, or in a worker thread
when called from a running event loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, get_type_hints

from pydantic import BaseModel, Field, create_model
from pydantic_core import to_json

from ..errors import LlamaRequestException, LlamaStateException

__all__ = ["Tool", "as_tool", "tool_result_text"]

_SECTION = re.compile(r"^\s*(Args|Arguments|Parameters|Params)\s*:\s*$", re.IGNORECASE)
_PARAM = re.compile(r"^\s*(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The description (text before the first section) and ``name: text`` entries of the Args section."""
    lines = inspect.cleandoc(doc).splitlines() if doc else []
    description: list[str] = []
    params: dict[str, str] = {}
    current: str | None = None
    in_args = False
    for line in lines:
        if _SECTION.match(line):
            in_args = True
            continue
        if in_args:
            if line and not line[0].isspace() and line.rstrip().endswith(":"):
                in_args = False  # the next section (Returns:, Raises:, ...)
                continue
            match = _PARAM.match(line)
            if match and line[:1].isspace() and len(line) - len(line.lstrip()) <= 4:
                current = match.group(1).lstrip("*")
                params[current] = match.group(2).strip()
            elif current is not None and line.strip():
                params[current] = (params[current] + " " + line.strip()).strip()
        elif not params and not in_args:
            description.append(line)
    text = "\n".join(description).strip()
    return text.split("\n\n")[0].replace("\n", " ").strip(), params


@dataclass(frozen=True)
class Tool:
    """A Python function the model may call. ``ChatSession.send_with_tools()`` makes one of each
    function it is given (``Tool.from_function``: the name, the docstring's first paragraph as the
    description, the signature's annotations as the parameters' schema, through pydantic).

    Attributes:
        name: the function's name, as the model calls it.
        description: what the model reads about it.
        parameters: the arguments' JSON schema.
        function: the Python callable (sync or async); None for a tool the caller runs itself.
        arguments_model: the pydantic model the arguments are validated with before the call.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    function: Callable[..., Any] | None
    arguments_model: type[BaseModel] | None

    @classmethod
    def declared(cls, spec: Mapping[str, Any]) -> Tool:
        """A tool the model may call but Python does not run (an OpenAI tool dict): the loop stops
        with ``unhandled_tool_calls`` and hands its calls to the caller."""
        fn = spec.get("function") if isinstance(spec, Mapping) else None
        if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str):
            raise LlamaRequestException(f"a declared tool must be an OpenAI tool dict with function.name, got {spec!r}")
        return cls(fn["name"], str(fn.get("description", "")), dict(fn.get("parameters") or {"type": "object"}),
                   None, None)

    @classmethod
    def from_function(cls, function: Callable[..., Any], name: str | None = None) -> Tool:
        if not callable(function):
            raise LlamaRequestException(f"a tool must be a function, got {function!r}")
        signature = inspect.signature(function)
        try:
            hints = get_type_hints(function, include_extras=True)  # keep Annotated constraints
        except Exception as exc:
            raise LlamaRequestException(f"cannot read the type hints of tool {function!r}: {exc}") from exc
        description, docs = _parse_docstring(inspect.getdoc(function) or "")
        fields: dict[str, Any] = {}
        for param in signature.parameters.values():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise LlamaRequestException(
                    f"tool {function.__name__}: *args / **kwargs cannot be described to a model")
            annotation = hints.get(param.name, Any)
            default = ... if param.default is param.empty else param.default
            fields[param.name] = (annotation, Field(default, description=docs.get(param.name)))
        tool_name = name or function.__name__
        model = create_model(f"{tool_name}_arguments", **fields)
        schema = model.model_json_schema()
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        return cls(tool_name, description, schema, function, model)

    @property
    def spec(self) -> dict[str, Any]:
        """The OpenAI tool definition."""
        function: dict[str, Any] = {"name": self.name}
        if self.description:
            function["description"] = self.description
        function["parameters"] = self.parameters
        return {"type": "function", "function": function}

    def validate(self, arguments: str | Mapping[str, Any]) -> dict[str, Any]:
        """The arguments, parsed, validated and converted to the annotated types (raises
        ``json.JSONDecodeError`` or ``pydantic.ValidationError``)."""
        if self.arguments_model is None:
            raise LlamaStateException(f"tool {self.name} is declared only: it has no function to validate for")
        raw = json.loads(arguments or "{}") if isinstance(arguments, str) else dict(arguments)
        validated = self.arguments_model.model_validate(raw)
        return {name: getattr(validated, name) for name in type(validated).model_fields}

    def invoke(self, arguments: str | Mapping[str, Any]) -> Any:
        """Validate ``arguments`` and call the function (awaiting it when it is async)."""
        if self.function is None:
            raise LlamaStateException(f"tool {self.name} is declared only: the caller runs it")
        result = self.function(**self.validate(arguments))
        if inspect.isawaitable(result):
            return _await(result)
        return result


def _await(awaitable: Any) -> Any:
    async def run() -> Any:
        return await awaitable

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(run())
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:  # a loop runs in this thread
        return pool.submit(asyncio.run, run()).result()


def as_tool(tool: Tool | Callable[..., Any] | Mapping[str, Any]) -> Tool:
    """A Tool from a function, an OpenAI tool dict (declared only), or a Tool."""
    if isinstance(tool, Tool):
        return tool
    if isinstance(tool, Mapping):
        return Tool.declared(tool)
    return Tool.from_function(tool)


def tool_result_text(value: Any) -> str:
    """What the model reads as a tool's result: strings as they are, anything else as JSON."""
    if isinstance(value, str):
        return value
    return to_json(value, fallback=str).decode("utf-8")
