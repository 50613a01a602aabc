"""llamact's side of the ``template_render`` and ``chat_apply`` rows: the oracle's ``chat_apply``
request, run through ``llamact.chat``.

The request is read as the oracle reads it (``inputs_from_json`` in tests/oracle/oracle.cpp):
messages and tools through the OpenAI conversions, ``continue_final_message`` true / "content" /
"reasoning_content", kwargs as JSON values. A failure comes back as error data with the message,
so that its text is compared too. ``route`` names which part of the pipeline a case exercises
(``specialized``, ``autoparser``, ``pure_content``), for the scoreboard's split.
"""

from __future__ import annotations

from ..chat import specialized
from ..chat.apply import ChatTemplateInputs
from ..chat.oai import parse_messages, parse_tool_choice, parse_tools
from ..chat.pipeline import apply_templates
from ..chat.templates import load_chat_templates, normalized_source
from ..json_types import Json
from .corpus import Case

ROUTE_SPECIALIZED = "specialized"
ROUTE_AUTOPARSER = "autoparser"
ROUTE_PURE_CONTENT = "pure_content"


def _continuation(value: Json) -> str:
    if value is True:
        return "auto"
    if value in ("reasoning_content", "content"):
        return str(value)
    return "none"


def inputs_from_request(inp: Json, now: float | None) -> ChatTemplateInputs:
    """The oracle's ``inputs`` object as llamact's typed request."""
    tools = inp.get("tools")
    return ChatTemplateInputs(
        messages=tuple(parse_messages(inp["messages"])),
        tools=tuple(parse_tools(tools)) if tools is not None else (),
        tool_choice=parse_tool_choice(inp.get("tool_choice", "auto")),
        parallel_tool_calls=inp.get("parallel_tool_calls", False),
        reasoning_format=inp.get("reasoning_format", "none"),
        enable_thinking=inp.get("enable_thinking", True),
        grammar=inp.get("grammar", ""),
        add_generation_prompt=inp.get("add_generation_prompt", True),
        force_pure_content=inp.get("force_pure_content", False),
        json_schema=inp.get("json_schema"),
        continue_final_message=_continuation(inp.get("continue_final_message")),
        chat_template_kwargs=dict(inp.get("chat_template_kwargs") or {}),
        now=now,
    )


def apply_request(request: Json, now: float | None) -> Json:
    """The oracle's ``chat_apply`` answer for ``request``, computed by llamact."""
    templates = load_chat_templates(request["template"], bos_token=request.get("bos_token", ""),
                                    eos_token=request.get("eos_token", ""), add_bos=request.get("add_bos", False),
                                    add_eos=request.get("add_eos", False), origin="corpus template")
    return apply_templates(templates, inputs_from_request(request["inputs"], now)).to_json()


def route(case: Case) -> str:
    if case.input["inputs"].get("force_pure_content"):
        return ROUTE_PURE_CONTENT
    return ROUTE_SPECIALIZED if specialized.detect(normalized_source(case.input["template"])) else ROUTE_AUTOPARSER


def own_parse_stream(case_input: Json, now: float | None) -> Json:
    """A synthesised output parsed as the oracle's ``chat_parse_stream`` parses it (every UTF-8-safe
    prefix partially, the whole text finally, server-style ids and diffs), but with the parser, format
    and generation prompt llamact's own apply pipeline builds for the request."""
    from ..chat.diffs import ChatDiffError, compute_diffs, set_tool_call_ids
    from ..chat.messages import ChatMessage
    from ..chat.output_parser import ChatParseError
    from .stream_replay import counter_ids

    request = case_input["apply"]
    templates = load_chat_templates(request["template"], bos_token=request.get("bos_token", ""),
                                    eos_token=request.get("eos_token", ""), add_bos=request.get("add_bos", False),
                                    add_eos=request.get("add_eos", False), origin="corpus template")
    result = apply_templates(templates, inputs_from_request(request["inputs"], now))
    answer = result.to_json()
    out: Json = {k: answer[k] for k in ("format", "generation_prompt", "parser")}
    parser, new_id = result.output_parser(), counter_ids()
    data = case_input["text"].encode("utf-8")
    previous, ids = ChatMessage(), list[str]()
    steps = []
    ends = [(end, True) for end in range(len(data) + 1) if end == len(data) or data[end] & 0xC0 != 0x80]
    for end, partial in ends + [(len(data), False)]:
        step: Json = {"end": end, "is_partial": partial}
        try:
            message = parser.parse(data[:end].decode("utf-8"), partial)
        except ChatParseError as exc:
            step["error"] = exc.message
            steps.append(step)
            continue
        step["message"] = message.to_dict()
        if not message.empty():
            set_tool_call_ids(message, ids, new_id)
            prev, previous = previous, message
            try:
                step["diffs"] = [d.to_dict() for d in compute_diffs(prev, message)]
            except ChatDiffError as exc:
                step["diffs_error"] = exc.message
        steps.append(step)
    out["steps"] = steps
    return out
