"""``ChatRequest``: one chat completion request, typed and checked once.

    request = ChatRequest(messages, tools=tools, tool_choice="auto", response_format=..., ...)
    request.inputs                  -> ChatTemplateInputs (upstream's common_chat_templates_inputs)
    as_chat_request(messages_or_request, options) -> ChatRequest     (the keyword APIs' one door)

Every entry point that answers a chat request takes one: ``LlamaEngine.create`` / ``chat_template`` /
``complete_chat`` / ``create_structured``, the batch scheduler's slots, ``ChatSession`` and the
server (which reads an HTTP body into one, ``llamact.server.chat.wire``). The keyword forms
(``engine.create(messages, tools=...)``) are conveniences that build one here.

What enters: OpenAI-style messages and tools (dicts, or ``ChatMessage`` / ``ChatTool`` values) and
the request's options, as llama-server reads them (``oaicompat_chat_params_parse``,
tools/server/server-common.cpp): ``response_format`` (text / json_object / json_schema, or a bare
schema; an empty schema means any object), ``reasoning_effort`` ("none" turns thinking off, anything
else reaches the template as ``reasoning_effort``), ``chat_template_kwargs["enable_thinking"]``
overriding ``enable_thinking``, ``preserve_reasoning`` (templates that can keep earlier thoughts).
``add_generation_prompt`` defaults to true, or false when continuing the last message. ``tool_choice``
may also name a function, OpenAI's ``{"type": "function", "function": {"name": ...}}``: llamact then
forces an immediate call of it (docs/design.md, deviation 9; llama-server would read it as "auto"); a
``"required"`` choice is answered with calls alone (deviation 19; upstream's grammar lets content come
first) unless ``upstream_compat``.
``grammar`` is the one channel for a user's GBNF grammar in a chat request. Images and audio are
content parts (``image_url``, ``input_audio``): they become marker parts and ``media`` (``chat.media``).

What leaves: a frozen value whose messages and tools are parsed (copies: nothing the caller passed
is kept or modified) and whose ``inputs`` are the apply pipeline's. Raises ``ChatRequestError``
(a ``LlamaRequestException``, upstream's reasons where upstream has one) and
``LlamaUnsupportedException`` for a ``response_format`` shape that is not recognised (deviation 8).
"""

from __future__ import annotations

import copy
import difflib
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field, fields, replace
from typing import Any

from ..grammar.response_format import parse_response_format
from ..json_types import Json
from .apply import ChatTemplateInputs
from .deviations.named_tool import require_tool
from .media import RENDER_MARKER, MediaRef, extract_media
from .messages import ChatMessage
from .oai import ChatRequestError, ChatTool, parse_messages, parse_tool_choice, parse_tools
from .render import CONTINUATION_NONE

__all__ = ["ChatRequest", "MAX_THINKING_BUDGET", "as_chat_request", "chat_inputs", "chat_template_request",
           "request_options", "thinking_budget"]

MAX_THINKING_BUDGET = 2**31 - 1   # upstream's INT_MAX: what -1 ("no limit") becomes in the sampler


def thinking_budget(value: Json) -> int:
    """``thinking_budget_tokens`` as the sampler takes it: -1 (None) for no limit, else 0 to INT_MAX."""
    budget = -1 if value is None else value
    if isinstance(budget, bool) or not isinstance(budget, int) or not -1 <= budget <= MAX_THINKING_BUDGET:
        raise ChatRequestError(
            f"thinking_budget_tokens must be -1 (no limit) or an integer in [0, {MAX_THINKING_BUDGET}], "
            f"got {budget!r}", {"thinking_budget_tokens": repr(budget)})
    return budget


def _continuation(value: Json) -> str:
    if value is True:
        return "auto"
    if value in (False, None):
        return "none"
    if value in ("content", "reasoning_content", "auto", "none"):
        return str(value)
    raise ChatRequestError(f'continue_final_message must be a bool, "content" or "reasoning_content", got {value!r}')


def _tool_choice(value: Json, tools: Sequence[ChatTool]) -> tuple[str, str | None]:
    """(upstream's tool choice, the named function or None). A named choice reads as "required"
    plus the name (deviation 9); the name must be one of the tools."""
    if isinstance(value, str):
        return parse_tool_choice(value), None
    function = value.get("function") if isinstance(value, Mapping) else None
    name = function.get("name") if isinstance(function, Mapping) else None
    if not isinstance(value, Mapping) or value.get("type") != "function" or not isinstance(name, str):
        raise ChatRequestError('tool_choice must be "auto", "required", "none" or {"type": "function", '
                               f'"function": {{"name": ...}}}}, got {value!r:.200}')
    require_tool(name, tools)
    return "required", name


def _optional_bool(value: Json, name: str) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    raise ChatRequestError(f"{name} must be true, false or None, got {value!r:.100}", {name: repr(value)})


@dataclass(frozen=True)
class ChatRequest:
    """A chat completion request, typed and checked once, with llama-server's checks and messages.
    Build it with the messages and any options; ``dataclasses.replace(request, ...)`` makes a changed
    copy, checked again. ``LlamaEngine.create()``, ``chat_template()``, ``complete_chat()``,
    ``create_structured()``, ``ChatSession`` and the server all take one, or its fields as keywords.

    Attributes:
        messages: OpenAI-style messages (dicts or ``ChatMessage``); content may be text or parts
            (``text``, ``image_url``, ``input_audio``).
        tools: OpenAI tool dicts (``{"type": "function", "function": {...}}``) or ``ChatTool`` values.
        tool_choice: "auto", "required", "none", or ``{"type": "function", "function": {"name": N}}``,
            which forces an immediate call of N (deviation 9).
        parallel_tool_calls: let the model make several calls in one reply.
        response_format: OpenAI's ``{"type": "json_object"}`` or ``{"type": "json_schema",
            "json_schema": {"schema": ...}}``, or a bare schema; constrains the reply.
        grammar: a GBNF grammar for the reply (not with tools or a response_format).
        enable_thinking: let a thinking template think (templates that have the switch).
        reasoning_format: "deepseek" (default) extracts thoughts into ``reasoning_content``; "none"
            leaves them in the content.
        reasoning_effort: "none" turns thinking off; another value reaches the template as
            ``reasoning_effort``.
        preserve_reasoning: keep earlier turns' thoughts in the prompt, for templates that can.
        chat_template_kwargs: extra variables for the template; its ``enable_thinking`` wins over
            the field.
        add_generation_prompt: end the prompt with the assistant's turn opening; None: true, or false
            when continuing the last message.
        continue_final_message: continue the last message instead of answering it (True, "content" or
            "reasoning_content").
        force_pure_content: read the whole output as content (llama-server's ``--force-pure-content``).
        custom_template: Jinja source for this request only (wins over ``ModelParams.chat_template``).
        template_now: the template's clock, epoch seconds; None: the wall clock (deviation 6).
        upstream_compat: exactly llama-server's answer (deviations 2-5 and 17 off).
        thinking_budget_tokens: end a thought after this many tokens; None or -1: no limit.
        reasoning_budget_message: text said before the forced end of a thought.
        logprobs: record each token's logprob; None: ``GenerationParams.logprobs`` decides.
        top_logprobs: alternatives per logprob entry; None: ``GenerationParams.top_logprobs``.
        media: the media of marker parts already in ``messages`` (what a copy made by ``replace()``
            carries); applications pass media as content parts instead.

    Raises:
        LlamaRequestException: a malformed request, with llama-server's reason where it has one (a
            message without a role, an unknown tool choice, a tool choice naming no tool, ...).
        LlamaUnsupportedException: a ``response_format`` shape that is not recognised (deviation 8).

    Example:
        ```python
        from llamact import ChatRequest

        request = ChatRequest([{"role": "user", "content": "Weather in Paris?"}], tools=[weather],
                              tool_choice="required")
        reply = engine.complete_chat(request)
        ```
    """

    messages: Sequence[Any] = ()
    _: KW_ONLY
    tools: Sequence[Any] | None = None
    tool_choice: str | Mapping[str, Any] = "auto"
    parallel_tool_calls: bool = False
    response_format: Any = None
    grammar: str | None = None              # a GBNF grammar for the reply (not with tools or a response_format)
    enable_thinking: bool = True
    reasoning_format: str = "deepseek"
    reasoning_effort: str | None = None
    preserve_reasoning: bool | None = None
    chat_template_kwargs: Mapping[str, Any] | None = None
    add_generation_prompt: bool | None = None
    continue_final_message: bool | str | None = False
    force_pure_content: bool = False        # the whole output is content (llama-server's --force-pure-content)
    custom_template: str | None = None      # Jinja source for this request only (wins over ModelParams.chat_template)
    template_now: float | None = None       # the template's clock, epoch seconds (None: the wall clock)
    upstream_compat: bool = False           # llama-server's deltas, errors, grammars (deviations 2-5, 17, 19 off)
    lenient_schema: bool = False            # a schema keyword the grammar cannot hold is ignored, as llama-server
                                            # does (the server's --lenient-schemas; deviation 8 off)
    thinking_budget_tokens: int | None = None   # None or -1: unlimited
    reasoning_budget_message: str = ""      # said before the forced end of a thought (llama-server's field)
    logprobs: bool | None = None            # None: GenerationParams.logprobs decides
    top_logprobs: int | None = None
    # the media of marker parts already in `messages` (what a copy made by replace() carries); the
    # media parts of `messages` (image_url, input_audio) are read into markers and added after these
    media: Sequence[MediaRef] = ()
    # derived once, from the fields above
    inputs: ChatTemplateInputs = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        raw, found = extract_media(self.messages)
        messages = tuple(parse_messages(raw))
        media = (*self.media, *found)
        n_markers = sum(p.type == "media_marker" and p.text == RENDER_MARKER for m in messages for p in m.content_parts)
        if n_markers != len(media) or not all(isinstance(m, MediaRef) for m in media):
            raise ChatRequestError(f"the messages hold {n_markers} media markers for {len(media)} media: pass media "
                                   "as image_url / input_audio parts", {"markers": n_markers, "media": len(media)})
        tools = tuple(parse_tools(self.tools))
        set_ = object.__setattr__   # frozen: the parsed copies replace what the caller passed
        set_(self, "messages", messages)
        set_(self, "media", media)
        set_(self, "tools", tools)
        for name in ("tool_choice", "response_format", "chat_template_kwargs"):
            set_(self, name, copy.deepcopy(getattr(self, name)))
        set_(self, "inputs", self._template_inputs(messages, tools))
        self._check_generation_options()

    def _template_inputs(self, messages: tuple[ChatMessage, ...], tools: tuple[ChatTool, ...]) -> ChatTemplateInputs:
        choice, named_tool = _tool_choice(self.tool_choice, tools)
        if choice == "required" and not tools:
            raise ChatRequestError('tool_choice "required" needs at least one tool')

        schema = None
        if self.response_format is not None:
            resolved = parse_response_format(self.response_format)
            schema = dict(resolved.schema) if resolved.schema is not None else None
            if schema == {}:
                schema = {"type": "object"}  # an empty schema means any object, as the server reads it
        grammar = self.grammar
        if grammar is not None and not isinstance(grammar, str):
            raise ChatRequestError(f"grammar must be a GBNF string, got {type(grammar).__name__}")
        if schema is not None and grammar:
            raise ChatRequestError("Cannot use both json_schema and grammar")
        if tools and choice != "none" and grammar:
            raise ChatRequestError("Cannot use custom grammar constraints with tools.")

        continuation = _continuation(self.continue_final_message)
        add_generation_prompt = _optional_bool(self.add_generation_prompt, "add_generation_prompt")
        if add_generation_prompt is None:
            add_generation_prompt = continuation == CONTINUATION_NONE
        elif continuation != CONTINUATION_NONE and add_generation_prompt:
            raise ChatRequestError("Cannot set both add_generation_prompt and continue_final_message to true.")
        if continuation != CONTINUATION_NONE and messages and messages[-1].role == "assistant" \
                and messages[-1].tool_calls:
            raise ChatRequestError("Cannot continue an assistant message that contains tool calls.")

        kwargs_in = self.chat_template_kwargs
        if kwargs_in is not None and not isinstance(kwargs_in, Mapping):
            raise ChatRequestError(f"chat_template_kwargs must be a mapping of names to JSON values, got "
                                   f"{type(kwargs_in).__name__}")
        kwargs: dict[str, Json] = dict(kwargs_in or {})
        enable_thinking = self.enable_thinking
        thinking_kwarg = kwargs.get("enable_thinking")
        if isinstance(thinking_kwarg, bool):
            enable_thinking = thinking_kwarg
        elif isinstance(thinking_kwarg, str):
            raise ChatRequestError('invalid type for "enable_thinking" (expected boolean, got string)')
        effort = self.reasoning_effort
        if effort is not None:
            if effort == "none":
                enable_thinking = False
                kwargs.pop("reasoning_effort", None)
            elif effort:
                kwargs["reasoning_effort"] = effort
        if self.preserve_reasoning is not None:
            kwargs["preserve_reasoning"] = bool(self.preserve_reasoning)

        return ChatTemplateInputs(
            messages=messages, tools=tools, tool_choice=choice, parallel_tool_calls=bool(self.parallel_tool_calls),
            reasoning_format=self.reasoning_format, enable_thinking=bool(enable_thinking),
            add_generation_prompt=add_generation_prompt, json_schema=schema, grammar=grammar or "",
            chat_template_kwargs=kwargs, continue_final_message=continuation,
            force_pure_content=bool(self.force_pure_content), now=self.template_now, named_tool=named_tool,
            required_calls_only=choice == "required" and named_tool is None and not self.upstream_compat)

    def _check_generation_options(self) -> None:
        if self.custom_template is not None and not isinstance(self.custom_template, str):
            raise ChatRequestError(f"custom_template must be Jinja source (a string), got "
                                   f"{type(self.custom_template).__name__}")
        thinking_budget(self.thinking_budget_tokens)
        if not isinstance(self.reasoning_budget_message, str):
            raise ChatRequestError("reasoning_budget_message must be a string")
        _optional_bool(self.logprobs, "logprobs")
        if self.top_logprobs is not None:
            if isinstance(self.top_logprobs, bool) or not isinstance(self.top_logprobs, int):
                raise ChatRequestError(f"top_logprobs must be an integer, got {self.top_logprobs!r:.100}")
            if self.logprobs is False:
                raise ChatRequestError("top_logprobs requires logprobs to be set to true",
                                       {"top_logprobs": self.top_logprobs})

    # -- what the stages after the template read ---------------------------------------------------

    @property
    def is_continuation(self) -> bool:
        """The reply continues the last message (``continue_final_message``)."""
        return self.inputs.continue_final_message != CONTINUATION_NONE

    @property
    def named_tool(self) -> str | None:
        """The function a named ``tool_choice`` forces (deviation 9), or None."""
        return self.inputs.named_tool

    def options(self) -> dict[str, Any]:
        """The fields other than ``messages``, as keywords (what ``as_chat_request`` takes)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.init and f.name != "messages"}


_OPTIONS = frozenset(f.name for f in fields(ChatRequest) if f.init and f.name != "messages")
REQUEST_OPTIONS = _OPTIONS   # the keyword names a chat request takes


def request_options(options: Mapping[str, Any], where: str = "a chat request") -> dict[str, Any]:
    """``options`` checked to be ``ChatRequest`` fields (a misspelt keyword is refused by name)."""
    unknown = [name for name in options if name not in _OPTIONS]
    if unknown:
        name = unknown[0]
        close = difflib.get_close_matches(name, sorted(_OPTIONS), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else f" (ChatRequest's options: {', '.join(sorted(_OPTIONS))})"
        raise ChatRequestError(f"{name!r} is not an option of {where}{hint}", {"option": name})
    return dict(options)


def as_chat_request(messages: Any, options: Mapping[str, Any]) -> ChatRequest:
    """The one door of the keyword APIs: ``messages`` is a ``ChatRequest`` (changed by ``options``,
    if any) or the messages of a new one built with ``options``."""
    if isinstance(messages, ChatRequest):
        return replace(messages, **request_options(options)) if options else messages
    return ChatRequest(messages, **request_options(options))


def chat_template_request(messages: Any, options: Mapping[str, Any]) -> ChatRequest:
    """``as_chat_request`` for ``chat_template(...)``, which still accepts the deprecated ``json_schema``
    shortcut (the specification's ``chatTemplate(..., jsonSchema: ...)``): a schema for the reply,
    read as ``response_format={"type": "json_schema", "json_schema": {"schema": ...}}``, with a
    ``DeprecationWarning``. When a ``response_format`` is passed too (or the request has one), the
    ``response_format`` wins."""
    if "json_schema" not in options:
        return as_chat_request(messages, options)
    rest = dict(options)
    schema = rest.pop("json_schema")
    warnings.warn("chat_template(json_schema=...) is deprecated: pass response_format={'type': 'json_schema', "
                  "'json_schema': {'schema': ...}}", DeprecationWarning, stacklevel=3)
    has_format = rest.get("response_format") is not None or (
        isinstance(messages, ChatRequest) and "response_format" not in rest and messages.response_format is not None)
    if schema is not None and not has_format:
        rest["response_format"] = {"type": "json_schema", "json_schema": {"schema": schema}}
    return as_chat_request(messages, rest)


def chat_inputs(messages: Json, **options: Any) -> ChatTemplateInputs:
    """The request as the apply pipeline's inputs: ``ChatRequest(messages, **options).inputs``."""
    return as_chat_request(messages, options).inputs
