"""Chat prompts through llama.cpp's built-in formatter (``llama_chat_apply_template``).

This is upstream's non-Jinja path: it recognises well-known templates by their text and formats
plain role/content messages. It is the interim formatter for ``LlamaEngine.chat`` until llamact's
own Jinja pipeline (``llamact.chat``) lands.
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import LlamaInferenceException, LlamaUnsupportedException
from ..native import llama_h
from ..native.model import Model


def format_chat(model: Model, messages: Sequence[Mapping[str, Any]], add_generation_prompt: bool = True,
                template: str | None = None) -> str:
    template = template or model.chat_template()
    if not template:
        raise LlamaUnsupportedException(
            f"{model.path.name} has no chat template; pass one explicitly or use generate() with a raw prompt"
        )
    encoded: list[tuple[bytes, bytes]] = []
    for i, msg in enumerate(messages):
        role, content = msg.get("role"), msg.get("content")
        if not isinstance(role, str) or not isinstance(content, str):
            raise LlamaInferenceException(
                f"message {i} needs a string 'role' and string 'content' (got {msg!r:.80})", {"index": i}
            )
        encoded.append((role.encode(), content.encode()))
    chat = (llama_h.llama_chat_message * len(encoded))()
    for i, (role, content) in enumerate(encoded):
        chat[i].role = role
        chat[i].content = content
    lib = model._lib
    model.check_open()
    tmpl = template.encode()
    size = 2 * sum(len(r) + len(c) for r, c in encoded) + 256
    buf = ctypes.create_string_buffer(size)
    n = lib.llama_chat_apply_template(tmpl, chat, len(encoded), add_generation_prompt, buf, size)
    if n > size:
        buf = ctypes.create_string_buffer(n)
        n = lib.llama_chat_apply_template(tmpl, chat, len(encoded), add_generation_prompt, buf, n)
    if n < 0:
        raise LlamaUnsupportedException(
            "llama.cpp's built-in chat formatter does not recognise this model's template",
            {"template_head": template[:200]},
        )
    return buf.raw[:n].decode("utf-8", errors="replace")
