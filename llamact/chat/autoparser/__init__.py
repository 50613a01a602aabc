"""The differential autoparser (upstream's chat-diff-analyzer / chat-auto-parser-generator).

    apply_autoparser(tmpl, inputs) -> ChatParams

Every template that matches no specialized family gets its parser and grammar from here.
Not ported yet: until it is, such templates raise ``LlamaUnsupportedException`` naming the template.
"""

from __future__ import annotations

from ...errors import LlamaUnsupportedException
from ..render import TemplateInputs
from ..result import ChatParams
from ..templates import ChatTemplate

__all__ = ["apply_autoparser"]


def apply_autoparser(tmpl: ChatTemplate, inputs: TemplateInputs) -> ChatParams:
    raise LlamaUnsupportedException(
        f"The chat template from {tmpl.origin} matches none of the specialized formats, and the "
        "differential autoparser that handles it is not available in this version of llamact.",
        {"origin": tmpl.origin, "route": "autoparser"})
