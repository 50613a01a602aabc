"""The apply pipeline as a fuzz target (``chat_apply``): random requests through every vendored
template's ``common_chat_templates_apply``, llamact's ``apply_templates`` against the oracle.

Inputs: ``{"template": <file stem>, "inputs": {...}}`` -- the oracle's ``chat_apply`` inputs: a
random conversation and tool set (gen_conversation.py), and random apply options (tool_choice,
parallel calls, reasoning format, thinking, a response schema, kwargs, continuation, no generation
prompt). The whole answer is compared (prompt, format, grammar, triggers, parser JSON, ...), errors
included, under the scoreboard's rules for ``chat_apply``.
"""

from __future__ import annotations

import random
from typing import Any

from ...json_types import Json
from ..components import ORACLE_NOW
from ..corpus import BOS_TOKEN, EOS_TOKEN
from .gen_conversation import conversation, random_json_value, tools
from .target import Target

_SCHEMAS: list[Json] = [
    {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]},
    {"type": "array", "items": {"type": "integer"}},
    {"type": "object"},
    {},
    {"type": "string", "enum": ["yes", "no"]},
]


def _inputs(rng: random.Random) -> Json:
    tool_set = tools(rng) if rng.random() < 0.6 else None
    messages = conversation(rng, tool_set)
    inputs: Json = {"messages": messages, "tools": tool_set or [],
                    "tool_choice": rng.choice(["auto", "auto", "required", "none"]),
                    "parallel_tool_calls": rng.random() < 0.3,
                    "reasoning_format": rng.choice(["none", "deepseek", "auto", "deepseek-legacy"]),
                    "enable_thinking": rng.random() < 0.6,
                    "add_generation_prompt": rng.random() < 0.9}
    if rng.random() < 0.15:
        inputs["json_schema"] = rng.choice(_SCHEMAS)
    if rng.random() < 0.15:
        inputs["chat_template_kwargs"] = {rng.choice(["enable_thinking", "reasoning_effort", "custom"]):
                                          random_json_value(rng)}
    if rng.random() < 0.1 and messages and messages[-1].get("role") == "assistant":
        inputs["continue_final_message"] = rng.choice([True, "content", "reasoning_content"])
        inputs["add_generation_prompt"] = False
    return inputs


class ChatApplyTarget(Target):
    name = "chat_apply"
    component = "chat_apply"
    unit = "apply"
    fixed_keys = frozenset({"template"})

    def generate(self, rng: random.Random) -> Json:
        return {"template": rng.choice(self.ctx.template_names()), "inputs": _inputs(rng)}

    def _request(self, inp: Json) -> Json:
        return {"template": self.ctx.template(inp["template"]), "bos_token": BOS_TOKEN, "eos_token": EOS_TOKEN,
                "add_bos": False, "add_eos": False, "inputs": inp.get("inputs", {"messages": []})}

    def request(self, inp: Json) -> dict[str, Any]:
        return {"op": "chat_apply", **self._request(inp), "now": ORACLE_NOW}

    def run(self, inp: Json) -> Json:
        from ..apply_runner import apply_request

        return apply_request(self._request(inp), ORACLE_NOW)

