"""Rendering a chat template as upstream's apply path does (``common_chat_template_direct_apply_impl``).

    TemplateInputs                 upstream's ``autoparser::generation_params``: what the format
                                   builders (specialized templates, autoparser) read
    direct_apply(tmpl, inputs, messages=None, tools=None, additional_context=None) -> str
    generation_prompt(tmpl, inputs, ...) -> str

The render context: ``messages`` (content normalised for the template's caps unless the caller
passes messages built for it), ``bos_token``, ``eos_token``, ``enable_thinking``, ``tools`` (only
when there are some), the extra context (``datetime``, ``date_string``, ``chat_template_kwargs``),
``add_generation_prompt`` only when true, and the variables upstream derives from
``preserve_reasoning`` / ``reasoning_effort``. A leading BOS / trailing EOS is stripped when the
model adds them itself. ``inputs.now`` fixes the clock for ``strftime_now`` and the date variables
(docs/design.md deviation 6; None: the wall clock).

Raises ``JinjaException`` (naming the template's origin) when the template fails.
"""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from typing import Any

from ..json_types import Json
from .messages import ChatMessage
from .oai import normalize_content
from .templates import ChatTemplate

__all__ = ["TemplateInputs", "direct_apply", "extra_context", "generation_prompt"]

# tool_choice values (upstream's common_chat_tool_choice)
TOOL_CHOICE_AUTO, TOOL_CHOICE_REQUIRED, TOOL_CHOICE_NONE = "auto", "required", "none"
# continue_final_message values (common_chat_continuation)
CONTINUATION_NONE, CONTINUATION_AUTO, CONTINUATION_REASONING, CONTINUATION_CONTENT = (
    "none", "auto", "reasoning_content", "content")
# reasoning formats (common_reasoning_format)
REASONING_FORMATS = ("none", "auto", "deepseek", "deepseek-legacy")


@dataclass
class TemplateInputs:
    """What the format builders read (upstream's ``autoparser::generation_params``).

    ``messages`` / ``tools`` are OpenAI JSON (``tools`` None when there are none); ``json_schema``
    is the response-format schema (None when absent); ``continue_msg`` is the message being
    continued (``continue_final_message`` already resolved from "auto").
    """

    messages: Json = field(default_factory=list)
    tools: Json = None
    tool_choice: str = TOOL_CHOICE_AUTO
    json_schema: Json = None
    parallel_tool_calls: bool = True
    reasoning_format: str = "auto"
    grammar: str = ""
    add_generation_prompt: bool = False
    continue_final_message: str = CONTINUATION_NONE
    continue_msg: ChatMessage = field(default_factory=ChatMessage)
    enable_thinking: bool = True
    now: float | None = None
    extra_context: dict[str, Json] = field(default_factory=dict)
    add_bos: bool = False
    add_eos: bool = False
    is_inference: bool = True

    def has_continuation(self) -> bool:
        return self.continue_final_message != CONTINUATION_NONE and not self.continue_msg.empty()

    @property
    def has_tools(self) -> bool:
        return isinstance(self.tools, list) and bool(self.tools)

    @property
    def has_response_format(self) -> bool:
        """A non-empty object schema (the test most builders make)."""
        return isinstance(self.json_schema, dict) and bool(self.json_schema)

    def copy(self, **changes: Any) -> TemplateInputs:
        return replace(self, **changes)

    def memo_key(self) -> str:
        """Every field but ``messages``, as JSON: what a parser built from these inputs may depend
        on (chat/parser_memo.py; code that reads ``messages`` is never memoised)."""
        fields = {name: getattr(self, name) for name in self.__dataclass_fields__ if name != "messages"}
        fields["continue_msg"] = self.continue_msg.to_dict()
        return json.dumps(fields, ensure_ascii=False, separators=(",", ":"), default=repr)


def extra_context(now: float | None, kwargs: dict[str, Json]) -> dict[str, Json]:
    """``common_chat_extra_context`` plus the template kwargs: ``datetime`` ("%b %d %Y") and
    ``date_string`` ("%d %b %Y") from ``now`` (the same clock as ``strftime_now``)."""
    instant = time.gmtime(time.time() if now is None else now)
    out: dict[str, Json] = {"datetime": time.strftime("%b %d %Y", instant),
                            "date_string": time.strftime("%d %b %Y", instant)}
    out.update(kwargs)
    return out


def direct_apply(tmpl: ChatTemplate, inputs: TemplateInputs, messages: Json = None, tools: Json = None,
                 additional_context: dict[str, Json] | None = None) -> str:
    """The prompt ``tmpl`` renders for ``inputs``; ``messages`` / ``tools`` / ``additional_context``
    replace what the inputs hold (a builder that rewrote them)."""
    if messages is None:
        messages = normalize_content(inputs.messages, tmpl.caps.supports_string_content,
                                     tmpl.caps.supports_typed_content)
    context: dict[str, Json] = {"messages": messages, "bos_token": tmpl.bos_token, "eos_token": tmpl.eos_token,
                                "enable_thinking": inputs.enable_thinking}
    if tools is not None or inputs.has_tools:
        context["tools"] = tools if tools is not None else inputs.tools
    context.update(inputs.extra_context)
    if additional_context:
        context.update(additional_context)
    if inputs.add_generation_prompt:
        context["add_generation_prompt"] = True
    derived: dict[str, Json] = {}
    preserve = context.get("preserve_reasoning")
    if isinstance(preserve, bool):
        derived.update(preserve_thinking=preserve, clear_thinking=not preserve,
                       truncate_history_thinking=not preserve, drop_thinking=not preserve)
    effort = context.get("reasoning_effort")
    if isinstance(effort, str) and effort:
        derived.update(reasoning_effort=effort, reasoning_strength=effort)
    if derived:
        context = {**derived, **context}  # upstream sets these first; the request's own values win
    result = _render(tmpl, context, inputs.now)
    if inputs.add_bos and tmpl.bos_token and result.startswith(tmpl.bos_token):
        result = result[len(tmpl.bos_token):]
    if inputs.add_eos and tmpl.eos_token and result.endswith(tmpl.eos_token):
        result = result[: -len(tmpl.eos_token)]
    return result


class _RenderMemo:
    """Recent renders by content: (template, context as JSON text, clock second) -> prompt.

    An apply renders the same context more than once (the prompt, then the generation prompt's two
    renders, one of which is the prompt again), and a repeated request renders nothing new. Bounded;
    keyed by content, so a hit is the same text a render would give (rendering is deterministic
    given the context and the clock, which is part of the key)."""

    def __init__(self, size: int = 64) -> None:
        self._size = size
        self._entries: OrderedDict[tuple[str, str, int], str] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str, int]) -> str | None:
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None:
                self._entries.move_to_end(key)
            return hit

    def put(self, key: tuple[str, str, int], value: str) -> None:
        with self._lock:
            self._entries[key] = value
            if len(self._entries) > self._size:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


_MEMO = _RenderMemo()


def clear_render_memo() -> None:
    """Forget every memoised render (benchmarks measuring cold applies)."""
    _MEMO.clear()


def _render(tmpl: ChatTemplate, context: dict[str, Json], now: float | None) -> str:
    try:
        text = json.dumps(context, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError):
        return tmpl.compiled.render(context, now=now)  # not plain JSON: render without the memo
    second = int(time.time() if now is None else now)
    key = (tmpl.compiled.source, text, second)
    hit = _MEMO.get(key)
    if hit is None:
        hit = tmpl.compiled.render(context, now=now)
        _MEMO.put(key, hit)
    return hit


def generation_prompt(tmpl: ChatTemplate, inputs: TemplateInputs, messages: Json = None, tools: Json = None,
                      additional_context: dict[str, Json] | None = None) -> str:
    """What the template appends for ``add_generation_prompt``: the render with it, minus the longest
    common prefix with the render without it (continuation off for both)."""
    base = inputs.copy(add_generation_prompt=False, continue_final_message=CONTINUATION_NONE)
    without = direct_apply(tmpl, base, messages, tools, additional_context)
    with_prompt = direct_apply(tmpl, base.copy(add_generation_prompt=True), messages, tools, additional_context)
    return with_prompt[common_prefix_length(without, with_prompt):]


def common_prefix_length(a: str, b: str) -> int:
    """The length of the longest common prefix, found by halving with slice comparisons (C speed;
    a character loop over a 10k-character prompt costs ~0.5 ms)."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo], a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    return lo
