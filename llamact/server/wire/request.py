"""What every generation body shares, whatever its family: the server's defaults for the fields a
request leaves out, the sampling and stopping fields, and the checks of its constraint.

    generation_params(body, defaults) -> GenerationParams   the sampling fields (``wire.fields``'s table)
    read_id_slot(body) -> int                               the slot a request asks for (-1: any)
    slot_of(id_slot, n_slots) -> int                        the slot an id names (llama-server's modulo)
    ChatCall                                                a chat body read (``chat.wire.read_chat``)
    check_grammar(text, field)                              a request's GBNF, refused before any generation
    refuse_unenforced_schema(request, defaults)             deviation 8: a schema the grammar cannot hold

What enters: the decoded JSON body and the server's ``RequestDefaults`` (its command line), read as
llama-server reads them (``params_from_json_cmpl`` in tools/server/server-common.cpp). Raised: a
field the server refuses is a ``RequestError`` (400), with upstream's message where upstream has one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ...chat.request import ChatRequest
from ...engine import GenerationParams
from ...engine.grammar_engines import grammar_limits_for
from ...engine.logprobs import MAX_TOP_LOGPROBS
from ...engine.sampling import dry_runs
from ...errors import LlamaException
from ...grammar.enforcement import refuse_unenforced
from ...grammar.gbnf import GbnfError
from ...grammar.limits import GrammarLimitError, check_grammar_limits
from ..http.errors import RequestError
from .fields import Vocabulary, read_number, sampling_fields

__all__ = ["LENIENT_REMEDY", "ChatCall", "RequestDefaults", "check_dry_breakers", "check_grammar", "generation_params",
           "read_id_slot", "refuse_unenforced_schema", "slot_of"]


@dataclass(frozen=True)
class RequestDefaults:
    """What a request gets for the fields it leaves out (the server's command line)."""

    model_name: str = ""
    n_predict: int = -1
    reasoning_format: str = "deepseek"
    enable_thinking: bool = True
    # upstream's default for a request without the field: the template's caps
    parallel_tool_calls: bool = False
    # accept a response schema with keywords the grammar cannot enforce (llama-server's way)
    lenient_schemas: bool = False
    # answer chat requests exactly as llama-server does (--upstream-compat; a request's own field wins)
    upstream_compat: bool = False
    # the model's vocabulary, for the fields that need it (logit_bias text, ignore_eos); the slots
    # (llama-server's bound on a request's n)
    vocabulary: Vocabulary | None = None
    n_parallel: int = 1
    # the server's sampling defaults (``ServerSettings.sampling_defaults``: --temp, --top-k, ...) and
    # the variables every template sees (--chat-template-kwargs; a request's own win)
    sampling: Mapping[str, Any] = field(default_factory=dict)
    template_kwargs: Mapping[str, Any] = field(default_factory=dict)
    # media content parts the model takes (its projector's: --mmproj)
    allow_image: bool = False
    allow_audio: bool = False
    # a request's "speculative.types" as llama-server reports it ("none" without speculation)
    speculative_types: str = "none"
    # the most DRY sequence breakers a request may give (--max-dry-breakers): DRY's set-up scans the
    # whole vocabulary once per breaker before the first token
    max_dry_breakers: int = 16


@dataclass(frozen=True)
class ChatCall:
    """A chat completion body: the request, its generation settings, how to answer, and the slot it
    asks for (``id_slot``; -1: any)."""

    request: ChatRequest
    params: GenerationParams
    stream: bool
    include_usage: bool
    id_slot: int = -1


def read_id_slot(body: Any) -> int:
    """``json_value(data, "id_slot", -1)`` as an ``int``: a number is cast as C++ casts it (a float
    toward zero, kept to 32 bits), a boolean is 0 or 1, anything else (a string, null) is -1."""
    value = body.get("id_slot") if isinstance(body, dict) else None
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)):
        return int(read_number(body, "id_slot", "int"))
    return -1


def slot_of(id_slot: int, n_slots: int) -> int:
    """The slot an id names: ``get_slot_by_id`` takes it modulo the number of slots as an unsigned
    size, so any id is some slot (5 of 4 slots is 1; -2 is 2)."""
    return (id_slot % 2**64) % n_slots


LENIENT_REMEDY = "start the server with --lenient-schemas to ignore it as llama-server does"


def generation_params(body: Any, defaults: RequestDefaults) -> GenerationParams:
    """The sampling and stopping fields of a chat or completion body, through llama-server's field
    table (``wire.fields``: types, clamps and hard limits as upstream has them)."""
    values = sampling_fields(body, defaults.vocabulary, defaults.n_parallel)
    n_predict = values.pop("max_tokens", defaults.n_predict)
    values["max_tokens"] = n_predict if n_predict >= 0 else -1
    if body.get("post_sampling_probs") is True:   # probabilities after the sampler chain: not computed here
        raise RequestError("'post_sampling_probs' is not supported: llamact's logprobs are those of the raw "
                           "logits (llama-server's default)")
    if body.get("n_probs") is not None:   # llama-server's own field: each token's top n_probs alternatives
        n_probs = int(read_number(body, "n_probs", "int"))
        if n_probs > MAX_TOP_LOGPROBS:
            raise RequestError(f"'n_probs' above {MAX_TOP_LOGPROBS} is not supported")
        if n_probs > 0:
            values["logprobs"], values["top_logprobs"] = True, n_probs
    try:
        params = GenerationParams(**{**defaults.sampling, **values})
    except LlamaException as exc:
        raise RequestError(str(exc)) from exc
    check_dry_breakers(params, defaults.max_dry_breakers)
    return params


def check_dry_breakers(params: GenerationParams, limit: int) -> None:
    """Refuse more DRY sequence breakers than the server takes, before DRY's set-up runs: llama.cpp
    scans the whole vocabulary once per breaker (tenths of a second each on a small model, more on a
    large vocabulary: 1,000 breakers ran for minutes), and llama-server caps only each breaker's
    length (40 bytes, which llama.cpp still does here)."""
    n = len(params.dry_sequence_breakers)
    if n > limit and dry_runs(params):
        raise RequestError(f"'dry_sequence_breakers' has {n} entries; this server takes at most {limit} with DRY "
                           f"on (--max-dry-breakers): each breaker costs a scan of the model's whole vocabulary "
                           f"before the request starts")


def check_grammar(text: str, field: str = "grammar", engine: str = "llama") -> str:
    """A grammar from a request, checked before any generation: llama-server answers one that does not
    parse with 400 ("Failed to parse grammar"); llamact's front end says where, and refuses one over
    the server's grammar limits (``grammar.limits``) with the limit's name -- those of the grammar
    engine the request's ``grammar_engine`` picks (``engine.grammar_engines.grammar_limits_for``)."""
    try:
        check_grammar_limits(text, grammar_limits_for(engine))
    except GrammarLimitError as exc:
        raise RequestError(f"'{field}': {exc}") from None
    except GbnfError as exc:
        raise RequestError(f"Failed to parse grammar ('{field}'): {exc}") from None
    return text


def refuse_unenforced_schema(request: ChatRequest, defaults: RequestDefaults) -> None:
    """Deviation 8 on the server: a generation whose response schema the grammar cannot hold is
    refused (400) unless the server was started lenient."""
    if not defaults.lenient_schemas:
        refuse_unenforced(request.inputs.json_schema, LENIENT_REMEDY)
