"""The conversations the analysis renders (upstream's fixtures, chat-diff-analyzer.cpp).

Every probe renders the template twice with one thing changed and reads the difference, so the
fixture texts are distinctive words that cannot occur in a template by accident. Messages and
tool calls are plain JSON in upstream's key order (a template iterating a dict sees that order);
tool-call arguments are JSON objects, as upstream passes them. Functions return fresh values, so a
caller may change what it gets.
"""

from __future__ import annotations

from ...json_types import Json

__all__ = [
    "ARG_FIRST", "ARG_SECOND", "ASSISTANT_MSG", "CALL_ID_001", "CALL_ID_002", "CALL_ID_999", "FUN_FIRST",
    "FUN_SECOND", "THINKING_CONTENT", "USER_MSG", "USER_MSG_TWO", "assistant", "first_tool_call", "second_tool_call",
    "tool_call", "tools", "user",
]

FUN_FIRST = "FFF_FIRST_FUN_F"
FUN_SECOND = "SSS_SECOND_FUN_S"
ARG_FIRST = "AA_ARG_FST_AA"
ARG_SECOND = "BB_ARG_SND_BB"
USER_MSG = "U_USER_MSG Hello END_U"
USER_MSG_TWO = "V_USER_MSG Hello END_V"
ASSISTANT_MSG = "A_ASST_MSG I can help END_A"
THINKING_CONTENT = "REASON_PART I am thinking END_R"
CALL_ID_001 = "call00001"
CALL_ID_002 = "call00002"
CALL_ID_999 = "call99999"


def tools() -> list[Json]:
    """Two functions taking the same two optional string arguments."""
    def function(name: str, description: str) -> Json:
        params = {
            "type": "object",
            "properties": {ARG_FIRST: {"type": "string", "description": "First argument"},
                           ARG_SECOND: {"type": "string", "description": "Second argument"}},
            "required": [],
        }
        return {"type": "function", "function": {"name": name, "description": description, "parameters": params}}
    return [function(FUN_FIRST, "Test function foo"), function(FUN_SECOND, "Test function bar")]


def tool_call(name: str, arguments: Json, call_id: str = CALL_ID_001) -> Json:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def first_tool_call(arguments: Json = None, call_id: str = CALL_ID_001) -> Json:
    """FUN_FIRST with both arguments (``XXXX``, ``YYYY``) unless others are given."""
    return tool_call(FUN_FIRST, {ARG_FIRST: "XXXX", ARG_SECOND: "YYYY"} if arguments is None else arguments, call_id)


def second_tool_call() -> Json:
    return tool_call(FUN_SECOND, {ARG_FIRST: "XXXX", ARG_SECOND: "YYYY"}, CALL_ID_002)


def user(content: str = USER_MSG) -> Json:
    return {"role": "user", "content": content}


def assistant(content: str | None = ASSISTANT_MSG, *, reasoning: str | None = None,
              calls: list[Json] | None = None) -> Json:
    """An assistant message: ``content`` (None is JSON null), then ``reasoning_content`` and
    ``tool_calls`` when given, in that key order (upstream's order for every fixture it uses)."""
    msg: Json = {"role": "assistant", "content": content}
    if reasoning is not None:
        msg["reasoning_content"] = reasoning
    if calls is not None:
        msg["tool_calls"] = calls
    return msg
