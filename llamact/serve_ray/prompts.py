"""The prompt a request will run, as token ids, for routing: the chat routes' messages rendered with
the model's chat template, the raw routes' prompt as given, tokenized as the server tokenizes them.

    tokens = prompt_tokens(tokenizer, "/v1/chat/completions", body)    # None: nothing to route by

Only the routes whose prompt a cache can share are read (chat completions, raw completions); any
other route, or a body the server would refuse, has no prompt here (its replica answers it, by
load). The text is cut at ``MAX_CHARS`` before tokenizing: routing needs a prefix, not the whole.
"""

from __future__ import annotations

import json
from typing import Any

from ..engine import Tokenizer
from ..errors import LlamaException

__all__ = ["CHAT_PATHS", "MAX_CHARS", "RAW_PATHS", "prompt_tokens"]

CHAT_PATHS = frozenset({"/v1/chat/completions", "/chat/completions"})
RAW_PATHS = frozenset({"/v1/completions", "/completions", "/completion"})
MAX_CHARS = 1 << 16


def _chat_prompt(tokenizer: Tokenizer, body: dict[str, Any]) -> str | None:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return None
    options: dict[str, Any] = {}
    for key in ("tools", "chat_template_kwargs"):
        if body.get(key) is not None:
            options[key] = body[key]
    return tokenizer.chat_template(messages, **options).prompt


def prompt_tokens(tokenizer: Tokenizer, path: str, raw: bytes) -> list[int] | None:
    """The ids of the prompt a request at ``path`` with body ``raw`` runs (None: none to route by)."""
    if path not in CHAT_PATHS and path not in RAW_PATHS:
        return None
    try:
        body = json.loads(raw)
        if not isinstance(body, dict):
            return None
        prompt = _chat_prompt(tokenizer, body) if path in CHAT_PATHS else body.get("prompt")
        if isinstance(prompt, list) and prompt and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
            return prompt
        if isinstance(prompt, str) and prompt:
            return tokenizer.tokenize(prompt[:MAX_CHARS], add_special=True, parse_special=True)
    except (ValueError, TypeError, RecursionError, LlamaException):   # the replica will say what is wrong
        return None
    return None
