"""LFM2.5 (upstream's ``common_chat_params_init_lfm2`` with ``tool_list_tokens = false``, parsers/lfm2.cpp).

The LFM2 format (see lfm2.py), but the system turn lists the tools as plain ``List of tools: [...]``
text, so there are no tool-list tokens to preserve.
"""

from __future__ import annotations

from ..render import TemplateInputs
from ..result import ChatParams
from ..templates import ChatTemplate
from .lfm2 import build_lfm2


def build(tmpl: ChatTemplate, inputs: TemplateInputs) -> ChatParams:
    return build_lfm2(tmpl, inputs, tool_list_tokens=False)
