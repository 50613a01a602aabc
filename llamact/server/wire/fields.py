"""llama-server's table of completion fields (tools/server/server-schema.cpp), read as it reads them.

    sampling_fields(body, vocabulary) -> dict      GenerationParams keywords for a chat or raw body

Every chat and raw completion body passes through upstream's table after its route's own reading
(``eval_llama_cmpl_schema``): each field has a type, some also limits. What the table does, and
this module with it:

* a field that is absent or ``null`` keeps the server's default; the first present name of a
  field's aliases wins (``n_predict``, then ``max_completion_tokens``, then ``max_tokens``);
* a value of the wrong JSON type is refused with nlohmann's words (``Field 'top_k': [json.exception
  .type_error.302] type must be number, but is string``); a number read as an integer is cut
  toward zero (``max_tokens: 2.5`` is 2) and kept to 32 bits as C++ keeps it;
* *soft* limits clamp (``top_p: 5`` samples with 1, ``top_k: -3`` with 0); *hard* limits refuse
  (``Field 'repeat_last_n': Value must be between 0 <= value <= 2147483647, but got -5``);
* ``stop`` is a string or a list of strings (any other value means none; ``""`` is none here,
  where upstream ends the answer at once: deviation 13); ``logit_bias``
  skips entries it cannot read, ids outside the vocabulary, and tokenizes keys that are not ids;
  ``dry_base`` below 1 falls back to the default; ``ignore_eos`` bans the end-of-generation tokens.

Fields upstream has for features llamact lacks are type-checked like the rest, and refused only
when they ask for something llamact would silently not do (``n_indent``, ``t_max_predict_ms``,
the ``adaptive_p`` sampler, ``reasoning_control``, more than one choice); fields that only shape
upstream's extra output (``timings_per_token``, ``verbose``, ``return_progress``) or its cache
housekeeping (``n_keep``, ``n_discard``, ``n_cache_reuse``) are checked and have no effect.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ...engine.params import SAMPLER_NAMES
from ...errors import LlamaRequestException
from ...json_types import Json

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MAX = 2**63 - 1
_FLOAT = float("inf")

__all__ = ["FieldError", "Vocabulary", "read_bool", "read_number", "sampling_fields"]


class FieldError(LlamaRequestException):
    """A field llama-server's table refuses: ``Field '<name>': <why>`` (HTTP 400)."""

    def __init__(self, name: str, why: str) -> None:
        super().__init__(f"Field '{name}': {why}")
        self.status = 400


@dataclass(frozen=True)
class Vocabulary:
    """What the table needs of the model: its size, its end-of-generation tokens (``ignore_eos``)
    and a tokenizer (``logit_bias`` keys that are text)."""

    n_vocab: int
    eog_tokens: Callable[[], tuple[int, ...]]   # asked only when a request ignores them (a scan of the vocabulary)
    tokenize: Callable[[str], list[int]]


def json_type(value: Json) -> str:
    """nlohmann's name for a value's JSON type."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _type_error(name: str, wanted: str, value: Json) -> FieldError:
    return FieldError(name, f"[json.exception.type_error.302] type must be {wanted}, but is {json_type(value)}")


def _present(body: Json, names: Sequence[str]) -> str | None:
    """The first of a field's names with a value (``null`` counts as absent)."""
    return next((n for n in names if body.get(n) is not None), None)


def _wrap(value: int, bits: int, signed: bool) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if signed and value >= 1 << (bits - 1) else value


def read_number(body: Json, name: str, kind: str) -> int | float:
    """``data.at(name).get<T>()`` for T = float (``"float"``), int32_t (``"int"``), uint32_t
    (``"uint"``) or int64_t (``"int64"``)."""
    value = body[name]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _type_error(name, "number", value)
    if isinstance(value, int) and not -(2**63) <= value < 2**64:   # nlohmann keeps such an integer as a double
        try:
            value = float(value)
        except OverflowError:
            raise FieldError(name, "the number is out of a double's range") from None
    if kind == "float":
        return float(value)
    bits, signed = {"int": (32, True), "uint": (32, False), "int64": (64, True)}[kind]
    if isinstance(value, float):
        if not math.isfinite(value) or abs(value) >= 2.0 ** (bits - (1 if signed else 0)):
            return -(1 << (bits - 1)) if signed else 0   # x86's "integer indefinite" for a cast out of range
        value = int(value)   # toward zero, as static_cast
    return _wrap(value, bits, signed)


def read_bool(body: Json, name: str) -> bool:
    value = body[name]
    if not isinstance(value, bool):
        raise _type_error(name, "boolean", value)
    return value


@dataclass(frozen=True)
class NumberField:
    """A ``field_num``: its names (aliases after the first), C++ type, limits, and whether the limits
    refuse (hard) or clamp (soft); ``target`` the GenerationParams field it sets (None: checked only)."""

    names: tuple[str, ...]
    kind: str = "float"
    low: float = -_FLOAT
    high: float = _FLOAT
    hard: bool = False
    target: str | None = None

    def read(self, body: Json) -> int | float | None:
        name = _present(body, self.names)
        if name is None:
            return None
        value = read_number(body, name, self.kind)
        if self.hard:
            if not self.low <= value <= self.high:
                shown = [_cpp(v, self.kind) for v in (self.low, self.high, value)]
                raise FieldError(name, f"Value must be between {shown[0]} <= value <= {shown[1]}, but got {shown[2]}")
            return value
        return min(max(value, self.low), self.high)


def _cpp(value: float, kind: str) -> str:
    """std::to_string of the field's C++ type: integers as they are, floats with six decimals."""
    return f"{value:.6f}" if kind == "float" else str(int(value))


# server-schema.cpp's numeric fields, in its order
NUMBER_FIELDS: tuple[NumberField, ...] = (
    NumberField(("sse_ping_interval",), "int", -1, INT32_MAX, hard=True),
    NumberField(("n_predict", "max_completion_tokens", "max_tokens"), "int", -1, INT32_MAX, hard=True,
                target="max_tokens"),
    NumberField(("n_indent",), "int", 0, INT32_MAX, hard=True),
    NumberField(("n_keep",), "int", -1, INT32_MAX, hard=True),
    NumberField(("n_discard",), "int", 0, INT32_MAX, hard=True),
    NumberField(("n_cache_reuse",), "int", 0, INT32_MAX, hard=True),
    NumberField(("t_max_predict_ms",), "int64", -1, INT64_MAX, hard=True),
    NumberField(("top_k",), "int", 0, INT32_MAX, target="top_k"),
    NumberField(("top_p",), low=0.0, high=1.0, target="top_p"),
    NumberField(("min_p",), low=0.0, high=1.0, target="min_p"),
    NumberField(("top_n_sigma",), target="top_n_sigma"),
    NumberField(("xtc_probability",), low=0.0, high=1.0, target="xtc_probability"),
    NumberField(("xtc_threshold",), low=0.0, high=1.0, target="xtc_threshold"),
    NumberField(("typical_p",), target="typical_p"),
    NumberField(("temperature",), low=0.0, target="temperature"),
    NumberField(("dynatemp_range",), target="dynatemp_range"),
    NumberField(("dynatemp_exponent",), target="dynatemp_exponent"),
    NumberField(("repeat_last_n",), "int", 0, INT32_MAX, hard=True, target="repeat_last_n"),
    NumberField(("repeat_penalty",), target="repeat_penalty"),
    NumberField(("frequency_penalty",), target="frequency_penalty"),
    NumberField(("presence_penalty",), target="presence_penalty"),
    NumberField(("dry_multiplier",), target="dry_multiplier"),
    NumberField(("dry_base",), target="dry_base"),
    NumberField(("dry_allowed_length",), "int", 0, INT32_MAX, hard=True, target="dry_allowed_length"),
    NumberField(("dry_penalty_last_n",), "int", 0, INT32_MAX, hard=True, target="dry_penalty_last_n"),
    NumberField(("mirostat",), "int", 0, 2, target="mirostat"),
    NumberField(("mirostat_tau",), target="mirostat_tau"),
    NumberField(("mirostat_eta",), target="mirostat_eta"),
    NumberField(("adaptive_target",), high=1.0),
    NumberField(("adaptive_decay",), low=0.0, high=0.99, hard=True),
    NumberField(("seed",), "uint", target="seed"),
    NumberField(("min_keep",), "int", 0, INT32_MAX, hard=True, target="min_keep"),
    NumberField(("reasoning_budget_tokens",), "int", -1, INT32_MAX, hard=True),
)
BOOL_FIELDS = ("verbose", "timings_per_token", "stream", "cache_prompt", "return_tokens", "return_progress",
               "backend_sampling", "post_sampling_probs", "grammar_lazy", "parse_tool_calls", "echo",
               "reasoning_control", "ignore_eos")
DRY_BASE_DEFAULT = 1.75
RANDOM_SEED = 0xFFFFFFFF   # LLAMA_DEFAULT_SEED: a fresh seed per request


def _unsupported(name: str, what: str) -> FieldError:
    return FieldError(name, f"{what} is not supported by llamact's server")


def _stop(value: Json) -> list[str]:
    if isinstance(value, str):
        return [value] if value else []
    if not isinstance(value, list):
        return []   # any other value: no stop strings (the server's defaults, none)
    for word in value:
        if not isinstance(word, str):
            raise _type_error("stop", "string", word)
    # upstream keeps "" (its `!word.empty()` is false for any string) and then ends every answer after
    # one token with no text; llamact drops it, as the engine does: a stop string matching everywhere
    # is no stop string (deviation 13; clients send "" to mean none)
    return [word for word in value if word]


def _bias(value: Json) -> float | None:
    if isinstance(value, bool):
        return -math.inf if value is False else None
    return float(value) if isinstance(value, (int, float)) else None


def _logit_bias(value: Json, vocabulary: Vocabulary | None) -> dict[int, float]:
    """upstream's reading: ``[[token or text, bias], ...]`` or ``{"id or text": bias}``; entries it
    cannot read are skipped, text is tokenized (each of its tokens gets the bias)."""
    pairs: list[tuple[Json, Json]]
    if isinstance(value, list):
        pairs = [(e[0], e[1]) for e in value if isinstance(e, list) and len(e) == 2]
    elif isinstance(value, dict):
        pairs = list(value.items())
    else:
        return {}
    n_vocab = vocabulary.n_vocab if vocabulary is not None else INT32_MAX
    out: dict[int, float] = {}
    for key, raw in pairs:
        bias = _bias(raw)
        if bias is None:
            continue
        if isinstance(key, int) and not isinstance(key, bool):
            token: int | None = key
        elif isinstance(key, str) and isinstance(value, dict) and _is_integer_text(key):
            token = int(key)
        elif isinstance(key, str):
            token = None
        else:
            continue
        if token is not None:
            if 0 <= token < n_vocab:
                out[token] = bias
        elif vocabulary is not None:
            for t in vocabulary.tokenize(key):
                out[t] = bias
    return out


def _is_integer_text(text: str) -> bool:
    """strtol consumed the whole key (leading spaces and a sign allowed, as strtol allows)."""
    stripped = text.lstrip(" \t\n\v\f\r")
    body = stripped[1:] if stripped[:1] in "+-" else stripped
    return body.isascii() and body.isdigit()


_SAMPLER_CHARS = {"e": "penalties", "d": "dry", "s": "top_n_sigma", "k": "top_k", "y": "typ_p", "p": "top_p",
                  "m": "min_p", "x": "xtc", "t": "temperature", "i": "infill", "a": "adaptive_p"}
_SAMPLER_ALIASES = {"nucleus": "top_p", "temp": "temperature", "typ": "typ_p", "typical_p": "typ_p",
                    "typical": "typ_p", "top-k": "top_k", "top-p": "top_p", "min-p": "min_p",
                    "top-n-sigma": "top_n_sigma", "typ-p": "typ_p", "topk": "top_k", "topp": "top_p", "minp": "min_p",
                    "topnsigma": "top_n_sigma", "typp": "typ_p", "adaptive-p": "adaptive_p", "adaptivep": "adaptive_p"}


def _samplers(value: Json) -> tuple[str, ...] | None:
    """``samplers``: a list of names (unknown ones dropped, as upstream drops them) or a string of
    llama.cpp's one-letter codes; None for any other value (the default order)."""
    if isinstance(value, list):
        names = []
        for item in value:
            if not isinstance(item, str):
                raise _type_error("samplers", "string", item)
            name = _SAMPLER_ALIASES.get(item, item)
            if name in SAMPLER_NAMES or name in ("infill", "adaptive_p"):
                names.append(name)
    elif isinstance(value, str):
        names = [_SAMPLER_CHARS[c] for c in value if c in _SAMPLER_CHARS]
    else:
        return None
    for name in names:
        if name not in SAMPLER_NAMES:
            raise _unsupported("samplers", f"the '{name}' sampler")
    return tuple(names)


def sampling_fields(body: Json, vocabulary: Vocabulary | None, n_parallel: int = 1) -> dict[str, Any]:
    """The GenerationParams keywords of a body's sampling and stopping fields (see the module)."""
    values: dict[str, Any] = {}
    for name in BOOL_FIELDS:
        if body.get(name) is not None:
            values[name] = read_bool(body, name)
    options = body.get("stream_options")
    if isinstance(options, dict) and options.get("include_usage") is not None:
        read_bool(options, "include_usage")
    for spec in NUMBER_FIELDS:
        value = spec.read(body)
        if value is not None and spec.target is not None:
            values[spec.target] = value
    n = NumberField(("n_cmpl", "n"), "int", 1, n_parallel, hard=True).read(body)
    if n is not None and n > 1:
        raise _unsupported("n", "more than one choice per request")
    _refuse_missing_features(body)
    if values.get("dry_base", DRY_BASE_DEFAULT) < 1.0:
        values["dry_base"] = DRY_BASE_DEFAULT
    if "seed" in values:
        values["seed"] = None if values["seed"] == RANDOM_SEED else values["seed"]
    if body.get("stop") is not None:
        values["stop"] = _stop(body["stop"])
    if body.get("dry_sequence_breakers") is not None:
        breakers = body["dry_sequence_breakers"]   # json_value: anything but a list of strings reads as none
        if not isinstance(breakers, list) or not breakers or not all(isinstance(b, str) for b in breakers):
            raise FieldError("dry_sequence_breakers", "Error: dry_sequence_breakers must be a non-empty array of "
                                                      "strings")
        values["dry_sequence_breakers"] = tuple(breakers)
    if body.get("samplers") is not None:
        order = _samplers(body["samplers"])
        if order is not None:
            values["samplers"] = order
    bias = _logit_bias(body["logit_bias"], vocabulary) if body.get("logit_bias") is not None else {}
    if values.pop("ignore_eos", False) and vocabulary is not None:
        bias.update(dict.fromkeys(vocabulary.eog_tokens(), -math.inf))
    if bias:
        values["logit_bias"] = bias
    if body.get("grammar_engine") is not None:   # llamact's own: which engine runs this request's grammar
        if body["grammar_engine"] not in ("auto", "llguidance", "llama"):
            raise FieldError("grammar_engine", "'grammar_engine' must be one of auto, llguidance, llama")
        values["grammar_engine"] = body["grammar_engine"]
    for name in [k for k in values if k in BOOL_FIELDS]:
        if name != "cache_prompt":
            values.pop(name)
    return values


def _refuse_missing_features(body: Json) -> None:
    """Values asking for what llamact would silently not do (the fields are read and checked already)."""
    if body.get("n_indent") not in (None, 0):
        raise _unsupported("n_indent", "a minimum line indentation")
    t_max = body.get("t_max_predict_ms")
    if t_max is not None and t_max > 0:
        raise _unsupported("t_max_predict_ms", "a time limit on the prediction")
    target = body.get("adaptive_target")
    if target is not None and target >= 0:
        raise _unsupported("adaptive_target", "adaptive-p sampling")
    if body.get("reasoning_control") is True:
        raise _unsupported("reasoning_control", "ending the reasoning at runtime")
