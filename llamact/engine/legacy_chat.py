"""Chat prompts through llama.cpp's built-in formatter (``llama_chat_apply_template``).

This is upstream's non-Jinja path: it recognises well-known templates by their text and formats
plain role/content messages. It is the interim formatter for ``LlamaEngine.chat`` until llamact's
own Jinja pipeline (``llamact.chat``) lands.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import LlamaInferenceException, LlamaUnsupportedException
from ..native.model import Model


def format_chat(model: Model, messages: Sequence[Mapping[str, Any]], add_generation_prompt: bool = True,
                template: str | None = None) -> str:
    template = template or model.chat_template()
    if not template:
        raise LlamaUnsupportedException(
            f"{model.path.name} has no chat template; pass one explicitly or use generate() with a raw prompt"
        )
    pairs: list[tuple[str, str]] = []
    for i, msg in enumerate(messages):
        role, content = msg.get("role"), msg.get("content")
        if not isinstance(role, str) or not isinstance(content, str):
            raise LlamaInferenceException(
                f"message {i} needs a string 'role' and string 'content' (got {msg!r:.80})", {"index": i}
            )
        pairs.append((role, content))
    prompt = model.apply_builtin_chat_template(template, pairs, add_generation_prompt)
    if prompt is None:
        raise LlamaUnsupportedException(
            "llama.cpp's built-in chat formatter does not recognise this model's template",
            {"template_head": template[:200]},
        )
    return prompt
