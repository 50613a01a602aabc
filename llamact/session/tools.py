"""The tool loop: the model asks for tools, Python runs them, the model reads the results.

    result = session.send_with_tools("Weather in Paris?", tools=[get_weather])
    result.stop_reason, result.messages, result.pending_tool_calls, result.rolled_back

Each round is one request through the session (so the history is fitted into the context and the
template clock read anew): when the reply calls tools, each call is validated against its
function's signature and run, in the order the model wrote them, and one ``tool`` message per call
(keeping its ``tool_call_id``) joins the history; then the next round starts. ``tool_choice``
applies to the first round; later rounds use "auto".

Stop reasons:

- ``completed``: a reply without tool calls (the final answer, in the history).
- ``max_rounds``: the ``max_rounds``-th reply still called tools; they were not run and are in
  ``pending_tool_calls`` (the reply stays in the history: answer them with ``tool`` messages).
- ``unhandled_tool_calls``: the reply called a tool Python does not run (one given as an OpenAI
  tool dict, declared only) or one not among ``tools``; none of its calls were run (all are in
  ``pending_tool_calls``; the reply stays in the history, for the caller to answer).
- ``context_exceeded``: the next request did not fit the context, or generation filled it.
- ``truncated``: the reply hit ``max_tokens``.
- ``cancelled``: ``session.cancel()`` (or ``engine.cancel()`` during a generation).

``rolled_back`` is True when the last round's unfinished reply (truncated, cancelled or cut by
a full context) was removed from the history, so the history stays a valid conversation: it
ends with what came before that round. The rounds before it stay.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from ..engine.chat_types import ChatCompletion
from ..engine.params import GenerationParams
from ..errors import LlamaContextException
from .tool_functions import Tool, as_tool, tool_result_text

__all__ = ["Conversation", "LoopStopReason", "ToolCallRequest", "ToolLoopResult", "run_tool_loop"]


class Conversation(Protocol):
    """What the loop drives (a ``ChatSession``): a history it appends to, the default generation
    settings, a cancel flag, and ``send`` -- one request answering the history, its reply recorded."""

    history: list[dict[str, Any]]
    params: GenerationParams
    cancel_requested: bool

    def send(self, content: Any = None, **kwargs: Any) -> ChatCompletion: ...

LoopStopReason = Literal["completed", "max_rounds", "unhandled_tool_calls", "context_exceeded", "truncated",
                     "cancelled"]


@dataclass(frozen=True)
class ToolCallRequest:
    """One call the model asked for: ``name``, ``arguments`` (the model's JSON text), ``id`` (its
    ``tool_call_id``) and ``tool`` (the matching Tool, None when no tool has that name)."""

    name: str
    arguments: str
    id: str
    tool: Tool | None = None


@dataclass
class ToolLoopResult:
    """How ``ChatSession.send_with_tools()`` ended.

    Attributes:
        stop_reason: "completed" (the model answered in text), "max_rounds", "unhandled_tool_calls"
            (a call of a tool given as an OpenAI dict, which the caller runs), "context_exceeded",
            "truncated" (a reply hit ``max_tokens``) or "cancelled" (``session.cancel()``).
        messages: the history messages this call added: the user message, each reply and tool result.
        pending_tool_calls: the calls the model made that were not run (at ``max_rounds``, or for the
            caller to run).
        rolled_back: the last round's unfinished reply (truncated, cancelled or cut by a full context)
            was removed from the history, so the history stays a valid conversation.
        rounds: how many requests the loop made.
        completion: the last reply (a ``ChatCompletion``).
    """

    stop_reason: LoopStopReason
    messages: list[dict[str, Any]]
    pending_tool_calls: list[ToolCallRequest] = field(default_factory=list)
    rolled_back: bool = False
    rounds: int = 0
    completion: Any = None

    @property
    def content(self) -> str:
        """The final reply's text ("" when the loop did not complete)."""
        return self.completion.content if self.completion is not None and self.stop_reason == "completed" else ""


OnToolCall = Callable[[ToolCallRequest], Any]
OnToolError = Callable[[ToolCallRequest, BaseException], Any]


def _calls(message: dict[str, Any], table: dict[str, Tool]) -> list[ToolCallRequest]:
    out = []
    for call in message.get("tool_calls") or []:
        fn = call.get("function", {})
        name = fn.get("name", "")
        out.append(ToolCallRequest(name, fn.get("arguments", ""), call.get("id", ""), table.get(name)))
    return out


def _run_call(call: ToolCallRequest, on_tool_call: OnToolCall | None,
              on_tool_error: OnToolError | Literal["raise"] | None) -> str:
    assert call.tool is not None
    try:
        override = on_tool_call(call) if on_tool_call is not None else None
        value = override if override is not None else call.tool.invoke(call.arguments)
    except Exception as exc:
        if on_tool_error == "raise":
            raise
        if on_tool_error is not None:
            return tool_result_text(on_tool_error(call, exc))
        return f"Error: {type(exc).__name__}: {exc}"
    return tool_result_text(value)


def run_tool_loop(session: Conversation, content: Any,
                  tools: Sequence[Tool | Callable[..., Any] | Mapping[str, Any]], *,
                  max_rounds: int = 5, tool_choice: Any = "auto", on_tool_call: OnToolCall | None = None,
                  on_tool_error: OnToolError | Literal["raise"] | None = None,
                  params: GenerationParams | None = None, **options: Any) -> ToolLoopResult:
    """Run the loop (module doc) for ``content`` (None: answer the history as it stands).

    ``tools``: Python functions (sync or async), ``Tool`` values, or OpenAI tool dicts for tools the
    caller runs itself. ``on_tool_call(call)`` receives
    each ``ToolCallRequest`` before its tool runs; returning anything but None uses that value as
    the tool's result instead of running it (to confirm, deny or mock calls); an exception it raises
    is handled like the tool's own. ``on_tool_error`` says
    what happens when the arguments fail validation (``json.JSONDecodeError`` /
    ``pydantic.ValidationError``) or the tool raises: None (default) returns ``"Error: <type>:
    <message>"`` to the model as the tool's result; ``"raise"`` re-raises the exception after
    rolling the round back; a function ``on_tool_error(call, exception)`` returns the result the
    model reads (or raises, which also rolls the round back). Other keywords go to each request.
    """
    if max_rounds < 1:
        raise ValueError("max_rounds must be at least 1")
    table = {t.name: t for t in map(as_tool, tools)}
    specs = [t.spec for t in table.values()]
    params = params or session.params
    session.cancel_requested = False
    start = len(session.history)
    if content is not None:
        session.history.append({"role": "user", "content": content if isinstance(content, str) else list(content)})

    def result(reason: LoopStopReason, rounds: int, **kw: Any) -> ToolLoopResult:
        return ToolLoopResult(reason, [dict(m) for m in session.history[start:]], rounds=rounds, **kw)

    choice = tool_choice
    completion = None
    for round_no in range(1, max_rounds + 1):
        if session.cancel_requested:
            return result("cancelled", round_no - 1, completion=completion)
        mark = len(session.history)
        try:
            completion = session.send(None, tools=specs, tool_choice=choice, params=params, **options)
        except LlamaContextException:
            return result("context_exceeded", round_no - 1, completion=completion)
        choice = "auto"
        reason: LoopStopReason | None = None
        if completion.finish_reason == "cancelled" or session.cancel_requested:
            reason = "cancelled"
        elif completion.finish_reason == "length":
            hit_max = 0 < params.max_tokens <= completion.usage.completion_tokens
            reason = "truncated" if hit_max else "context_exceeded"
        if reason is not None:
            rolled = len(session.history) > mark
            del session.history[mark:]
            return result(reason, round_no, rolled_back=rolled, completion=completion)
        calls = _calls(session.history[-1], table)
        if not calls:
            return result("completed", round_no, completion=completion)
        if any(c.tool is None or c.tool.function is None for c in calls):
            return result("unhandled_tool_calls", round_no, pending_tool_calls=calls, completion=completion)
        if round_no == max_rounds:
            return result("max_rounds", round_no, pending_tool_calls=calls, completion=completion)
        try:
            for call in calls:
                text = _run_call(call, on_tool_call, on_tool_error)
                session.history.append({"role": "tool", "tool_call_id": call.id, "name": call.name, "content": text})
        except BaseException:
            del session.history[mark:]
            raise
    raise AssertionError("unreachable: the last round returns")  # pragma: no cover
