"""A chat completion as a stream: the model's tokens in, ``ChatChunk`` deltas out (the engine's
``create()``).

    ChatStream(generation, result, parser, n_prompt)    iterate for ChatChunk values

What enters: a running generation (a ``streams.TokenStream`` of any runtime: text pieces, then the
stop reason and timings), the request's ``ChatTemplateResult`` and its ``ChatStreamParser``. What leaves:
llama-server's sequence for a streamed chat completion -- a first chunk with the assistant role,
one chunk per delta (content, thinking, tool calls), the final parse's deltas, then a chunk with
the finish reason, usage and timings. In upstream mode the deltas are llama-server's own (the final
parse's marked ``final_parse``); by default docs/design.md deviations 2-5 and 17 apply (see
``llamact.chat.streaming``): the last chunk and the completion carry ``recovery`` when the final
parse failed or calls were recovered. Raises what the parser raises (upstream mode:
``ChatParseError`` where upstream's server would end the stream with an error); the generation is
released however the stream ends (exhausted, closed, dropped).
"""

from __future__ import annotations

import time
from collections.abc import Generator, Iterator

from ..chat.deltas import ChatDelta
from ..chat.messages import ChatMessage
from ..chat.recovery import RecoveryReport
from ..chat.result import ChatTemplateResult
from ..chat.streaming import ChatStreamParser
from ..json_types import Json
from .chat_types import DEFAULT_MODEL_NAME, ChatChunk, ChatCompletion, ChatTimings, Usage, new_completion_id
from .generator import GenerationChunk, Timings
from .logprobs import TokenLogprob
from .streams import TokenStream

__all__ = ["ChatStream", "completion_id"]


def completion_id() -> str:
    """llama-server's ``gen_chatcmplid``: ``chatcmpl-`` and 32 random characters."""
    return new_completion_id()


def _chunk(delta: ChatDelta, final_parse: bool = False) -> ChatChunk:
    return ChatChunk(content=delta.content or None, thinking=delta.thinking or None, tool_calls=delta.tool_calls,
                     final_parse=final_parse)


class ChatStream:
    """The chunks of one ``create()`` call. Iterate it, or use it as a context manager; ``close()``
    stops the generation. After the end, ``message``, ``finish_reason``, ``usage`` and ``timings``
    hold the whole reply (``text`` and ``tokens`` the model's raw output), and ``completion()``
    gives it as a ``ChatCompletion``."""

    def __init__(self, generation: TokenStream, result: ChatTemplateResult, parser: ChatStreamParser, n_prompt: int,
                 n_cached: int = 0, model: str = "") -> None:
        self.result = result
        self.id = completion_id()
        self.created = int(time.time())
        self.model = model
        self._generation = generation
        self._parser = parser
        self._n_prompt = n_prompt
        self._n_cached = n_cached
        self.usage: Usage | None = None
        self.timings: ChatTimings | None = None
        self.tokens: list[int] = []   # the generated token ids so far (llama-server's ``return_tokens``)
        self.logprobs: list[TokenLogprob] | None = None  # per generated token, when logprobs were asked
        self.stop_string: str | None = None   # the stop string that ended the reply, once it has ended
        self.n_generated = 0    # once it has ended: the tokens generated, the end-of-generation one not counted
        self._held_logprobs: list[TokenLogprob] = []   # default mode: entries of tokens whose text waits
        self._started = False
        self.ended = False      # the final chunk was made: the reply is complete
        self._chunks: Generator[ChatChunk, None, None] = self._run()

    # -- iteration -------------------------------------------------------------------------------

    def __iter__(self) -> ChatStream:
        return self

    def __next__(self) -> ChatChunk:
        try:
            return next(self._chunks)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        self._chunks.close()
        self._generation.close()

    def interrupt(self) -> None:
        """Stop the generation from any thread: the thread reading this stream sees it end (its finish
        reason "cancelled" where the runtime reports one)."""
        self._generation.interrupt()

    def __enter__(self) -> ChatStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def generation(self) -> TokenStream:
        """The generation this stream reads (llama.cpp's ``GenerationStream``, a batch slot's
        ``SequenceStream``, LiteRT-LM's ``RuntimeGeneration``)."""
        return self._generation

    # -- the reply -------------------------------------------------------------------------------

    @property
    def message(self) -> ChatMessage:
        return self._parser.message

    @property
    def text(self) -> str:
        """The model's raw output so far."""
        return self._parser.text

    @property
    def n_prompt(self) -> int:
        """The prompt's length in tokens."""
        return self._n_prompt

    @property
    def n_cached(self) -> int:
        """The prompt tokens reused from the KV cache (a batch slot's once it has joined)."""
        return self._generation.n_cached or self._n_cached

    @property
    def finish_reason(self) -> str | None:
        return self._parser.finish_reason

    @property
    def recovery(self) -> RecoveryReport | None:
        """Once ended (default mode): the final parse's error and the rules that recovered calls, or
        None (docs/design.md deviation 17)."""
        return self._parser.recovery

    def completion(self) -> ChatCompletion:
        """Run the stream to its end (if it has not ended) and return the whole reply."""
        if not self.ended:
            for _ in self:
                pass
        if self.usage is None or self.timings is None or self.finish_reason is None:
            from ..errors import LlamaInferenceException

            raise LlamaInferenceException("the chat completion ended without its final chunk")
        return ChatCompletion(self._parser.response_message, self.finish_reason, self.usage, self.timings,
                              self.text, self.result.prompt, logprobs=self.logprobs, id=self.id,
                              model=self.model or DEFAULT_MODEL_NAME, created=self.created,
                              recovery=self._parser.recovery)

    def openai_chunks(self, *, include_usage: bool = False) -> Iterator[Json]:
        """The stream as OpenAI ``chat.completion.chunk`` dicts (llama-server's), with this stream's
        id, model and creation time; a final usage chunk when ``include_usage``."""
        model = self.model or DEFAULT_MODEL_NAME
        for chunk in self:
            yield from chunk.to_openai(self.id, model, self.created, include_usage=include_usage)

    def _run(self) -> Generator[ChatChunk, None, None]:
        for piece in self._generation:
            yield from self.push(piece)
            if piece.stop_reason is not None:
                break

    def push(self, piece: GenerationChunk) -> list[ChatChunk]:
        """The chunks one piece of the generation makes (what iterating does with each piece; for a
        caller that receives the pieces itself, e.g. on a batch scheduler's thread). After the piece
        with the stop reason, ``ended`` is True and the reply is complete."""
        out: list[ChatChunk] = []
        if piece.token is not None:
            self.tokens.append(piece.token)
        if piece.logprob is not None:
            if self.logprobs is None:
                self.logprobs = []
            self.logprobs.append(piece.logprob)
        if not self._started:
            self._started = True
            out.append(ChatChunk(role="assistant"))
        if piece.stop_reason is None:
            if piece.text:
                out.extend(_chunk(delta) for delta in self._parser.feed(piece.text))
            if piece.logprob is not None:
                self._place_logprob(out, piece.logprob)
            return out
        if piece.timings is None:
            return out
        self.stop_string = piece.stop_string
        self.n_generated = piece.timings.n_generated
        if piece.end_token is not None:
            self.tokens.append(piece.end_token)
        if piece.text:
            out.extend(_chunk(delta) for delta in self._parser.feed(piece.text))
        # upstream's final result carries the final parse's diffs apart; the default stream's last
        # deltas (held text, whole calls) are deltas like any other
        final = self._parser.upstream_compat
        out.extend(_chunk(delta, final) for delta in self._parser.finish(piece.stop_reason.value))
        held, self._held_logprobs = tuple(self._held_logprobs), []
        if held and out and out[-1].role is None:
            out[-1], held = out[-1]._replace(logprobs=out[-1].logprobs + held), ()
        self.usage, self.timings = self._accounting(piece.timings, piece.end_token is not None)
        self.ended = True
        out.append(ChatChunk(finish_reason=self._parser.finish_reason, usage=self.usage, timings=self.timings,
                             logprobs=held, recovery=self._parser.recovery))
        return out

    def _place_logprob(self, out: list[ChatChunk], entry: TokenLogprob) -> None:
        """A token's entry goes on the last chunk it made. Upstream mode: a token that made no chunk
        has its entry not streamed (llama-server's). Default mode, where text waits (deviation 5):
        the entry waits with it, for the next chunk made."""
        if self._parser.upstream_compat:
            if out:
                out[-1] = out[-1]._replace(logprobs=(entry,))
            return
        self._held_logprobs.append(entry)
        if out:
            out[-1] = out[-1]._replace(logprobs=tuple(self._held_logprobs))
            self._held_logprobs = []

    def _accounting(self, t: Timings, ended: bool) -> tuple[Usage, ChatTimings]:
        # llama-server counts every sampled token (n_decoded), the end-of-generation token included
        n_decoded = t.n_generated + int(ended)
        n_cached = t.n_cached or self._n_cached   # a slot knows its cached prefix only once it joins
        usage = Usage(prompt_tokens=self._n_prompt, completion_tokens=n_decoded, cached_tokens=n_cached)
        timings = ChatTimings(cache_n=n_cached, prompt_n=t.n_prompt, prompt_ms=t.prompt_ms,
                              predicted_n=n_decoded, predicted_ms=t.decode_ms, draft_n=t.n_draft,
                              draft_n_accepted=t.n_draft_accepted)
        return usage, timings
