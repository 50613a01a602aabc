"""Upstream's per-template corrections to the analysis, chosen by substrings of the template source
(the ``workarounds`` table of chat-diff-analyzer.cpp), applied in upstream's order after all phases.

    apply_workarounds(source, analysis) -> AutoparserAnalysis

Each entry names the template family, the test on the source, and the edit. Edits work on the
analysis' JSON form (``to_json``), whose paths are upstream's field names.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ...json_types import Json
from .helpers import trim_whitespace
from .model import AutoparserAnalysis

__all__ = ["WORKAROUNDS", "Workaround", "apply_workarounds"]


@dataclass(frozen=True)
class Workaround:
    name: str
    applies: Callable[[str, Json], bool]  # (template source, analysis JSON)
    edit: Callable[[Json], None]          # changes the analysis JSON in place


def _set(analysis: Json, **paths: Json) -> None:
    """``_set(a, content__mode="PLAIN")`` sets ``a["content"]["mode"]`` (``__`` separates levels)."""
    for path, value in paths.items():
        *parents, leaf = path.split("__")
        node = analysis
        for key in parents:
            node = node[key]
        node[leaf] = value


def _think_tags(a: Json) -> None:
    _set(a, reasoning__mode="TAG_BASED", reasoning__start="<think>", reasoning__end="</think>")
    a["preserved_tokens"] += ["<think>", "</think>"]


def _granite(a: Json) -> None:
    _think_tags(a)
    _set(a, content__mode="WRAPPED_WITH_REASONING", content__start="<response>", content__end="</response>")
    a["preserved_tokens"] += ["<response>", "</response>"]


def _command_r_plus(a: Json) -> None:
    _set(a, content__mode="ALWAYS_WRAPPED", content__start="<|CHATBOT_TOKEN|>", content__end="<|END_OF_TURN_TOKEN|>",
         user_start="<|START_OF_TURN_TOKEN|><|USER_TOKEN|>")
    a["preserved_tokens"] += ["<|CHATBOT_TOKEN|>", "<|END_OF_TURN_TOKEN|>"]


def _functionary_v3_1(a: Json) -> None:
    # no section delimiter: each call is <function=name>{...}</function>
    _set(a, content__mode="PLAIN", content__end="", tools__function__name_prefix="",
         tools__format__section_start="", tools__format__section_end="", tools__format__per_call_start="<function=",
         tools__format__per_call_end="</function>", tools__function__close="",
         preserved_tokens=["<|eot_id|>", "<|eom_id|>", "<function=", ">", "</function>"])


def _r1_distill_qwen(a: Json) -> None:
    _set(a, tools__format__section_start="<｜tool▁calls▁begin｜>", tools__format__section_end="<｜tool▁calls▁end｜>",
         tools__format__per_call_start="<｜tool▁call▁begin｜>function", tools__function__name_prefix="<｜tool▁sep｜>",
         tools__format__per_call_end="<｜tool▁call▁end｜>", tools__function__close="```")


def _nemotron_nano_v2(a: Json) -> None:
    _set(a, tools__format__mode="JSON_NATIVE", tools__format__section_start="", tools__format__section_end="",
         tools__format__per_call_start="<TOOLCALL>", tools__format__per_call_end="</TOOLCALL>",
         tools__format__tools_array_wrapped=True, content__mode="PLAIN", content__start="", content__end="",
         reasoning__mode="TAG_BASED", reasoning__start="<think>\n", reasoning__end="</think>",
         assistant_start="<SPECIAL_11>Assistant", user_start="<SPECIAL_11>User",
         preserved_tokens=["<SPECIAL_11>", "</think>", "<TOOLCALL>", "</TOOLCALL>"])


def _laguna(a: Json) -> None:
    # the template renders its delimiters with formatting whitespace ("<think>\n",
    # "</arg_value>\n") that the model does not emit: keep the bare tags
    args = a["tools"]["arguments"]
    reasoning = a["reasoning"]
    reasoning["start"], reasoning["end"] = trim_whitespace(reasoning["start"]), trim_whitespace(reasoning["end"])
    for key in ("value_prefix", "value_suffix", "separator"):
        args[key] = trim_whitespace(args[key])
    args["tolerate_intertag_whitespace"] = True
    # the end-of-turn text can come as plain text tokens after tool calls: stop on it as a string
    a["additional_stops"] += ["</assistant>"]


def _bailing_v3(a: Json) -> None:
    args = a["tools"]["arguments"]
    args["value_suffix"] = trim_whitespace(args["value_suffix"])
    args["tolerate_intertag_whitespace"] = True


def _has(*needles: str) -> Callable[[str, Json], bool]:
    return lambda src, _a: all(n in src for n in needles)


_FUNCTIONARY_V3_1 = ('set has_code_interpreter = tools | selectattr("type", "equalto", "code_interpreter") '
                     '| list | length > 0')
_R1_DISTILL_QWEN = "{{'<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>' + tool['type'] + '<｜tool▁sep｜>'"
_FIREWORKS = ("{%- set system_prompt = '<|start_header_id|>' + 'system' + '<|end_header_id|>\\n\\n'"
              " + message['content'] | trim + '\\n' + system_prompt_suffix + '<|eot_id|>' -%}")

WORKAROUNDS: tuple[Workaround, ...] = (
    # old reasoning Qwen / DeepSeek templates drop the reasoning they are given, yet models reason
    Workaround("old Qwen/DeepSeek thinking template",
               lambda src, a: ("content.split('</think>')" in src and "reasoning_content" not in src
                               and "<SPECIAL_12>" not in src and a["reasoning"]["mode"] == "NONE"),
               _think_tags),
    Workaround("Granite 3.3", _has("Write your thoughts between <think></think> and write your response between "
                                   "<response></response>"), _granite),
    Workaround("Cohere Command R+",
               lambda src, a: ("<|CHATBOT_TOKEN|>" in src and "<|END_OF_TURN_TOKEN|>" in src
                               and not a["content"]["start"]),
               _command_r_plus),
    Workaround("Functionary 3.1", _has(_FUNCTIONARY_V3_1), _functionary_v3_1),
    Workaround("DeepSeek-R1-Distill-Qwen", _has(_R1_DISTILL_QWEN), _r1_distill_qwen),
    Workaround("Nemotron Nano v2", _has("<SPECIAL_10>", "<SPECIAL_11>", "<SPECIAL_12>", "<TOOL_RESPONSE>"),
               _nemotron_nano_v2),
    Workaround("Fireworks v2", _has(_FIREWORKS),
               lambda a: _set(a, assistant_start="<|start_header_id|>assistant<|end_header_id|>",
                              user_start="<|start_header_id|>user<|end_header_id|>")),
    Workaround("Solar Open", _has("<|begin|>assistant<|think|><|end|>"),
               lambda a: _set(a, assistant_start="<|begin|>assistant")),
    Workaround("Apriel 1.6", _has("if not loop.last and '[BEGIN FINAL RESPONSE]' in asst_text"),
               lambda a: _set(a, user_start="<|begin_user|>", assistant_start="<|begin_assistant|>")),
    # the JSON {name, parameters} instruction: models answer with the OpenAI function wrapper
    Workaround("JSON name/parameters tool instruction",
               _has('Respond in the format {"name": function name', "Do not use variables."),
               lambda a: _set(a, tools__format__openai_wrapper_trigger=True)),
    Workaround("Laguna", _has("laguna_glm_thinking"), _laguna),
    Workaround("Bailing V3", _has("Bailing V3 chat template"), _bailing_v3),
)


def apply_workarounds(source: str, analysis: AutoparserAnalysis) -> AutoparserAnalysis:
    data = analysis.to_json()
    changed = False
    for workaround in WORKAROUNDS:
        if workaround.applies(source, data):
            workaround.edit(data)
            changed = True
    return AutoparserAnalysis.from_json(data) if changed else analysis
