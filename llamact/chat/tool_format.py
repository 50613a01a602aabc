"""A request that demands a tool call from a chat template without a tool-call format, said the same
way by every entry point (the library, ``llamact chat``, ``llamact serve``, the compat ``Llama``).

    template_path("chatml-tools") -> Path       a template llamact ships (``builtin/``), by name
    demanded_call(tool_choice) -> str | None    'is "required"' / 'names the function ...' / None
    cannot_call(template, demand, remedy) -> str    the message; each entry point names its own remedy

SmolLM2's and Gemma 3's templates render no tools and have no tool-call format: no call can be made
through them, so a ``tool_choice`` that demands one -- ``"required"`` or a named function -- is
refused everywhere (the library: ``engine.chat_calls.refuse_uncallable`` and
``deviations/named_tool.py``; llama-server answers such a request with plain text: docs/design.md deviation 15).
The remedies: a model made for tools (``TOOL_MODEL``, a named model of ``llamact.models``), or a
template with a tool-call format, such as the ChatML one llamact ships (``TOOL_TEMPLATE``: Hermes'
``<tool_call>`` JSON, which the autoparser reads).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["LIBRARY_REMEDY", "TOOL_MODEL", "TOOL_TEMPLATE", "builtin_templates", "cannot_call", "demanded_call",
           "template_path"]

TOOL_MODEL = "qwen2.5-coder-0.5b"       # the named model to suggest: small, and its template calls tools
TOOL_TEMPLATE = "chatml-tools"          # the shipped template to suggest
_BUILTIN = Path(__file__).with_name("builtin")
LIBRARY_REMEDY = (f'load a model made for tools (LlamaEngine.load("{TOOL_MODEL}"), a named model llamact '
                  "downloads), or give this model a template with a tool-call format "
                  "(ModelParams(chat_template=...) or custom_template=; llamact ships one: "
                  f'llamact.chat.tool_format.template_path("{TOOL_TEMPLATE}"))')


def builtin_templates() -> list[str]:
    """The names of the templates llamact ships."""
    return sorted(p.stem for p in _BUILTIN.glob("*.jinja"))


def template_path(name: str) -> Path | None:
    """The file of the shipped template ``name`` (None: no such template)."""
    path = _BUILTIN / f"{name}.jinja"
    return path if name in builtin_templates() else None


def demanded_call(tool_choice: Any) -> str | None:
    """How ``tool_choice`` demands a call, in words (None: it does not)."""
    if tool_choice == "required":
        return 'is "required"'
    if isinstance(tool_choice, dict):
        name = (tool_choice.get("function") or {}).get("name") or tool_choice.get("name")
        return f"names the function {name!r}"
    return None


def cannot_call(template: str, demand: str, remedy: str) -> str:
    """The one message: ``template`` ("model X's chat template"), ``demand`` (``demanded_call``)."""
    return (f"tool_choice {demand}, but {template} has no tool-call format: the model cannot call a tool "
            f"through it; {remedy}")

