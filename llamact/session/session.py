"""A conversation that remembers and fits the context: ``ChatSession``.

    session = ChatSession(engine, system_prompt="Be brief.")
    for chunk in session.create("Hello"):     # streams; the reply joins the history at the end
        ...
    reply = session.send("And then?")          # the same, collected (a ChatCompletion)

The history is a list of OpenAI-style message dicts (JSON-serialisable as is); the system prompt is
kept apart and always sent first. Before each request the history is fitted into the context by
rendered-template token count (``llamact.session.trimming``): the oldest turns are left out of the
request -- never half a tool exchange, never the system prompt -- but stay in ``history``.
``TemplateTimeChatSession`` fixes the template's clock (``template_now``) for reproducible prompts.
The tool loop (``send_with_tools``) lives in ``llamact.session.tools``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..chat.messages import ChatMessage
from ..chat.oai import message_to_json
from ..chat.request import ChatRequest
from ..chat.request import request_options as checked_options
from ..engine.chat_completion import ChatStream
from ..engine.chat_types import ChatChunk, ChatCompletion
from ..engine.engine import LlamaEngine
from ..engine.litert_engine import LitertEngine
from ..engine.params import CHAT_REQUEST_OWNED, GenerationParams, split_sampling_keywords, with_sampling_keywords
from ..errors import LlamaContextException, LlamaRequestException, LlamaStateException
from ..json_types import Json
from .persistence import SavedSession, load_session, save_session
from .tools import ToolLoopResult, run_tool_loop
from .trimming import Fit, fit_history

__all__ = ["ChatSession", "SessionStream", "TemplateTimeChatSession"]


def _as_dict(message: Mapping[str, Any] | ChatMessage) -> dict[str, Any]:
    if isinstance(message, ChatMessage):
        return dict(message_to_json(message))
    if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
        raise LlamaRequestException(f"a message must be a dict with a string 'role', got {message!r}")
    return dict(message)


class SessionStream:
    """The chunks of one session request (a ``ChatStream``); when the stream reaches its final chunk
    the assistant turn (content, thinking, tool calls) joins the session's history. A stream closed
    before its end adds nothing. ``completion()`` runs it to the end."""

    def __init__(self, session: ChatSession, stream: ChatStream, continuing: bool) -> None:
        self.session = session
        self.stream = stream
        self._continuing = continuing
        self._chunks = self._run()

    def __iter__(self) -> Iterator[ChatChunk]:
        return self._chunks

    def __next__(self) -> ChatChunk:
        return next(self._chunks)

    def _run(self) -> Iterator[ChatChunk]:
        with self.stream:
            for chunk in self.stream:
                if chunk.finish_reason is not None:
                    self.session._record_reply(self.stream.message, self._continuing)
                yield chunk

    def close(self) -> None:
        self._chunks.close()  # type: ignore[attr-defined]
        self.stream.close()

    def __enter__(self) -> SessionStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def completion(self) -> ChatCompletion:
        for _ in self._chunks:
            pass
        return self.stream.completion()


class ChatSession:
    """A conversation with ``engine``: ``history`` (message dicts, without the system prompt),
    ``create``/``send`` to talk, ``add_message`` to append any message, ``reset`` to start over.

    Requests are fitted into ``max_context_tokens`` (default: the context size) minus the reply's
    reserve (``params.max_tokens`` when positive): the rendered prompt -- system prompt, the kept
    history and the tools -- is counted in tokens, and the oldest turns are left out of the request
    by binary search over the places where a user message starts. ``last_request_fit_context`` says
    whether the last request fit (False: it was refused with LlamaContextException), and
    ``last_request_dropped`` how many of the oldest history messages it left out. The session's state
    is plain data: ``system_prompt``, ``history`` and the request options.

    Args:
        engine: the model to talk to (a ``LlamaEngine`` or a ``LitertEngine``).
        system_prompt: the system message, kept in every request; None: none.
        max_context_tokens: the tokens a request may take, reply reserve included; None: the context size.
        params: sampling and stopping for every request; None: ``GenerationParams()``'s defaults.
        **request_options: ``ChatRequest`` fields passed to every ``engine.create`` call
            (``custom_template``, ``chat_template_kwargs``, ``enable_thinking``, ``reasoning_format``,
            ...); per-call keywords win.

    Raises:
        LlamaRequestException: an option that is not a ``ChatRequest`` field.

    Example:
        ```python
        session = ChatSession(engine, "You are terse.")
        print(session.send("Name a prime number.").content)
        print(session.send("And the next one?").content)   # the history goes with it
        ```
    """

    def __init__(self, engine: LlamaEngine | LitertEngine, system_prompt: str | None = None, *,
                 max_context_tokens: int | None = None, params: GenerationParams | None = None,
                 **request_options: Any) -> None:
        self.engine = engine
        self.system_prompt = system_prompt
        self.max_context_tokens = max_context_tokens
        self.params = params or GenerationParams()
        self.request_options = checked_options(request_options, "a ChatSession")
        self.cancel_requested = False   # set by cancel(); the tool loop clears it when it starts
        self.history: list[dict[str, Any]] = []
        self.last_request_fit_context: bool | None = None
        self.last_request_dropped = 0
        self.last_request_tokens = 0

    # -- the history -----------------------------------------------------------------------------

    def add_message(self, message: Mapping[str, Any] | ChatMessage) -> None:
        """Append a message (an OpenAI-style dict or a ``ChatMessage``) to the history as is."""
        self.history.append(_as_dict(message))

    def reset(self) -> None:
        """Forget the history (the system prompt, options and template clock stay)."""
        self.history.clear()
        self.last_request_fit_context = None
        self.last_request_dropped = 0
        self.last_request_tokens = 0

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The whole conversation as sent when nothing is trimmed: system prompt, then history."""
        head = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        return head + [dict(m) for m in self.history]

    def template_clock(self) -> float | None:
        """The template clock of the next request, epoch seconds (None: the wall clock)."""
        return None

    # -- requests --------------------------------------------------------------------------------

    def create(self, content: str | Sequence[Json] | None = None, *, role: str = "user",
               continue_previous_turn: bool = False, tools: Any = None, tool_choice: Any = "auto",
               params: GenerationParams | None = None, **options: Any) -> SessionStream:
        """Append ``content`` as a ``role`` message and stream the reply; the reply joins the history
        when the stream ends (a stream closed before its end adds nothing).

        Args:
            content: text, or OpenAI content parts (text, images, audio); None: answer the history as
                it stands.
            role: the new message's role.
            continue_previous_turn: continue the last assistant message instead (``content`` must be
                None): its text is extended in place.
            tools: OpenAI tool dicts for this request.
            tool_choice: as for ``LlamaEngine.create()``.
            params: sampling and stopping for this request; None: the session's.
            **options: ``ChatRequest`` fields for this request (over the session's), and
                ``GenerationParams`` fields (``temperature``, ``max_tokens``, ...), set over ``params``.

        Returns:
            A ``SessionStream`` of ``ChatChunk`` values.

        Raises:
            LlamaContextException: before generating, when even the newest turn with the system prompt
                does not fit (the new message stays in the history).
            LlamaStateException: nothing to answer, or ``continue_previous_turn`` without an assistant
                message last.
            LlamaRequestException: ``content`` given with ``continue_previous_turn``, or a bad option.
            LlamaException: what ``LlamaEngine.create()`` raises.
        """
        sampling_keywords, options = split_sampling_keywords(options, CHAT_REQUEST_OWNED)
        if sampling_keywords:
            params = with_sampling_keywords(params or self.params, sampling_keywords)
        if continue_previous_turn:
            if content is not None:
                raise LlamaRequestException("continue_previous_turn continues the last reply: pass no content")
            if not self.history or self.history[-1].get("role") != "assistant":
                raise LlamaStateException("continue_previous_turn needs an assistant message last in the history")
        elif content is not None:
            self.history.append({"role": role, "content": content if isinstance(content, str) else list(content)})
        elif not self.history:
            raise LlamaStateException("nothing to answer: pass content or add a message first")
        stream = self._start(tools=tools, tool_choice=tool_choice, params=params,
                             continue_final_message=continue_previous_turn, **options)
        return SessionStream(self, stream, continue_previous_turn)

    def send(self, content: str | Sequence[Json] | None = None, **kwargs: Any) -> ChatCompletion:
        """``create()`` run to its end: the reply as a ``ChatCompletion`` (also in the history).

        Args:
            content: as for ``create()``.
            **kwargs: ``create()``'s keywords.

        Raises:
            LlamaException: what ``create()`` raises.
        """
        with self.create(content, **kwargs) as stream:
            return stream.completion()

    def send_with_tools(self, content: str | Sequence[Json] | None, tools: Sequence[Any], **kwargs: Any
                        ) -> ToolLoopResult:
        """Run the tool loop: send ``content``, run each tool the model calls, give it the results, and
        repeat until it answers in text (or a limit stops the loop).

        Args:
            content: the user's message (text or content parts); None: answer the history as it stands.
            tools: Python functions (sync or async: the signature and docstring become the schema, the
                arguments are validated with pydantic before the call), ``Tool`` values, or OpenAI tool
                dicts for tools the caller runs itself.
            **kwargs: ``max_rounds`` (default 5), ``tool_choice`` (for the first round; later rounds
                use "auto"), ``on_tool_call(call)`` (sees each ``ToolCallRequest`` before its tool
                runs; a return value other than None is used as the result instead), ``on_tool_error``
                (None: the model reads ``"Error: <type>: <message>"``; ``"raise"``: re-raise after
                rolling the round back; a function ``(call, exception) -> result``), ``params``, and
                ``create()``'s keywords for each request (``llamact.session.tools.run_tool_loop``).

        Returns:
            A ``ToolLoopResult``: ``stop_reason`` ("completed", "max_rounds", "unhandled_tool_calls",
            "context_exceeded", "truncated", "cancelled"), the new ``messages``, the final
            ``content``, ``pending_tool_calls``.

        Raises:
            ValueError: ``max_rounds`` below 1.
            LlamaException: what ``create()`` raises, except a context overflow, which ends the loop
                with "context_exceeded"; with ``on_tool_error="raise"``, the tool's own exception.

        Example:
            ```python
            def get_weather(city: str) -> str:
                '''Get the current weather in a city.'''
                return f"Sunny in {city}"

            result = session.send_with_tools("What's the weather in Paris?", [get_weather])
            print(result.stop_reason, result.content)
            ```
        """
        return run_tool_loop(self, content, tools, **kwargs)

    def create_structured(self, content: str | Sequence[Json] | None, output: Any, **kwargs: Any) -> Any:
        """Ask for an answer shaped by ``output`` (see ``LlamaEngine.create_structured``); the JSON
        reply joins the history and the validated object is returned.

        Args:
            content: as for ``create()``.
            output: a pydantic model class, a TypedDict or dataclass, or a JSON schema dict.
            **kwargs: ``create()``'s keywords.

        Raises:
            LlamaUnsupportedException: a schema keyword the grammar cannot enforce.
            LlamaInferenceException: an answer cut off or failing validation (``details["raw"]``).
        """
        from ..engine.structured import response_format_for, validate_output

        schema = response_format_for(output)
        reply = self.send(content, response_format=schema, **kwargs)
        return validate_output(output, reply.content, reply.finish_reason)

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Save the conversation and the engine's KV cache into a directory, so that
        ``ChatSession.load`` resumes it without evaluating the history again (see
        ``llamact.session.persistence``). Call it between requests, after the last reply.

        Args:
            path: the directory to write (created if needed).

        Returns:
            The directory.

        Raises:
            LlamaStateException: the engine is generating, or the state cannot be written.
        """
        record = SavedSession(type(self).__name__, self.system_prompt, self.max_context_tokens, self.params,
                              self.request_options, self.history, self.template_clock())
        return save_session(self.engine, record, path)

    @classmethod
    def load(cls, engine: LlamaEngine | LitertEngine, path: str | os.PathLike[str]) -> ChatSession:
        """The session saved in ``path`` (a ``ChatSession`` or ``TemplateTimeChatSession``, as saved)
        on ``engine``, its KV cache restored, so the next turn evaluates only the new message.

        Args:
            engine: the engine to continue on: the same model the session was saved with.
            path: a directory ``save()`` wrote.

        Raises:
            LlamaStateException: another model's session, a damaged directory, or a state the context
                cannot take; the engine's cache is then left empty.
        """

        def build(record: SavedSession) -> ChatSession:
            options = dict(record.request_options)
            session: ChatSession
            if record.kind == "TemplateTimeChatSession":
                session = TemplateTimeChatSession(engine, record.system_prompt, template_now=record.template_now,
                                                  max_context_tokens=record.max_context_tokens,
                                                  params=record.params, **options)
            else:
                session = ChatSession(engine, record.system_prompt, max_context_tokens=record.max_context_tokens,
                                      params=record.params, **options)
            session.history = [dict(m) for m in record.history]
            return session

        return load_session(engine, path, build)

    def cancel(self) -> None:
        """Stop the generation in progress (from any thread) and, in a tool loop, the loop."""
        self.cancel_requested = True
        self.engine.cancel()

    # -- internals -------------------------------------------------------------------------------

    def _request(self, messages: list[dict[str, Any]], **options: Any) -> ChatRequest:
        """A request of this session: its options, then the call's; the template clock read once."""
        options = {**self.request_options, **options}
        options.setdefault("template_now", self.template_clock())
        return ChatRequest(messages, **options)

    def fit(self, *, tools: Any = None, tool_choice: Any = "auto", params: GenerationParams | None = None,
            **options: Any) -> Fit:
        """Where the next request's history starts, and whether it fits (see the class doc)."""
        params = params or self.params
        limit = self.engine.n_ctx
        if self.max_context_tokens is not None:
            limit = min(limit, self.max_context_tokens)
        budget = limit - max(params.max_tokens, 0)
        request = self._request([], tools=tools, tool_choice=tool_choice, **options)
        head = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []

        def count(history: Sequence[Mapping[str, Any]]) -> int:   # a medium counts as the embeddings it makes
            return self.engine.prompt_length(replace(request, messages=head + list(history)))

        return fit_history(self.history, count, budget)

    def request_template(self, *, tools: Any = None, tool_choice: Any = "auto",
                         params: GenerationParams | None = None, **options: Any) -> Any:
        """The ``ChatTemplateResult`` (prompt, grammar, ...) the next request would be sent with: the
        fitted history answered as it stands (raises LlamaContextException when it does not fit)."""
        return self.engine.chat_template(self._fitted_request(tools=tools, tool_choice=tool_choice, params=params,
                                                              **options))

    def _fitted_request(self, *, tools: Any, tool_choice: Any, params: GenerationParams | None,
                        **options: Any) -> ChatRequest:
        """The next request: the history fitted into the context (see the class doc)."""
        params = params or self.params
        options.setdefault("template_now", self.template_clock())  # one clock for the budget and the prompt
        fit = self.fit(tools=tools, tool_choice=tool_choice, params=params, **options)
        self.last_request_fit_context = fit.fits
        self.last_request_dropped = fit.start
        self.last_request_tokens = fit.n_tokens
        if not fit.fits:
            raise LlamaContextException(
                f"the newest turn with the system prompt renders to {fit.n_tokens} prompt tokens, more than "
                f"the {self.max_context_tokens or self.engine.n_ctx} token context minus the "
                f"reply's {max(params.max_tokens, 0)}; shorten the message or raise n_ctx",
                {"prompt_tokens": fit.n_tokens, "dropped": fit.start})
        head = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        return self._request(head + self.history[fit.start:], tools=tools, tool_choice=tool_choice, **options)

    def _start(self, *, tools: Any, tool_choice: Any, params: GenerationParams | None, **options: Any) -> ChatStream:
        request = self._fitted_request(tools=tools, tool_choice=tool_choice, params=params, **options)
        return self.engine.create(request, params=params or self.params)

    def _record_reply(self, message: ChatMessage, continuing: bool) -> None:
        reply = message_to_json(message)
        reply["role"] = "assistant"
        if continuing:
            # a continuation's parsed message is the whole turn, the continued prefix included
            self.history[-1] = reply
        else:
            self.history.append(reply)


class TemplateTimeChatSession(ChatSession):
    """A ``ChatSession`` whose template clock is fixed at ``template_now`` (epoch seconds, or a
    ``datetime``): ``strftime_now`` and the date globals render the same on every request, so the
    prompts are reproducible. Each request (and each tool-loop round) reads the attribute when it
    starts; ``reset()`` keeps it; None restores the wall clock."""

    def __init__(self, engine: LlamaEngine | LitertEngine, system_prompt: str | None = None, *,
                 template_now: Any = None, **kwargs: Any) -> None:
        super().__init__(engine, system_prompt, **kwargs)
        self.template_now = template_now

    def template_clock(self) -> float | None:
        now = self.template_now
        if now is None:
            return None
        timestamp = getattr(now, "timestamp", None)
        return float(timestamp()) if callable(timestamp) else float(now)
