"""llama-server's sampling for a chat request, asked of llama-server itself through ``/completion``.

    completion_body(result, n_predict=..., ...) -> the JSON body
    server_sampling(answer) -> ServerSampling (triggers, preserved tokens, generated tokens)

``oaicompat_chat_params_parse`` (tools/server/server-common.cpp) turns a chat request into the raw
fields of a completion task: the template's prompt, grammar (typed ``tool_calls``, hence prefilled
when not lazy), lazy flag, triggers, preserved tokens, generation prompt, the additional stops
appended to ``stop``, and the reasoning-budget fields when the template has thinking end tags.
Sending exactly those fields to ``/completion`` makes the server run its own field handlers
(server-schema.cpp: WORD triggers of one token become TOKEN triggers, preserved strings become ids)
and its own sampler (common/sampling.cpp) on the apply result llamact computed (equal to upstream's,
as the apply parity suite shows), so the sampling half is compared on its own: the settings the
server derived (``generation_settings``) and the tokens it generated.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..chat.result import ChatTemplateResult, GrammarTrigger
from ..json_types import Json

# common_grammar_trigger_type, as the server's JSON numbers them
TRIGGER_TYPES = {"token": 0, "word": 1, "pattern": 2, "pattern_full": 3}
TRIGGER_NAMES = {number: name for name, number in TRIGGER_TYPES.items()}


def trigger_json(trigger: GrammarTrigger) -> Json:
    """``server_grammar_trigger::to_json``."""
    out: Json = {"type": TRIGGER_TYPES[trigger.type], "value": trigger.value}
    if trigger.type == "token":
        out["token"] = trigger.token
    return out


def completion_body(result: ChatTemplateResult, *, n_predict: int, thinking_budget_tokens: int = -1,
                    reasoning_budget_message: str = "", reasoning_control: bool = False,
                    stop: Sequence[str] = (), grammar: str | None = None) -> Json:
    """The ``/completion`` body carrying what the chat path derives from ``result`` (greedy decoding
    comes from the server's ``--temp 0``). ``grammar``: a user grammar instead of the template's."""
    body: Json = {
        "prompt": result.prompt,
        "n_predict": n_predict,
        "grammar_lazy": result.grammar_lazy,
        "grammar_triggers": [trigger_json(t) for t in result.grammar_triggers],
        "preserved_tokens": list(result.preserved_tokens),
        "generation_prompt": result.generation_prompt,
        "stop": list(stop) + list(result.additional_stops),
        "return_tokens": True,
        "cache_prompt": False,
    }
    if result.grammar:
        body["grammar"] = result.grammar
        body["grammar_type"] = "tool_calls"
    elif grammar:
        body["grammar"] = grammar  # a user grammar: typed USER by the server, never prefilled
    if result.thinking_end_tags:
        body.update(
            reasoning_budget_tokens=thinking_budget_tokens,
            reasoning_budget_start_tag=result.thinking_start_tag,
            reasoning_budget_end_tags=list(result.thinking_end_tags),
            reasoning_budget_message=reasoning_budget_message,
            reasoning_control=reasoning_control,
        )
    return body


@dataclass(frozen=True)
class ServerSampling:
    """What the server derived and generated for one ``/completion`` request."""

    triggers: tuple[GrammarTrigger, ...]
    preserved_tokens: tuple[int, ...]
    grammar_lazy: bool
    tokens: tuple[int, ...]      # generated, without a final end-of-generation token
    content: str
    stop_type: str


def server_sampling(answer: Json) -> ServerSampling:
    settings = answer["generation_settings"]
    triggers = tuple(GrammarTrigger(TRIGGER_NAMES[t["type"]], t["value"], t.get("token", -1))
                     for t in settings["grammar_triggers"])
    tokens = list(answer["tokens"])
    if answer["stop_type"] == "eos" and tokens:
        tokens.pop()  # the server lists the end-of-generation token; llamact's stream does not
    return ServerSampling(triggers, tuple(settings["preserved_tokens"]), bool(settings["grammar_lazy"]),
                          tuple(tokens), answer["content"], answer["stop_type"])
