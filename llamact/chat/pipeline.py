"""The apply step of a chat request: upstream's pipeline, or llamact's named tool choice on top of it.

    apply_request(templates, request) -> ChatTemplateResult      (a ``ChatRequest``)
    apply_templates(templates, inputs) -> ChatTemplateResult     (its ``ChatTemplateInputs``)

What enters: a template set (``chat.templates``) and the request's inputs. What leaves: the
``ChatTemplateResult`` -- upstream's ``common_chat_templates_apply`` (``chat.apply``), or, when the
request names the function to call, the forced call of docs/design.md deviation 9
(``chat.deviations.named_tool``, which applies upstream's pipeline twice), or for ``"required"`` the
grammar of calls alone of deviation 19 (``chat.deviations.required_tool``). Raises what those raise.
"""

from __future__ import annotations

from .apply import ChatTemplateInputs, upstream_apply
from .deviations.named_tool import apply_named_tool
from .deviations.required_tool import apply_required_calls
from .request import ChatRequest
from .result import ChatTemplateResult
from .templates import ChatTemplates

__all__ = ["apply_request", "apply_templates"]


def apply_templates(templates: ChatTemplates, inputs: ChatTemplateInputs) -> ChatTemplateResult:
    """Upstream's ``common_chat_templates_apply``, with deviation 9 when ``inputs.named_tool`` is set
    and deviation 19 when ``inputs.required_calls_only`` is."""
    if inputs.named_tool is not None:
        return apply_named_tool(templates, inputs)
    if inputs.required_calls_only and inputs.tool_choice == "required":
        return apply_required_calls(templates, inputs)
    return upstream_apply(templates, inputs)


def apply_request(templates: ChatTemplates, request: ChatRequest) -> ChatTemplateResult:
    """``apply_templates`` for a ``ChatRequest``."""
    return apply_templates(templates, request.inputs)
