"""GenerationParams -> a sampler chain in upstream's default order (common/sampling.cpp)."""

from __future__ import annotations

from dataclasses import replace

from ..errors import LlamaArgumentException, LlamaSamplerParameterException
from ..native import sampler as s
from ..native.model import Model
from .grammar_engines import grammar_limits_for, grammar_sampler_spec
from .params import SAMPLER_NAMES, GenerationParams


def sampler_specs(p: GenerationParams, model: Model | None = None) -> list[s.SamplerSpec]:
    """Grammar and logit bias first, then the samplers in ``p.samplers``' order (by default penalties,
    DRY, top-n-sigma, top-k, typical, top-p, min-p, XTC, temperature), and finally the selecting
    sampler (dist, mirostat or greedy). Mirostat replaces the list, as in common/sampling.cpp. The
    grammar runs on the engine ``p.grammar_engine`` picks (``model`` None: llama.cpp's)."""
    specs: list[s.SamplerSpec] = []
    if p.grammar:
        check_grammar(p.grammar, p.grammar_engine)
        specs.append(s.Grammar(p.grammar) if model is None else grammar_sampler_spec(model, p.grammar,
                                                                                    engine=p.grammar_engine))
    if p.logit_bias:
        specs.append(s.LogitBias(dict(p.logit_bias)))
    if p.greedy:
        specs.append(s.Greedy())
        return specs
    if p.mirostat not in (0, 1, 2):
        raise LlamaSamplerParameterException(f"mirostat must be 0, 1 or 2, got {p.mirostat!r}",
                                             {"mirostat": p.mirostat})
    if p.mirostat == 0:
        unknown = [name for name in p.samplers if name not in SAMPLER_NAMES]
        if unknown:
            raise LlamaSamplerParameterException(
                f"unknown sampler {unknown[0]!r} in samplers: the chain's samplers are {', '.join(SAMPLER_NAMES)}",
                {"samplers": repr(p.samplers)})
        make = {
            "penalties": lambda: s.Penalties(p.repeat_last_n, p.repeat_penalty, p.frequency_penalty,
                                             p.presence_penalty),
            "dry": lambda: s.Dry(p.dry_multiplier, p.dry_base, p.dry_allowed_length, p.dry_penalty_last_n,
                                 tuple(p.dry_sequence_breakers)),
            "top_n_sigma": lambda: s.TopNSigma(p.top_n_sigma),
            "top_k": lambda: s.TopK(p.top_k),
            "typ_p": lambda: s.Typical(p.typical_p, p.min_keep),
            "top_p": lambda: s.TopP(p.top_p, p.min_keep),
            "min_p": lambda: s.MinP(p.min_p, p.min_keep),
            "xtc": lambda: s.Xtc(p.xtc_probability, p.xtc_threshold, p.min_keep, p.seed),
            "temperature": lambda: s.TempExt(p.temperature, p.dynatemp_range, p.dynatemp_exponent),
        }
        specs += [make[name]() for name in p.samplers]
        specs.append(s.Dist(p.seed))
    elif p.mirostat == 1:
        specs += [s.Temp(p.temperature), s.Mirostat(p.mirostat_tau, p.mirostat_eta, 100, p.seed)]
    else:
        specs += [s.Temp(p.temperature), s.MirostatV2(p.mirostat_tau, p.mirostat_eta, p.seed)]
    return specs


def within_context(p: GenerationParams, n_ctx: int) -> GenerationParams:
    """``p`` with its look-back windows (``repeat_last_n``, ``dry_penalty_last_n``) no longer than the
    context: a longer one sees no more tokens than a sequence holds, but llama.cpp allocates it whole
    when the sampler is made (a ring buffer, and DRY's counts: 10^9 asked for 8 GB, a request's way
    to exhaust the server's memory). The samples are the same."""
    def bounded(n: int) -> int:
        return n_ctx if isinstance(n, int) and not isinstance(n, bool) and n > n_ctx else n   # (others: checked later)

    if bounded(p.repeat_last_n) is p.repeat_last_n and bounded(p.dry_penalty_last_n) is p.dry_penalty_last_n:
        return p
    return replace(p, repeat_last_n=bounded(p.repeat_last_n), dry_penalty_last_n=bounded(p.dry_penalty_last_n))


def check_params(p: GenerationParams, n_vocab: int) -> None:
    """Check ``p`` as the sampler chain's set-up would (the types and ranges of every sampler's
    settings, the token ids of its bias, ``max_tokens``), without making anything native: where
    settings are read from a file (a saved session) they fail there, not at the next request."""
    if isinstance(p.max_tokens, bool) or not isinstance(p.max_tokens, int) or p.max_tokens < -1:
        raise LlamaSamplerParameterException(
            f"max_tokens must be an integer >= -1 (-1: no limit), got {p.max_tokens!r}",
            {"max_tokens": repr(p.max_tokens)})
    if p.grammar:   # the limits of its engine (llama.cpp's Grammar spec would apply all of them)
        check_grammar(p.grammar, p.grammar_engine)
    s.validate_specs(sampler_specs(replace(p, grammar=None)), n_vocab)


def dry_runs(p: GenerationParams) -> bool:
    """Whether ``p``'s chain builds llama.cpp's DRY sampler, whose set-up scans the whole vocabulary
    once per sequence breaker (``llama_sampler_init_dry``: a token's text against each breaker):
    DRY is in the chain and on (a multiplier, a look-back; a base below 1 turns it off)."""
    return (not p.greedy and p.mirostat == 0 and "dry" in p.samplers and p.dry_multiplier != 0
            and p.dry_base >= 1.0 and p.dry_penalty_last_n > 0)


def check_grammar(text: str, engine: str = "llama") -> None:
    """Validate GBNF before llama.cpp sees it: its parser loops for ~2**64 steps on a {m,n} with
    m > n, and explains other errors only on stderr. Our front end rejects both with the place.
    The limits are those of the engine ``engine`` picks for a caller's grammar
    (``grammar_engines.grammar_limits_for``): all of them on llama.cpp's, size and nesting on
    llguidance's."""
    from ..grammar.gbnf import GbnfError
    from ..grammar.limits import GrammarLimitError, check_grammar_limits

    try:
        check_grammar_limits(text, grammar_limits_for(engine))
    except GrammarLimitError:
        raise
    except GbnfError as exc:
        raise LlamaArgumentException(f"invalid grammar: {exc}", {"grammar": text[:2000]}) from exc
