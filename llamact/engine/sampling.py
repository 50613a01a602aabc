"""GenerationParams -> a sampler chain in upstream's default order (common/sampling.cpp)."""

from __future__ import annotations

from ..errors import LlamaInferenceException, LlamaSamplerParameterException
from ..native import sampler as s
from .params import GenerationParams

# the chain below, between the logit bias and the selecting sampler, by llama.cpp's names for its
# samplers (llama-server's /props "samplers"); keep in step with sampler_specs
SAMPLER_NAMES = ("penalties", "dry", "top_n_sigma", "top_k", "typ_p", "top_p", "min_p", "xtc", "temperature")


def sampler_specs(
    p: GenerationParams, dry_seq_breakers: tuple[str, ...] = ("\n", ":", '"', "*")
) -> list[s.SamplerSpec]:
    """Grammar and logit bias first, then penalties, DRY, top-n-sigma, top-k, typical, top-p,
    min-p, XTC, temperature, and finally the selecting sampler (dist, mirostat or greedy)."""
    specs: list[s.SamplerSpec] = []
    if p.grammar:
        check_grammar(p.grammar)
        specs.append(s.Grammar(p.grammar))
    if p.logit_bias:
        specs.append(s.LogitBias(dict(p.logit_bias)))
    if p.greedy:
        specs.append(s.Greedy())
        return specs
    if p.mirostat not in (0, 1, 2):
        raise LlamaSamplerParameterException(f"mirostat must be 0, 1 or 2, got {p.mirostat!r}",
                                             {"mirostat": p.mirostat})
    if p.mirostat == 0:
        specs += [
            s.Penalties(p.repeat_last_n, p.repeat_penalty, p.frequency_penalty, p.presence_penalty),
            s.Dry(p.dry_multiplier, p.dry_base, p.dry_allowed_length, p.dry_penalty_last_n, dry_seq_breakers),
            s.TopNSigma(p.top_n_sigma),
            s.TopK(p.top_k),
            s.Typical(p.typical_p, p.min_keep),
            s.TopP(p.top_p, p.min_keep),
            s.MinP(p.min_p, p.min_keep),
            s.Xtc(p.xtc_probability, p.xtc_threshold, p.min_keep, p.seed),
            s.TempExt(p.temperature, p.dynatemp_range, p.dynatemp_exponent),
            s.Dist(p.seed),
        ]
    elif p.mirostat == 1:
        specs += [s.Temp(p.temperature), s.Mirostat(p.mirostat_tau, p.mirostat_eta, 100, p.seed)]
    else:
        specs += [s.Temp(p.temperature), s.MirostatV2(p.mirostat_tau, p.mirostat_eta, p.seed)]
    return specs


def check_grammar(text: str) -> None:
    """Validate GBNF before llama.cpp sees it: its parser loops for ~2**64 steps on a {m,n} with
    m > n, and explains other errors only on stderr. Our front end rejects both with the place."""
    from ..grammar.gbnf import GbnfError
    from ..grammar.limits import GrammarLimitError, check_grammar_limits

    try:
        check_grammar_limits(text)
    except GrammarLimitError:
        raise
    except GbnfError as exc:
        raise LlamaInferenceException(f"invalid grammar: {exc}", {"grammar": text[:2000]}) from exc
