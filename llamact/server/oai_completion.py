"""A raw completion in OpenAI's shape (``/v1/completions``), as llama-server writes it
(``to_json_oaicompat`` of server-task.cpp): per prompt, one ``text_completion`` object not streamed,
or one event per token and a last one with the finish reason and the usage.

    body = CompletionBody(id, created, model, fingerprint)
    body.whole(chunks, tokenize, index) / body.events(chunk, index)
    merged(objects)        several prompts not streamed: the first object, every prompt's choice

What enters: the engine's ``GenerationChunk`` s of each prompt. Several prompts, as upstream answers
them: the choices in prompt order, everything else (the usage too) the first prompt's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..json_types import Json
from .protocol import released_entry, without_stop_entries

__all__ = ["CompletionBody", "completion_usage", "merged"]


def completion_usage(last: Any) -> Json:
    """A raw completion's usage from its final chunk (llama-server counts the end token as decoded)."""
    t = last.timings
    n_decoded = t.n_generated + int(last.end_token is not None)
    n_prompt = t.n_prompt + t.n_cached
    return {"completion_tokens": n_decoded, "prompt_tokens": n_prompt, "total_tokens": n_decoded + n_prompt,
            "prompt_tokens_details": {"cached_tokens": t.n_cached}}


class CompletionBody:
    """The JSON objects of one raw completion: ``choice(text, finish, entries)`` with the id, model and
    fingerprint every object repeats."""

    def __init__(self, completion_id: str, created: int, model: str, fingerprint: str) -> None:
        self.base = {"created": created, "model": model, "system_fingerprint": fingerprint,
                     "object": "text_completion", "id": completion_id}

    def choice(self, text: str, finish: str | None, entries: list[Any] | None = None, index: int = 0) -> Json:
        logprobs = {"content": entries} if entries else None
        return {"choices": [{"text": text, "index": index, "logprobs": logprobs, "finish_reason": finish}], **self.base}

    def whole(self, chunks: list[Any], tokenize: Callable[..., list[int]], index: int = 0) -> Json:
        """The answer not streamed, from all the chunks of the generation."""
        last = chunks[-1]
        entries = without_stop_entries(
            [released_entry(c) for c in chunks if c.logprob is not None and not c.incomplete], last.stop_string,
            tokenize)
        body = self.choice("".join(c.text for c in chunks), last.finish_reason, entries, index)
        body["usage"] = completion_usage(last)
        return body

    def events(self, chunk: Any, index: int = 0) -> list[Json]:
        """llama-server's events for one chunk: one per token (its text may be "" while a stop string may
        be starting; none for a token that ends inside a UTF-8 character), one for the end token, then
        the finish reason with the usage."""
        entry = [released_entry(chunk)] if chunk.logprob is not None else None
        if chunk.stop_reason is None:
            return [] if chunk.incomplete else [self.choice(chunk.text, None, entry, index)]
        out = []
        if chunk.end_token is not None or chunk.text:
            out.append(self.choice(chunk.text, None, entry, index))   # the final chunk's entry is the end token's
        final = self.choice("", chunk.finish_reason, None, index)
        final["usage"] = completion_usage(chunk)
        out.append(final)
        return out


def merged(objects: list[Json]) -> Json:
    """Several prompts' objects not streamed, as upstream merges them: the first, with every choice."""
    first = objects[0]
    first["choices"] = [o["choices"][0] for o in objects]
    return first
