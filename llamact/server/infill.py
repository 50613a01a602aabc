"""``/infill``: fill in the middle, its body checked and its prompt made as llama-server makes them
(``post_infill`` in server-context.cpp, ``format_prompt_infill`` in server-common.cpp).

    missing = missing_fim_tokens(engine)      # "" when the model can fill in the middle (else 501)
    body = read_infill(body)                  # RequestError with upstream's messages
    ids = infill_tokens(engine, body, n_batch=..., n_predict=..., n_ctx=..., prompt_ids=...)

The prompt is the repository-level FIM pattern: ``[FIM_REP]myproject\\n``, each ``input_extra``
chunk after ``[FIM_SEP]filename\\n`` (or a "--- snippet ---" line without a separator token),
``[FIM_SEP]filename\\n``, then ``[FIM_PRE]prefix[FIM_SUF]suffix[FIM_MID]`` with the request's
``prompt`` after the prefix; the prefix keeps its last 3/4 of a batch, the suffix what is left of
the quarter, the extra chunks what the context has left after a batch and twice ``n_predict``.
"""

from __future__ import annotations

from typing import Any

from ..json_types import Json
from .protocol import RequestError

__all__ = ["infill_tokens", "missing_fim_tokens", "read_infill"]

SNIPPET = "\n\n--- snippet ---\n\n"   # k_chunk_prefix_str: a chunk's separator without a FIM_SEP token


def missing_fim_tokens(engine: Any) -> str:
    """What upstream's capability check says is missing ("" when nothing is)."""
    return "".join(f"{name} token is missing. " for kind, name in (("pre", "prefix"), ("suf", "suffix"),
                                                                    ("mid", "middle"))
                   if engine.fim_token(kind) is None)


def read_infill(body: Json) -> Json:
    """The body's fields checked as upstream checks them; ``input_extra`` defaults to []."""
    if not isinstance(body, dict):
        raise RequestError("the request body must be a JSON object")
    if "prompt" in body and not isinstance(body["prompt"], str):
        raise RequestError('"prompt" must be a string')
    for name in ("input_prefix", "input_suffix"):
        if name not in body:
            raise RequestError(f'"{name}" is required')
        if not isinstance(body[name], str) and not (
                isinstance(body[name], list) and all(isinstance(v, (str, int)) and not isinstance(v, bool)
                                                     for v in body[name])):
            raise RequestError(f'"{name}" must be a string or a list of tokens and strings')
    extra = body.get("input_extra", [])
    if extra is None:
        extra = []
    if not isinstance(extra, list):
        raise RequestError('"input_extra" must be an array of {"filename": string, "text": string}')
    for chunk in extra:
        if not isinstance(chunk, dict) or not isinstance(chunk.get("text"), str):
            raise RequestError('extra_context chunk must contain a "text" field with a string value')
        if "filename" in chunk and not isinstance(chunk["filename"], str):
            raise RequestError("extra_context chunk's \"filename\" field must be a string")
    return {**body, "input_extra": extra}


def _mixed(engine: Any, value: Any) -> list[int]:
    """``tokenize_mixed`` without BOS or special tokens."""
    if isinstance(value, str):
        return list(engine.tokenize(value, add_special=False, parse_special=False))
    ids: list[int] = []
    for part in value:
        ids += engine.tokenize(part, add_special=False, parse_special=False) if isinstance(part, str) else [part]
    return ids


def infill_tokens(engine: Any, body: Json, *, n_batch: int, n_predict: int, n_ctx: int,
                  prompt_ids: list[int]) -> list[int]:
    """The FIM prompt's token ids (see the module docstring; ``spm_infill`` off, upstream's default)."""
    def tokens(text: str) -> list[int]:
        return list(engine.tokenize(text, add_special=False, parse_special=False))

    pre, suf, mid = engine.fim_token("pre"), engine.fim_token("suf"), engine.fim_token("mid")
    rep, sep = engine.fim_token("rep"), engine.fim_token("sep")
    extra: list[int] = []
    if rep is not None:
        extra += [rep, *tokens("myproject\n")]
    for chunk in body["input_extra"]:
        filename = chunk.get("filename")
        if sep is not None:
            extra += [sep, *tokens((filename if isinstance(filename, str) else "tmp") + "\n")]
        else:
            extra += tokens(SNIPPET)
        extra += tokens(chunk["text"])
    if sep is not None:
        extra += [sep, *tokens("filename\n")]

    prefix, suffix = _mixed(engine, body["input_prefix"]), _mixed(engine, body["input_suffix"])
    n_prefix = min(len(prefix), 3 * (n_batch // 4))
    n_suffix = min(len(suffix), max(0, n_batch // 4 - (2 + len(prompt_ids))))
    n_extra = min(max(0, n_ctx - n_batch - 2 * n_predict), len(extra))
    prefix = [pre, *prefix[len(prefix) - n_prefix:], *prompt_ids]
    suffix = [suf, *suffix[:n_suffix]]
    bos = engine.bos_id
    head = [bos] if bos is not None else []
    return [*extra[len(extra) - n_extra:], *head, *prefix, *suffix, mid]
