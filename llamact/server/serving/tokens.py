"""Tokenizing within a limit, on the engine: a prompt must fit the context, a text only counted or
embedded must stay under ``--max-tokenize-tokens``, and neither is tokenized whole when it is huge.

    tokenize = bounded_tokenizer(engine, limit, "context")   # engine.tokenize, refusing past the limit
    count_chat_prompt(engine, request, limit) -> int          llama-server's count of a chat prompt
    count_input_tokens(engine, request, limit) -> int         the same, for the input_tokens routes
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...errors import LlamaContextException, LlamaInferenceException, LlamaMediaException, LlamaTokenLimitException
from ..http.errors import RequestError

__all__ = ["bounded_tokenizer", "count_chat_prompt", "count_input_tokens"]


def bounded_tokenizer(engine: Any, limit: int, what: str) -> Callable[..., list[int]]:
    """``engine.tokenize`` for a text that must hold at most ``limit`` tokens (a prompt: the context;
    a text only counted or embedded: ``--max-tokenize-tokens``), refused without all of a huge text
    being tokenized (20 MB of short words hold 1.1 GiB in llama.cpp's tokenizer). ``what`` names the
    limit in the refusal: "context" makes it the prompt-too-long error (``exceed_context_size_error``),
    anything else a request error naming that setting."""
    def tokenize(text: str, add_special: bool = True, parse_special: bool = True) -> list[int]:
        try:
            return engine.tokenize(text, add_special=add_special, parse_special=parse_special, limit=limit)
        except LlamaTokenLimitException as exc:
            n = f"{'' if exc.details['exact'] else 'at least '}{exc.details['at_least']}"
            if what == "context":
                raise LlamaContextException(f"the prompt ({n} tokens) does not fit the context ({limit} tokens); "
                                            "use a larger --ctx-size or a shorter prompt",
                                            {"n_prompt": exc.details["at_least"], "n_ctx": limit}) from None
            raise RequestError(f"the text holds {n} tokens, more than the server's limit of {limit} ({what})") from None
    return tokenize


def count_chat_prompt(engine: Any, request: Any, limit: int) -> int:
    """llama-server's count of a chat request's prompt (``handle_count_tokens``): the rendered prompt
    tokenized with special tokens added and parsed, at most ``limit`` tokens (a huge prompt is refused
    before all of it is tokenized); a medium counts as the embeddings its projector makes of it."""
    if request.media:
        return int(engine.prompt_length(request))
    prompt = engine.chat_template(request).prompt
    return len(bounded_tokenizer(engine, limit, "--max-tokenize-tokens")(prompt))


def count_input_tokens(engine: Any, request: Any, limit: int) -> int:
    """``count_chat_prompt`` for ``/v1/responses/input_tokens`` and ``/v1/chat/completions/input_tokens``:
    text llama.cpp cannot take (a lone surrogate) is the request's error."""
    try:   # bounded: a count of a huge prompt must not hold a gigabyte in llama.cpp's tokenizer
        return count_chat_prompt(engine, request, limit)
    except LlamaMediaException:
        raise
    except LlamaInferenceException as exc:   # text llama.cpp cannot take (a lone surrogate)
        raise RequestError(f"the rendered prompt: {exc}") from None
