"""Compare llama-server's answer to a case with llamact's: equal, a named deviation, or different.

The order of the checks is the order of the pipeline, so the first difference reported is the
earliest cause: the prompt text, the prompt tokens, the generated tokens and raw text, the finish
reason, usage and timing counts, the final message, its JSON shape, the streamed message, and last
the chunk sequence.

With ``upstream_compat=True`` every difference is a difference. Otherwise docs/design.md's output-side
deviations may explain one, and the verdict names each that did:

* ``2-qwen-xml-validation``: the raw output has Qwen XML calls (``<function=``); llamact's calls are the
  server's valid ones (string parameters kept as strings), the ones it dropped fail the tools' schemas;
* ``3-double-braces``: the raw output has ``{{`` calls; llamact has the server's calls and more;
* ``4-reasoning-trim``: reasoning differs only in whitespace (after decoding escaped ``\\n`` / ``\\r``
  except for Qwen3-Coder);
* ``5-streaming``: the stream differs but llamact's stream reassembles to llamact's final message (named
  only when the final messages agree; otherwise their deviations are why the streams differ); on
  ``length`` llamact's calls are a prefix of the server's and its content a prefix of the server's
  content (the unfinished call withheld: a partial call, or the unread tail of the output that
  upstream's final parse gives as content);
* ``9-named-tool-choice``: a named ``tool_choice`` (llama-server runs it as "auto"): llamact's answer is
  a call of that function only, valid for its schema, with no content. Nothing else is compared (the
  prompts are, when the server answered; when its parser failed on the unconstrained output, there is
  no server prompt to compare). Or llamact refused the request with LlamaUnsupportedException naming
  the tool, where its template has no tool-call format to force (chat/named_tool.py);
* ``15-demanded-call-refused``: ``tool_choice`` "required" through a template without a tool-call
  format (the models' own SmolLM2 and Gemma 3 templates): llama-server answers text, the tools dropped;
  llamact refuses with LlamaUnsupportedException (engine/chat_calls.py ``refuse_uncallable``), in
  both modes, as the server route and the CLI do. Named only when the server's answer holds no call.
* ``19-required-calls``: a ``"required"`` tool choice, whose default grammar admits calls alone (llama-server's
  lets the model write content first): where the generated tokens differ, llamact's answer is calls of
  the tools, valid for their schemas, with no content (``tool_calls``), or a reply cut short by the
  limit, its unfinished call withheld (deviation 5). The prompts are compared first, as always;
* ``17-recovery``: llamact's final message carries the extension field ``llamact`` (calls recovered
  from outside the envelope or malformed, each valid for its tool's schema; or the final parse failed
  and the reply is what could be read) -- where llama-server's final parse failed (its 500), or where
  the final messages differ in content and calls.

A deviation never explains a difference in the prompt, the tokens, usage or timings: those come
before any output-side behaviour. Only deviations 9 and 19 change the grammar, so the tokens (never
the prompt): their cases are judged by what the answer must be instead.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import LlamaUnsupportedException
from ..json_types import Json
from .chat_answer import ChatAnswer
from .server_cases import OWN_TEMPLATE, E2ECase

QWEN_XML = "2-qwen-xml-validation"
DOUBLE_BRACES = "3-double-braces"
REASONING_TRIM = "4-reasoning-trim"
STREAMING = "5-streaming"
NAMED_TOOL_CHOICE = "9-named-tool-choice"
DEMANDED_CALL_REFUSED = "15-demanded-call-refused"
RECOVERY = "17-recovery"
REQUIRED_CALLS = "19-required-calls"
TIMING_COUNTS = ("prompt_n", "predicted_n", "cache_n")


@dataclass(frozen=True)
class Verdict:
    kind: str                          # "equal" | "deviation" | "different"
    deviations: tuple[str, ...] = ()
    difference: str | None = None      # the first difference, for "different"

    @classmethod
    def different(cls, difference: str) -> Verdict:
        return cls("different", difference=difference)

    def __str__(self) -> str:
        if self.kind == "deviation":
            return f"deviation({', '.join(self.deviations)})"
        return f"different: {self.difference}" if self.kind == "different" else "equal"


def _short(value: Json, limit: int = 160) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + "..."


def first_difference(path: str, server: Json, llamact: Json) -> str | None:
    """Where two JSON values first differ, as ``path: server=... llamact=...``; None when equal."""
    if isinstance(server, dict) and isinstance(llamact, dict):
        for key in list(server) + [k for k in llamact if k not in server]:
            if key not in server or key not in llamact:
                return f"{path}.{key}: server={_short(server.get(key, '<absent>'))} " \
                       f"llamact={_short(llamact.get(key, '<absent>'))}"
            found = first_difference(f"{path}.{key}", server[key], llamact[key])
            if found:
                return found
        return None
    if isinstance(server, list) and isinstance(llamact, list):
        for i, (a, b) in enumerate(zip(server, llamact, strict=False)):
            found = first_difference(f"{path}[{i}]", a, b)
            if found:
                return found
        if len(server) != len(llamact):
            i = min(len(server), len(llamact))
            return f"{path}: lengths {len(server)} != {len(llamact)}; from [{i}]: " \
                   f"server={_short(server[i:])} llamact={_short(llamact[i:])}"
        return None
    if server == llamact and type(server) is type(llamact):
        return None
    return f"{path}: server={_short(server)} llamact={_short(llamact)}"


# -- tool schemas (the cases' tools only use these keywords) ---------------------------------

_TYPES: dict[str, Callable[[Json], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "null": lambda v: v is None,
}


def _tool_schema(case: E2ECase, name: str) -> Json:
    for tool in case.tools or []:
        function = tool.get("function") or {}
        if function.get("name") == name:
            return function.get("parameters") or {}
    return None


def call_is_valid(case: E2ECase, call: Json) -> bool:
    """A call of a tool of the case, its arguments (a JSON string) an object that satisfies the
    tool's schema (types, enums, known and required properties)."""
    try:
        args = json.loads(call["arguments"])
    except ValueError:
        return False
    return arguments_are_valid(case, call["name"], args)


def arguments_are_valid(case: E2ECase, name: str, args: Json) -> bool:
    schema = _tool_schema(case, name)
    if schema is None or not isinstance(args, dict):
        return False
    properties = schema.get("properties") or {}
    if any(key not in properties for key in args) or any(key not in args for key in schema.get("required") or []):
        return False
    for key, value in args.items():
        prop = properties[key]
        check = _TYPES.get(prop.get("type", ""))
        if check is not None and not check(value):
            return False
        if "enum" in prop and value not in prop["enum"]:
            return False
    return True


def _typed_as_schema(case: E2ECase, call: Json) -> Json:
    """The call with string-typed parameters given as strings (llamact keeps "123" a string where
    upstream's XML parse reads it as the number 123)."""
    schema = _tool_schema(case, call["name"]) or {}
    try:
        args = json.loads(call["arguments"])
    except ValueError:
        return {"name": call["name"], "arguments": call["arguments"]}
    if isinstance(args, dict):
        for key, value in args.items():
            prop = (schema.get("properties") or {}).get(key) or {}
            if prop.get("type") == "string" and not isinstance(value, str):
                args[key] = json.dumps(value)
    return {"name": call["name"], "arguments": args}


def _calls(message: Json) -> list[Json]:
    return [{"name": c["name"], "arguments": c["arguments"]} for c in message["tool_calls"]]


def _parsed_calls(message: Json) -> list[Json]:
    out = []
    for c in _calls(message):
        try:
            out.append({"name": c["name"], "arguments": json.loads(c["arguments"])})
        except ValueError:
            out.append(c)
    return out


# -- deviations -------------------------------------------------------------------------------

def _explains_reasoning(case: E2ECase, server: str, llamact: str) -> bool:
    if case.template != "Qwen3-Coder":
        server = server.replace("\\n", "\n").replace("\\r", "\r")
    return re.sub(r"\s+", "", server) == re.sub(r"\s+", "", llamact) and llamact == llamact.strip()


def _explains_calls(case: E2ECase, s: ChatAnswer, ll: ChatAnswer) -> str | None:
    """The deviation that explains different tool calls / content in the final message, if any."""
    server_calls, llamact_calls = _calls(s.final), _calls(ll.final)
    if s.final_finish_reason == "length" and llamact_calls == server_calls[:len(llamact_calls)]:
        # the unfinished call withheld: a call upstream's final parse gave, or the tail of the output
        # it could not read and gave as content (llamact's last partial parse stands)
        s_content, l_content = s.final["content"], ll.final["content"]
        withheld = s_content[len(l_content):] if s_content.startswith(l_content) else None
        if (len(llamact_calls) < len(server_calls) and withheld == "") or (
                withheld and s.text.endswith(withheld)):
            return STREAMING
    if "<function=" in s.text:
        typed = [_typed_as_schema(case, c) for c in server_calls]
        expected = [c for c in typed if arguments_are_valid(case, c["name"], c["arguments"])]
        if expected == _parsed_calls(ll.final):
            return QWEN_XML
    if "{{" in s.text and len(llamact_calls) > len(server_calls):
        parsed_server, parsed_llamact = _parsed_calls(s.final), _parsed_calls(ll.final)
        if parsed_llamact[:len(parsed_server)] == parsed_server and all(
                _tool_schema(case, c["name"]) is not None for c in llamact_calls):
            return DOUBLE_BRACES
    if _recovered(case, ll):
        return RECOVERY
    return None


def _recovered(case: E2ECase, ll: ChatAnswer, failed: bool = False) -> bool:
    """llamact's final message carries deviation 17's report (``failed``: of a final parse that
    failed), and every call it has is valid for its tool."""
    report = ll.final_json.get("llamact") if isinstance(ll.final_json, dict) else None
    if not isinstance(report, dict) or (failed and not report.get("parse_error")):
        return False
    return all(call_is_valid(case, call) for call in ll.final["tool_calls"])


def _named_choice(case: E2ECase, ll: ChatAnswer) -> Verdict:
    name = case.tool_choice["function"]["name"]
    calls = ll.final["tool_calls"]
    if not calls:
        return Verdict.different(f"named tool choice {name!r}: llamact made no call ({ll.final_finish_reason})")
    for call in calls:
        if call["name"] != name or not call_is_valid(case, call):
            return Verdict.different(f"named tool choice {name!r}: llamact called {_short(call)}")
    if ll.final["content"]:
        return Verdict.different(f"named tool choice {name!r}: content before the call {_short(ll.final['content'])}")
    return Verdict("deviation", (NAMED_TOOL_CHOICE,))


def _required_calls(case: E2ECase, ll: ChatAnswer) -> Verdict:
    """Deviation 19: llamact's "required" answer is calls alone (or a reply cut short, its call withheld)."""
    calls, content = ll.final["tool_calls"], ll.final["content"]
    if ll.final_finish_reason == "length" and not calls and ll.text.startswith(content.lstrip()):
        return Verdict("deviation", (REQUIRED_CALLS,))   # cut inside a call: deviation 5 withholds it
    if ll.final_finish_reason != "tool_calls" or not calls:
        return Verdict.different(f'tool_choice "required": llamact made no call ({ll.final_finish_reason})')
    if content.strip():
        return Verdict.different(f'tool_choice "required": content beside the calls {_short(content)}')
    for call in calls:
        if not call_is_valid(case, call):
            return Verdict.different(f'tool_choice "required": llamact called {_short(call)}')
    return Verdict("deviation", (REQUIRED_CALLS,))


def _refuses_named_choice(case: E2ECase, failure: Exception | str) -> bool:
    """llamact refused to force the named call (its template has no tool-call format it can
    constrain: chat/named_tool.py), naming the tool."""
    return (isinstance(failure, LlamaUnsupportedException)
            and failure.details.get("tool_choice") == case.tool_choice["function"]["name"])


def _refuses_demanded_call(case: E2ECase, server: ChatAnswer, failure: ChatAnswer | Exception | str) -> bool:
    """llamact refused "required" through the model's own template, which has no tool-call format
    (SmolLM2's, Gemma 3's), where llama-server answered without a call (docs/design.md deviation 15)."""
    return (case.tool_choice == "required" and case.template == OWN_TEMPLATE
            and isinstance(server.message, dict) and not server.message.get("tool_calls")
            and isinstance(failure, LlamaUnsupportedException) and failure.details.get("tool_choice") == "required")


def compare(case: E2ECase, server: ChatAnswer | Exception | str, llamact: ChatAnswer | Exception | str,
            *, upstream_compat: bool = False) -> Verdict:
    """The verdict on llamact's answer to ``case`` against llama-server's (an exception or message
    stands for a side that failed: both failing is equal)."""
    if isinstance(server, ChatAnswer) and _refuses_demanded_call(case, server, llamact):   # (either mode)
        return Verdict("deviation", (DEMANDED_CALL_REFUSED,))
    if not isinstance(server, ChatAnswer) or not isinstance(llamact, ChatAnswer):
        if not upstream_compat and isinstance(llamact, ChatAnswer) and _recovered(case, llamact, failed=True):
            return Verdict("deviation", (RECOVERY,))   # llama-server's final parse failed; llamact answered
        if case.named_tool_choice and not upstream_compat:
            if isinstance(llamact, ChatAnswer):
                # the server ran the request as "auto" and its parser failed on the free output
                return _named_choice(case, llamact)
            if isinstance(server, ChatAnswer) and _refuses_named_choice(case, llamact):
                return Verdict("deviation", (NAMED_TOOL_CHOICE,))
        if not isinstance(server, ChatAnswer) and not isinstance(llamact, ChatAnswer):
            return Verdict("equal")
        failed, answered = ("server", "llamact") if not isinstance(server, ChatAnswer) else ("llamact", "server")
        message = server if failed == "server" else llamact
        return Verdict.different(f"only the {failed} failed ({str(message)[:200]}); the {answered} answered")
    for side, answer in (("server", server), ("llamact", llamact)):
        if answer.problems:
            return Verdict.different(f"the {side}'s answer is inconsistent: {answer.problems}")

    found = (first_difference("prompt", server.prompt, llamact.prompt)
             or first_difference("prompt_tokens", server.prompt_tokens, llamact.prompt_tokens))
    if found:
        return Verdict.different(found)
    if case.named_tool_choice and not upstream_compat:
        return _named_choice(case, llamact)
    if case.tool_choice == "required" and not upstream_compat and server.tokens != llamact.tokens:
        return _required_calls(case, llamact)
    found = (first_difference("tokens", server.tokens, llamact.tokens)
             or first_difference("text", server.text, llamact.text)
             or first_difference("usage", server.usage, llamact.usage)
             or first_difference("timings.keys", sorted(server.timings or {}), sorted(llamact.timings or {}))
             or first_difference("timings", {k: (server.timings or {}).get(k) for k in TIMING_COUNTS},
                                 {k: (llamact.timings or {}).get(k) for k in TIMING_COUNTS}))
    if found:
        return Verdict.different(found)

    deviations: list[str] = []

    def explained(name: str | None) -> bool:
        if upstream_compat or name is None:
            return False
        if name not in deviations:
            deviations.append(name)
        return True

    s_final, l_final = server.final, llamact.final
    if s_final["reasoning_content"] != l_final["reasoning_content"] and not explained(
            REASONING_TRIM if _explains_reasoning(case, s_final["reasoning_content"], l_final["reasoning_content"])
            else None):
        return Verdict.different(first_difference("final.reasoning_content", s_final["reasoning_content"],
                                                  l_final["reasoning_content"]) or "")
    calls_differ = (s_final["content"], _calls(s_final)) != (l_final["content"], _calls(l_final))
    calls_explained = calls_differ and explained(_explains_calls(case, server, llamact))
    if calls_differ and not calls_explained:
        return Verdict.different(first_difference("final.content", s_final["content"], l_final["content"])
                                 or first_difference("final.tool_calls", _calls(s_final), _calls(l_final)) or "")
    finishes = (server.finish_reason, server.final_finish_reason)
    if finishes != (llamact.finish_reason, llamact.final_finish_reason) and not (
            calls_explained and {server.final_finish_reason, llamact.final_finish_reason} <= {"stop", "tool_calls"}):
        return Verdict.different(f"finish_reason (stream, final): server={finishes} "
                                 f"llamact={(llamact.finish_reason, llamact.final_finish_reason)}")
    if not deviations:
        found = first_difference("final_json", server.final_json, llamact.final_json)
        if found:
            return Verdict.different(found)

    stream_differs = (server.message != llamact.message
                      or first_difference("chunks", server.chunks, llamact.chunks) is not None)
    if stream_differs:
        if upstream_compat or llamact.message != llamact.final:
            return Verdict.different(first_difference("message", server.message, llamact.message)
                                     or first_difference("chunks", server.chunks, llamact.chunks) or "")
        if not deviations:   # otherwise the final message's deviations are why the streams differ
            explained(STREAMING)
    return Verdict("deviation", tuple(deviations)) if deviations else Verdict("equal")
