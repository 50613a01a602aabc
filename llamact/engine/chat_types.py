"""What ``LlamaEngine.create()`` hands out: streamed chunks and the collected completion.

    ChatChunk         one step of a stream: content / thinking / tool-call deltas, and on the last
                      chunk the finish reason, usage and timings; ``to_openai()`` is the exact JSON
                      of an OpenAI ``chat.completion.chunk`` as llama-server emits it
    ChatCompletion    the whole reply: message, finish reason, usage, timings; ``to_openai()`` is a
                      ``chat.completion``
    ``recovery``      on the last chunk and the completion, when the final parse failed or calls were
                      recovered (docs/design.md deviation 17): ``to_openai()`` writes it as the extension
                      field ``llamact`` of the message (the last chunk's delta) -- ``{"parse_error": ...,
                      "recovered": [rule names]}``
    Usage, ChatTimings   llama-server's usage object and its ``timings`` (prompt_n, prompt_ms, ...)

``ChatChunk`` is a NamedTuple for the same reason as ``GenerationChunk``: one is made per delta on
the per-token path. The JSON shapes follow tools/server/server-task.cpp and server-chat.cpp
(``server_chat_msg_diff_to_json_oaicompat``); the server only serialises them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ..chat.deltas import ToolCallDelta
from ..chat.messages import ChatMessage
from ..chat.oai import message_to_json
from ..chat.recovery import RecoveryReport
from ..chat.streaming import gen_tool_call_id
from ..json_types import Json
from .logprobs import TokenLogprob

__all__ = ["ChatChunk", "ChatCompletion", "ChatTimings", "Usage", "new_completion_id", "system_fingerprint"]

# the model name of a completion made without one (the engine passes its model's file name)
DEFAULT_MODEL_NAME = "llamact"


def new_completion_id() -> str:
    """llama-server's ``gen_chatcmplid``: ``chatcmpl-`` and 32 random characters."""
    return "chatcmpl-" + gen_tool_call_id()


def system_fingerprint() -> str:
    """llama-server's ``llama_build_info()``: ``b<build>-<commit>``."""
    from .._build import build_info

    info = build_info()["llama_cpp"]
    return f"{info['build']}-{info['commit'][:8]}"


@dataclass(frozen=True)
class Usage:
    """OpenAI's usage object (``completion_tokens`` counts the end-of-generation token, as upstream)."""

    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def to_openai(self) -> Json:
        return {"completion_tokens": self.completion_tokens, "prompt_tokens": self.prompt_tokens,
                "total_tokens": self.total_tokens, "prompt_tokens_details": {"cached_tokens": self.cached_tokens}}


@dataclass(frozen=True)
class ChatTimings:
    """llama-server's ``timings``: prompt tokens evaluated (``cache_n`` reused from the cache),
    generated tokens, and their times."""

    cache_n: int
    prompt_n: int
    prompt_ms: float
    predicted_n: int
    predicted_ms: float
    draft_n: int = 0            # speculative decoding: tokens drafted (llama-server lists these two only then)
    draft_n_accepted: int = 0   # and how many the target kept

    @property
    def prompt_per_token_ms(self) -> float:
        return self.prompt_ms / self.prompt_n if self.prompt_n else 0.0

    @property
    def prompt_per_second(self) -> float:
        return 1e3 * self.prompt_n / self.prompt_ms if self.prompt_ms > 0 else 0.0

    @property
    def predicted_per_token_ms(self) -> float:
        return self.predicted_ms / self.predicted_n if self.predicted_n else 0.0

    @property
    def predicted_per_second(self) -> float:
        return 1e3 * self.predicted_n / self.predicted_ms if self.predicted_ms > 0 else 0.0

    def to_openai(self) -> Json:
        out = {"cache_n": self.cache_n, "prompt_n": self.prompt_n, "prompt_ms": self.prompt_ms,
               "prompt_per_token_ms": self.prompt_per_token_ms, "prompt_per_second": self.prompt_per_second,
               "predicted_n": self.predicted_n, "predicted_ms": self.predicted_ms,
               "predicted_per_token_ms": self.predicted_per_token_ms,
               "predicted_per_second": self.predicted_per_second}
        if self.draft_n > 0:
            out.update(draft_n=self.draft_n, draft_n_accepted=self.draft_n_accepted)
        return out


def _tool_call_json(delta: ToolCallDelta) -> Json:
    call: Json = {"index": delta.index}
    if delta.id:
        call["id"] = delta.id
        call["type"] = "function"
    if delta.name or delta.arguments:
        function: Json = {}
        if delta.name:
            function["name"] = delta.name
        if delta.arguments:
            function["arguments"] = delta.arguments
        call["function"] = function
    return call


class ChatChunk(NamedTuple):
    """One step of a ``create()`` stream. ``role`` is set on the first chunk only; ``finish_reason``
    ("stop", "length", "tool_calls", "cancelled"), ``usage`` and ``timings`` on the last.

    Attributes:
        content: new answer text, or None.
        thinking: new thought text (``reasoning_content``), or None.
        tool_calls: tool-call deltas; by default each call arrives whole, in one delta.
        finish_reason: on the last chunk: "stop", "length", "tool_calls" or "cancelled".
        usage: on the last chunk: prompt, completion and cached token counts.
        timings: on the last chunk: llama-server's timings.
        role: "assistant", on the first chunk.
        logprobs: with logprobs on, the entries of the tokens this chunk ends.
        final_parse: a delta of the final parse (when generation ends), not of a token's partial parse.
        recovery: on the last chunk, when the final parse failed or calls were recovered (deviation 17).
    """

    content: str | None = None
    thinking: str | None = None
    tool_calls: tuple[ToolCallDelta, ...] = ()
    finish_reason: str | None = None
    usage: Usage | None = None
    timings: ChatTimings | None = None
    role: str | None = None
    # with logprobs: the entry of the token whose text this chunk ends (llama-server puts a token's
    # entry on the last chunk that token made)
    logprobs: tuple[TokenLogprob, ...] = ()
    # a delta of the final parse (the one that runs when generation ends), not of a token's partial
    # parse: llama-server's final result carries these; the chat stream sends them as more deltas,
    # the Responses stream only in its ``*.done`` events, the Anthropic events open their blocks anew
    final_parse: bool = False
    # on the last chunk: what the final parse could not read and what was recovered (deviation 17)
    recovery: RecoveryReport | None = None

    def delta_json(self) -> Json:
        """The OpenAI ``delta`` object (server_chat_msg_diff_to_json_oaicompat)."""
        if self.role is not None:
            return {"role": self.role, "content": None}
        delta: Json = {}
        if self.thinking:
            delta["reasoning_content"] = self.thinking
        if self.content:
            delta["content"] = self.content
        if self.tool_calls:
            delta["tool_calls"] = [_tool_call_json(c) for c in self.tool_calls]
        return delta

    def to_openai(self, completion_id: str | None = None, model: str | None = None, created: int | None = None, *,
                  fingerprint: str | None = None, include_usage: bool = False) -> list[Json]:
        """This chunk as llama-server streams it: one ``chat.completion.chunk``; the last chunk also
        gives the usage chunk (``choices: []``) when ``include_usage``, and ``timings`` on the very last.

        A chunk does not know its stream: without ``completion_id`` / ``model`` / ``created`` each call
        makes a new id, "llamact" and now. ``ChatStream.openai_chunks()`` gives a stream's chunks with
        the stream's own id, model and time."""
        fp = fingerprint if fingerprint is not None else system_fingerprint()
        base = {"created": int(time.time()) if created is None else created,
                "id": new_completion_id() if completion_id is None else completion_id,
                "model": DEFAULT_MODEL_NAME if model is None else model, "system_fingerprint": fp,
                "object": "chat.completion.chunk"}
        choice: Json = {"finish_reason": self.finish_reason, "index": 0, "delta": self.delta_json()}
        if self.recovery is not None:
            choice["delta"]["llamact"] = self.recovery.to_json()
        if self.logprobs:
            choice["logprobs"] = {"content": [e.to_openai() for e in self.logprobs]}
        out = [{"choices": [choice], **base}]
        if self.finish_reason is not None:
            if include_usage and self.usage is not None:
                out.append({"choices": [], **base, "usage": self.usage.to_openai()})
            if self.timings is not None:
                out[-1]["timings"] = self.timings.to_openai()
        return out


@dataclass(frozen=True)
class ChatCompletion:
    """The whole reply of ``complete_chat()`` (a collected ``create()`` stream). ``id``, ``model`` and
    ``created`` are the stream's (what ``to_openai()`` puts in the dict unless told otherwise).

    Attributes:
        message: the parsed reply: ``content``, ``reasoning_content``, ``tool_calls``.
        finish_reason: "stop", "length", "tool_calls" or "cancelled".
        usage: prompt, completion and cached token counts.
        timings: llama-server's timings (tokens and milliseconds for the prompt and the reply).
        text: the model's raw output, as the parser read it.
        prompt: the rendered prompt.
        logprobs: per generated token, when logprobs were asked.
        recovery: the parse error and the rules that recovered calls, when any (deviation 17).
        id: the completion's id.
        model: the model's name.
        created: when it was made, epoch seconds.
    """

    message: ChatMessage
    finish_reason: str
    usage: Usage
    timings: ChatTimings
    text: str = ""                      # the model's raw output (what the parser read)
    prompt: str = ""
    logprobs: list[TokenLogprob] | None = None  # per generated token, when logprobs were asked
    id: str = field(default_factory=lambda: new_completion_id())
    model: str = DEFAULT_MODEL_NAME
    created: int = field(default_factory=lambda: int(time.time()))
    recovery: RecoveryReport | None = None   # deviation 17: the parse error, the rules that recovered calls

    @property
    def content(self) -> str:
        return self.message.content

    @property
    def thinking(self) -> str:
        return self.message.reasoning_content

    @property
    def tool_calls(self) -> list[Any]:
        return self.message.tool_calls

    def to_openai(self, completion_id: str | None = None, model: str | None = None, created: int | None = None, *,
                  fingerprint: str | None = None) -> Json:
        """A ``chat.completion`` as llama-server returns it (to_json_oaicompat_chat); ``completion_id``,
        ``model`` and ``created`` default to the completion's own ``id``, ``model`` and ``created``."""
        completion_id = self.id if completion_id is None else completion_id
        model = self.model if model is None else model
        created = self.created if created is None else created
        message = message_to_json(self.message)
        if self.recovery is not None:
            message["llamact"] = self.recovery.to_json()
        return {
            "choices": [{"finish_reason": self.finish_reason, "index": 0, "message": message,
                         **({"logprobs": {"content": [e.to_openai() for e in self.logprobs]}}
                            if self.logprobs is not None else {})}],
            "created": created,
            "model": model,
            "system_fingerprint": fingerprint if fingerprint is not None else system_fingerprint(),
            "object": "chat.completion",
            "usage": self.usage.to_openai(),
            "id": completion_id,
            "timings": self.timings.to_openai(),
        }
