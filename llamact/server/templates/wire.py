"""The templates family's wire format: ``/template-details``' answer, and ``/tokenize`` and
``/detokenize``'s bodies read and answered as llama-server answers them.

    details_json(result) -> {"prompt", "family", "format", ...}     what a template rendered
    tokenize_json(engine, body, limit) -> {"tokens": [...]}          ids, or ids with their pieces
    detokenize_json(engine, body, limit) -> {"content": "..."}

Token lists are bounded by ``--max-tokenize-tokens`` (``limit``): a huge text is refused before all
of it is tokenized. The engine's refusal of an input (a lone surrogate, an id outside the
vocabulary) is the request's error, 400.
"""

from __future__ import annotations

from typing import Any

from ...errors import LlamaInferenceException, LlamaTokenLimitException
from ..http.errors import RequestError

__all__ = ["details_json", "detokenize_json", "tokenize_json"]


def details_json(result: Any) -> dict[str, Any]:
    """``/template-details``' answer: a ``ChatTemplateResult`` (the page's prompt panel)."""
    return {
        "prompt": result.prompt, "family": result.family, "format": result.format,
        "generation_prompt": result.generation_prompt, "grammar": result.grammar,
        "grammar_lazy": result.grammar_lazy, "grammar_triggers": [t.value for t in result.grammar_triggers],
        "preserved_tokens": list(result.preserved_tokens), "additional_stops": list(result.additional_stops),
        "thinking_start_tag": result.thinking_start_tag, "thinking_end_tags": list(result.thinking_end_tags),
    }


def _check_count(n: int, limit: int, what: str) -> None:
    if n > limit:
        raise RequestError(f"{what} {n} tokens, more than the server's limit of {limit} (--max-tokenize-tokens)")


def tokenize_json(engine: Any, body: Any, limit: int) -> Any:
    """``/tokenize``'s answer to ``body``: its ``content``'s ids (with their pieces if asked)."""
    content = body.get("content") if isinstance(body, dict) else None
    if not isinstance(content, str):
        raise RequestError("'content' must be a string")
    try:   # the limit counted as it tokenizes: a huge text is refused before all of it is tokenized
        tokens = engine.tokenize(content, add_special=bool(body.get("add_special", False)),
                                 parse_special=bool(body.get("parse_special", True)), limit=limit)
    except LlamaTokenLimitException as exc:   # before its pieces, ten times the memory
        what = "'content' is" if exc.details["exact"] else "'content' is at least"
        _check_count(exc.details["at_least"], limit, what)
        raise
    except LlamaInferenceException as exc:   # text llama.cpp cannot take (a lone surrogate)
        raise RequestError(f"'content': {exc}") from None
    if not body.get("with_pieces", False):
        return {"tokens": tokens}
    out = []
    for token in tokens:
        piece = engine.token_piece(token)
        try:
            out.append({"id": token, "piece": piece.decode("utf-8")})
        except UnicodeDecodeError:   # part of a character: llama-server lists the bytes
            out.append({"id": token, "piece": list(piece)})
    return {"tokens": out}


def detokenize_json(engine: Any, body: Any, limit: int) -> Any:
    """``/detokenize``'s answer to ``body``: its ``tokens`` as text."""
    tokens = body.get("tokens", []) if isinstance(body, dict) else None
    if not isinstance(tokens, list) or not all(type(t) is int for t in tokens):
        raise RequestError("'tokens' must be a list of token ids")
    _check_count(len(tokens), limit, "'tokens' holds")
    try:
        return {"content": engine.detokenize(tokens)}
    except LlamaInferenceException as exc:   # an id outside the vocabulary
        raise RequestError(f"'tokens': {exc}") from None
