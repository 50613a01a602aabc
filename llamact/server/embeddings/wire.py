"""The embeddings family's wire format (the embedding and rerank routes): bodies read as llama-server
reads them, vectors and scores written in its shapes.

    call = read_embeddings(body, oai=True, default_normalize=2)   # /v1/embeddings (False: /embeddings)
    tokens = prompt_tokens(tokenize, call.prompts[i])            # one input's tokens
    oai_embeddings(call, model_name, vectors, n_tokens) / native_embeddings(vectors)
    call = read_rerank(body); rerank_body(call, model_name, scores, n_tokens)

What enters: the decoded JSON body (``handle_embeddings_impl`` / ``post_rerank`` in
tools/server/server-context.cpp). An input is a string, a list of token ids, a list mixing both
(text tokenized, ids kept; only a first text gets BOS), ``{"prompt_string": ...}``, or a list of
those (``tokenize_input_prompts`` in server-common.cpp). ``"content"`` instead of ``"input"`` asks
for the native shape on either route, as upstream.

What leaves: OpenAI's list (``format_embeddings_response_oaicompat``: float or base64 of the
little-endian float32 bytes, usage counts the input tokens) or llama-server's native list (one
vector per input in a list, or one per token with pooling none, never normalized then); the rerank
list (``format_response_rerank``: Jina's shape, or TEI's when the body has ``texts``). Where
llama-server answers a malformed body with a 500 (a JSON type error, an empty list, an element of
the wrong kind) the same message is a 400 here (docs/design.md, deviation 12).
"""

from __future__ import annotations

import base64
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...json_types import Json
from ..http.errors import RequestError

Prompt = str | list[str | int]   # text, or text and token ids in order

__all__ = ["EmbeddingCall", "RerankCall", "check_tokens", "native_embeddings", "normalized", "oai_embeddings",
           "prompt_tokens", "read_embeddings", "read_rerank", "rerank_body"]

# llama-server's words, and what to do (docs/design.md deviation 14): the model names no pooling, or --pooling none
NO_EMBEDDINGS_OAI = ("Pooling type 'none' is not OAI compatible. Please use a different pooling type: start the server "
                     "with --pooling mean (or cls / last) for one vector per input")
NO_RERANKING = "This server does not support reranking. Start it with `--reranking`"
EMPTY_INPUT = "Input content cannot be empty"
_ELEMENTS = ('"prompt" elements must be a string, a list of tokens, a JSON object containing a prompt string, '
             'or a list of mixed strings & tokens.')
_INT32 = 2**31 - 1


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class EmbeddingCall:
    """An embeddings body: its inputs, the answer's shape (OpenAI's or native), the encoding, the
    norm (or the request error reading it gave, raised after the inputs are checked, as upstream
    reads ``embd_normalize`` last), the ``model`` to echo."""

    prompts: list[Prompt]
    oai: bool
    use_base64: bool
    normalize: int | RequestError
    model: str | None


def _mixed(value: list[Any]) -> list[str | int]:
    if not all(isinstance(e, str) or _is_int(e) for e in value):
        raise RequestError(_ELEMENTS)
    return list(value)


def _subprompt(value: Any) -> Prompt:
    """One input (``tokenize_input_subprompt``), not yet tokenized."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        if any(isinstance(e, str) for e in value) and any(_is_int(e) for e in value):
            return _mixed(value)
        if all(_is_int(e) for e in value):
            return list(value)
    if isinstance(value, dict) and "prompt_string" in value:
        if "multimodal_data" in value:
            raise RequestError("Multimodal data provided, but model does not support multimodal requests.")
        inner = value["prompt_string"]
        if isinstance(inner, str):
            return inner
        if isinstance(inner, list):
            return _mixed(inner)
        raise RequestError(f"'prompt_string' must be a string, got {type(inner).__name__}")
    raise RequestError(_ELEMENTS)


def split_prompts(value: Any) -> list[Prompt]:
    """``tokenize_input_prompts``: a list without token ids is several inputs, anything else one."""
    if isinstance(value, list) and not any(_is_int(e) for e in value):
        prompts = [_subprompt(p) for p in value]
    else:
        prompts = [_subprompt(value)]
    if not prompts:
        raise RequestError('"prompt" must not be empty')
    return prompts


def _normalize_field(body: Json, default: int) -> int | RequestError:
    """``body.at("embd_normalize").get<int>()``: a number, truncated; a boolean counts as 0 / 1."""
    if "embd_normalize" not in body:
        return default
    value = body["embd_normalize"]
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)) and math.isfinite(value) and -_INT32 - 1 <= value <= _INT32:
        return int(value)
    return RequestError(f"'embd_normalize' must be an integer, got {json_type(value)}")


def json_type(value: Any) -> str:
    """A JSON value's type as nlohmann's messages name it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    names: dict[type, str] = {str: "string", list: "array", dict: "object"}
    return names.get(type(value), type(value).__name__)


def read_embeddings(body: Json, oai: bool, default_normalize: int) -> EmbeddingCall:
    """A ``/v1/embeddings`` (``oai``) or ``/embeddings`` body."""
    if isinstance(body, dict) and "input" in body:
        prompt = body["input"]
    elif isinstance(body, dict) and "content" in body:
        oai, prompt = False, body["content"]   # "content" is not OpenAI's: the native answer
    else:
        raise RequestError('"input" or "content" must be provided')
    use_base64 = False
    if "encoding_format" in body:
        encoding = body["encoding_format"]
        if not isinstance(encoding, str):
            raise RequestError(f"'encoding_format' must be a string, got {json_type(encoding)}")
        if encoding == "base64":
            use_base64 = True
        elif encoding != "float":
            raise RequestError("The format to return the embeddings in. Can be either float or base64")
    prompts = split_prompts(prompt)
    model = body.get("model")
    return EmbeddingCall(prompts, oai, use_base64, _normalize_field(body, default_normalize),
                         model if isinstance(model, str) else None)


def prompt_tokens(tokenize: Callable[[str, bool], list[int]], prompt: Prompt) -> list[int]:
    """``tokenize_mixed``: text tokenized with special tokens parsed, BOS (and the like) only for a
    text that comes first; token ids as they are. ``tokenize(text, add_special)``."""
    if isinstance(prompt, str):
        return tokenize(prompt, True)
    out: list[int] = []
    for i, part in enumerate(prompt):
        if isinstance(part, str):
            out += tokenize(part, i == 0)
        else:
            out.append(part)
    return out


def check_tokens(tokens: list[int], n_vocab: int, n_ubatch: int, pooling: str) -> None:
    """What llama-server refuses of one input once tokenized: ids outside the vocabulary, and more
    tokens than one physical batch when the pooling needs them all at once (all but ``last``). Its
    second answer is a 500; the same message is a 400 here (the request is too large for this
    server's --ubatch-size, deviation 12)."""
    if tokens and not (0 <= min(tokens) and max(tokens) < n_vocab):
        raise RequestError("Prompt contains invalid tokens")
    if pooling != "last" and len(tokens) > n_ubatch:
        raise RequestError(f"input ({len(tokens)} tokens) is too large to process. increase the physical batch "
                           f"size (current batch size: {n_ubatch})")


def normalized(vector: np.ndarray, norm: int) -> np.ndarray:
    """``common_embd_normalize``: -1 as it is, 0 scaled so the largest magnitude is 32760 (int16's
    range), 2 euclidean (squares in float32, summed in float64), any other p the p-norm."""
    x = vector.astype(np.float32, copy=False)
    if norm == -1:
        total = 1.0
    elif norm == 0:
        total = float(np.abs(x).max(initial=0.0)) / 32760.0
    elif norm == 2:
        total = math.sqrt(float(np.square(x).astype(np.float64).sum()))
    else:
        total = float(np.power(np.abs(x).astype(np.float64), norm).sum()) ** (1.0 / norm)
    scale = np.float32(1.0 / total) if total > 0.0 else np.float32(0.0)
    return (x * scale).astype(np.float32)


def _floats(vector: np.ndarray) -> list[float]:
    return [float(v) for v in vector.tolist()]


def oai_embeddings(call: EmbeddingCall, model_name: str, vectors: list[np.ndarray], n_tokens: int) -> Json:
    """OpenAI's list of embeddings (pooled vectors, one per input)."""
    data = []
    for i, vector in enumerate(vectors):
        if call.use_base64:
            encoded = base64.b64encode(vector.astype("<f4").tobytes()).decode("ascii")
            data.append({"embedding": encoded, "index": i, "object": "embedding", "encoding_format": "base64"})
        else:
            data.append({"embedding": _floats(vector), "index": i, "object": "embedding"})
    return {"model": call.model or model_name, "object": "list",
            "usage": {"prompt_tokens": n_tokens, "total_tokens": n_tokens}, "data": data}


def native_embeddings(vectors: list[np.ndarray]) -> Json:
    """llama-server's own list: per input, its pooled vector in a list, or each token's (pooling none)."""
    return [{"index": i, "embedding": [_floats(row) for row in np.atleast_2d(vector)]}
            for i, vector in enumerate(vectors)]


@dataclass(frozen=True)
class RerankCall:
    """A rerank body (Jina's shape, or TEI's when it has ``texts``)."""

    query: str
    documents: list[str]
    top_n: int
    tei: bool
    return_text: bool
    model: str | None


def _strings(body: Json, name: str) -> list[str] | None:
    """``json_value(body, name, default)`` for a list of strings: None (the default) when absent,
    null or not one."""
    value = body.get(name)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    return None


def read_rerank(body: Json) -> RerankCall:
    """A ``/rerank`` body: ``query``, ``documents`` (or TEI's ``texts``), ``top_n``, ``return_text``."""
    if not isinstance(body, dict) or "query" not in body:
        raise RequestError('"query" must be provided')
    query = body["query"]
    if not isinstance(query, str):
        raise RequestError('"query" must be a string')
    documents = _strings(body, "documents")
    if documents is None:
        documents = _strings(body, "texts") or []
    if not documents:
        raise RequestError('"documents" must be a non-empty string array')
    top_n = body.get("top_n")
    if isinstance(top_n, bool) or not isinstance(top_n, (int, float)) or not math.isfinite(top_n):
        top_n = len(documents)   # json_value: the default for a value of the wrong type
    if top_n < 0:
        raise RequestError(f"'top_n' must not be negative, got {top_n}")
    tei = "texts" in body
    return_text = tei and body.get("return_text") is True
    model = body.get("model")
    return RerankCall(query, documents, int(top_n), tei, return_text, model if isinstance(model, str) else None)


def rerank_body(call: RerankCall, model_name: str, scores: list[float], n_tokens: int) -> Json:
    """The documents by score, highest first, the first ``top_n``: a bare list (TEI) or Jina's object."""
    label = "score" if call.tei else "relevance_score"
    results = []
    for i, score in enumerate(scores):
        item: Json = {"index": i, label: score}
        if call.return_text:
            item["text"] = call.documents[i]
        results.append(item)
    results.sort(key=lambda r: -r[label])
    results = results[:call.top_n]
    if call.tei:
        return results
    return {"model": call.model or model_name, "object": "list",
            "usage": {"prompt_tokens": n_tokens, "total_tokens": n_tokens}, "results": results}
