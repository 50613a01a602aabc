"""GenerationParams -> a sampler chain in upstream's default order (common/sampling.cpp)."""

from __future__ import annotations

from ..errors import LlamaInferenceException, LlamaSamplerParameterException
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
        raise LlamaInferenceException(f"invalid grammar: {exc}", {"grammar": text[:2000]}) from exc
