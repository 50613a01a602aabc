"""A raw completion's and a chat reply's logprobs entries, as llama-server writes them.

    released_entry(chunk)                                 one token's entry (its text: what its event released)
    without_stop_entries(entries, stop_string, tokenize)  a reply not streamed, less the stop string's entries
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["released_entry", "without_stop_entries"]


def without_stop_entries(entries: list[Any], stop_string: str | None,
                         tokenize: Callable[..., list[int]]) -> list[Any]:
    """A reply not streamed that a stop string ended: llama-server leaves out as many logprobs entries
    as the stop string has tokens, whatever tokens the model actually used."""
    if not entries or stop_string is None:
        return entries
    n_stop = len(tokenize(stop_string, add_special=False, parse_special=False))
    return entries[:max(0, len(entries) - n_stop)]


def released_entry(chunk: Any) -> Any:
    """A raw completion's logprobs entry as llama-server writes it: the sampled token's ``token`` and
    ``bytes`` are the text its event released (a whole character for a token that completed one, ""
    while a stop string may be starting), its alternatives their own pieces."""
    entry = chunk.logprob.to_openai()
    entry["token"], entry["bytes"] = chunk.text, list(chunk.text.encode("utf-8"))
    return entry
