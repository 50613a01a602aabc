"""The specialized template families (upstream's ``common_chat_try_specialized_template``, chat.cpp).

    detect(source) -> SpecializedFormat | None      the first family whose signature the source holds
    SpecializedFormat.build(tmpl, inputs) -> ChatParams

Enters: a template's source (as upstream's lexer keeps it) and the request's ``TemplateInputs``.
Leaves: ``ChatParams`` -- prompt, generation prompt, PEG parser (node ids equal to upstream's),
grammar and its laziness, triggers, preserved tokens, stops, thinking tags, delimiters -- exactly as
upstream's ``common_chat_params_init_<family>`` builds them. Detection runs in upstream's order on
the same source substrings; the table below is that order. A family whose builder must rewrite the
messages before anything else (Gemma 4's tool-response folding) does it in ``prepare``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

from ..render import TemplateInputs
from ..result import ChatParams
from ..templates import ChatTemplate

__all__ = ["SPECIALIZED_FORMATS", "SpecializedFormat", "detect"]

Builder = Callable[[ChatTemplate, TemplateInputs], ChatParams]


@dataclass(frozen=True)
class SpecializedFormat:
    """One family: its stable ``family`` name, its source signature and the module that builds it."""

    family: str
    signature: Callable[[str], bool]
    module: str  # llamact.chat.specialized.<module> defines build(tmpl, inputs) and optionally prepare(inputs)

    def build(self, tmpl: ChatTemplate, inputs: TemplateInputs) -> ChatParams:
        module = importlib.import_module(f"{__name__}.{self.module}")
        prepare = getattr(module, "prepare", None)
        if prepare is not None:
            prepare(tmpl, inputs)
        params: ChatParams = module.build(tmpl, inputs)
        return params


def _all(*needles: str) -> Callable[[str], bool]:
    return lambda src: all(n in src for n in needles)


def is_lfm2_template(src: str) -> bool:
    """Upstream's ``is_lfm2_template`` (parsers/lfm2.cpp)."""
    return "<|tool_list_start|>" in src and "<|tool_list_end|>" in src


# Upstream's detection order: the first signature that matches wins.
SPECIALIZED_FORMATS: tuple[SpecializedFormat, ...] = (
    # Mistral Small 3.2 has [CALL_ID], Ministral 3 does not
    SpecializedFormat("ministral_3", lambda s: _all("[SYSTEM_PROMPT]", "[TOOL_CALLS]", "[ARGS]")(s)
                      and "[CALL_ID]" not in s, "ministral3"),
    SpecializedFormat("gpt_oss", _all("<|channel|>"), "gpt_oss"),
    SpecializedFormat("muse_glimmer", _all("<atem:function_calls>", "<|eom|>"), "muse_glimmer"),
    SpecializedFormat("functionary_v3_2", _all(">>>all", ">>>${recipient}"), "functionary_v3_2"),
    SpecializedFormat("kimi_k2", _all("<|tool_calls_section_begin|>", "<|tool_call_begin|>"), "kimi_k2"),
    SpecializedFormat("kimi_k3", _all("<|open|>", "<|close|>", "<|end_of_msg|>"), "kimi_k3"),
    SpecializedFormat("ling_3", _all("<role>ASSISTANT</role>", "<arg_key>"), "ling3"),
    SpecializedFormat("cohere2_moe", _all("<|START_TEXT|>", "<|START_ACTION|>"), "cohere2moe"),
    SpecializedFormat("lfm2", is_lfm2_template, "lfm2"),
    SpecializedFormat("lfm2_5", lambda s: "List of tools: [" in s and "<|tool_list_start|>" not in s, "lfm2_5"),
    SpecializedFormat("gigachat_v3", lambda s: _all("<|role_sep|>", "<|message_sep|>")(s)
                      and "<|function_call|>" not in s, "gigachat_v3"),
    SpecializedFormat("minimax_m3", _all("]<]minimax[>[", "<tool_call>", "<invoke name="), "minimax_m3"),
    SpecializedFormat("deepseek_v3_2", lambda s: _all("dsml_token", "DSML")(s)
                      and ("function_calls" in s or "tool_calls" in s), "deepseek_v3_2"),
    SpecializedFormat("gemma4", _all("'<|tool_call>call:'"), "gemma4"),
    SpecializedFormat("minicpm5", _all("Tool usage guidelines:", '<function name="', '<param name="'), "minicpm5"),
    # Qwen3-Coder XML, also Nemotron Nano 3, Qwen3.5 and StepFun-3.5-Flash; not templates without
    # newlines between the tags
    SpecializedFormat("qwen3_coder_xml", lambda s: _all("<tool_call>", "<function=", "<parameter=")(s)
                      and "'<tool_call><function=' ~ tool_call.name ~ '>'" not in s, "qwen3_coder"),
)


def detect(source: str) -> SpecializedFormat | None:
    """The specialized family of a template source (upstream's order), or None (the autoparser's)."""
    for fmt in SPECIALIZED_FORMATS:
        if fmt.signature(source):
            return fmt
    return None
