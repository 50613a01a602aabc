"""A completion body's ``prompt`` as llama-server reads it (``tokenize_input_prompts`` in
tools/server/server-common.cpp): one prompt or several, each text, token ids, or text and ids mixed.

    prompts = read_prompts(body["prompt"])        # list[Prompt]; RequestError with upstream's message
    ids = prompt_tokens(prompts[i], tokenize)     # on the worker: the ids generation starts from

A list holding no number is a list of prompts (``["a", [1, 2], {"prompt_string": "b"}]``); a list
holding a number is one prompt, its strings tokenized in place (``[12, "text", 34]``: only the
first element may receive the BOS token, and only when it is a string). An object's
``prompt_string`` is read as a prompt (its ``multimodal_data`` is refused: there is no media
input). The checks that need the vocabulary (an id out of range, a lone surrogate) run on the
worker with the tokenizing (``check_prompt``), since a prompt may be megabytes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..http.errors import RequestError

__all__ = ["Prompt", "check_prompt", "prompt_tokens", "read_prompts"]

Prompt = str | list[Any]   # text, or a list of token ids and strings (tokenize_mixed)
"""One prompt: text (tokenized with BOS and special tokens parsed) or a mixed list."""

BAD_ELEMENT = ('"prompt" elements must be a string, a list of tokens, a JSON object containing a prompt string, '
               "or a list of mixed strings & tokens.")
INVALID_TOKENS = "Prompt contains invalid tokens"


def _is_id(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _subprompt(value: Any) -> Prompt:
    """``tokenize_input_subprompt``: a string, a list of ids and strings, or ``{"prompt_string": ...}``."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) or _is_id(v) for v in value):
        return value
    if isinstance(value, dict) and "prompt_string" in value:
        if "multimodal_data" in value:
            raise RequestError("Multimodal data provided, but model does not support multimodal requests.")
        return _subprompt(value["prompt_string"])
    raise RequestError(BAD_ELEMENT)


def read_prompts(value: Any) -> list[Prompt]:
    """The prompts of a body's ``prompt`` field (see the module docstring)."""
    if isinstance(value, list) and not any(_is_id(v) for v in value):
        prompts = [_subprompt(v) for v in value]
    else:
        prompts = [_subprompt(value)]
    if not prompts:
        raise RequestError('"prompt" must not be empty')
    return prompts


def _encodable(text: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise RequestError(f"'prompt' holds a lone surrogate ({text[exc.start:exc.end]!r}) at position {exc.start}, "
                           "which is not Unicode text") from None
    return text


def prompt_tokens(prompt: Prompt, tokenize: Callable[..., list[int]]) -> list[int]:
    """``tokenize_mixed``: a string with BOS (as the model wants it) and special tokens parsed; in a
    list, strings tokenized without BOS except a first element, ids kept."""
    if isinstance(prompt, str):
        return tokenize(_encodable(prompt), add_special=True, parse_special=True)
    ids: list[int] = []
    for i, part in enumerate(prompt):
        if isinstance(part, str):
            ids += tokenize(_encodable(part), add_special=i == 0, parse_special=True)
        else:
            ids.append(part)
    return ids


def check_prompt(ids: list[int], n_vocab: int) -> list[int]:
    """What llama.cpp cannot take is the request's error (400), not the generation's (500)."""
    if ids and not 0 <= min(ids) <= max(ids) < n_vocab:
        raise RequestError(f"{INVALID_TOKENS}: 'prompt' holds a token id outside this model's vocabulary "
                           f"(0 to {n_vocab - 1})")
    return ids
