"""What the server does with tools the model's chat template cannot carry (SmolLM2's and Gemma 3's
templates render no tools and have no tool-call format), the same for every ``tool_choice``:

    warning = tool_policy(request, state)     # None, or the warning the answer carries; RequestError 400

* a choice that demands a call -- a named function, or ``"required"`` -- is refused (400): no call
  can be made, and a reply without one would break the request's contract. The message
  (``chat/tool_format.py``, the same for every entry point) names the server's remedies: a model made
  for tools, ``llamact serve --model qwen2.5-coder-0.5b``, or a template with a tool-call format,
  ``--chat-template-file chatml-tools`` (shipped with llamact), where the library names its own
  (``custom_template``) and ``llamact chat`` its flags. llama-server answers both with plain content,
  the tools silently dropped (deviation 15 in docs/design.md; shown by ``tests/server/test_router.py``);
* ``"auto"`` is answered as llama-server answers it -- the model replies without seeing the tools --
  and the answer says so: the header ``X-Llamact-Warning``, and once per model a warning in the log.

``"none"``, and templates with a tool-call format, are left alone (``state.tools_supported``, asked
once when the model loaded).
"""

from __future__ import annotations

from typing import Any

from ...chat.request import ChatRequest
from ...chat.tool_format import TOOL_MODEL, TOOL_TEMPLATE, cannot_call
from ..http.errors import RequestError

__all__ = ["SERVER_REMEDY", "WARNING_HEADER", "tool_policy"]

WARNING_HEADER = "X-Llamact-Warning"
SERVER_REMEDY = (f"start the server with a model made for tools (llamact serve --model {TOOL_MODEL}), or give this "
                 f"model a template with a tool-call format (--chat-template-file {TOOL_TEMPLATE}, shipped with "
                 "llamact, or the model's own tool-use template)")


def _template(state: Any) -> str:
    path = state.settings.chat_template_file
    return f"the chat template file {path}" if path is not None else f"model {state.label}'s chat template"


def tool_policy(request: ChatRequest, state: Any) -> str | None:
    """None, a warning for the answer, or the RequestError refusing the request (see the module)."""
    inputs = request.inputs
    if not inputs.tools or inputs.tool_choice == "none" or state.tools_supported:
        return None
    if inputs.named_tool is not None or inputs.tool_choice == "required":
        demand = f"names the function {inputs.named_tool!r}" if inputs.named_tool else 'is "required"'
        raise RequestError(cannot_call(_template(state), demand, SERVER_REMEDY))
    warning = (f"{_template(state)} has no tool-call format: the request's tools were not shown to the model "
               "and its reply holds no tool call")
    if not state.warned_tools:
        state.warned_tools = True
        log = getattr(state, "log", None)
        if log is not None:
            log.warning(f"model {state.label}: a request brought tools, but {warning} ({SERVER_REMEDY}; later "
                        "requests are not logged, their answers carry X-Llamact-Warning)", model=state.model_name)
    return warning
