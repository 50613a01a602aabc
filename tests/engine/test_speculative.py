"""Speculative decoding in the engine (SmolLM2): the target's output, whatever the drafts.

Greedy: with each draft source the tokens equal those of plain decoding. A verification decodes the
pending token and the draft in one batch, and llama.cpp's kernels give a batch's rows slightly
different logits than one-token decodes (as with the prompt cache), so two runs may part at a near
tie. How the tests tell: both runs carry logprobs (the speculative run's read from the verification
rows); where they first differ, the two runs' margins between their two choices must add up to less
than ``NEAR_TIE`` (each run saw its own token ahead of the other's; the sum is the noise between
them), else the test fails. At temperature > 0 the distribution of a verified position is the
target's own (a chi-square test over seeds against the probabilities of a plain decode).
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from llamact import (
    GenerationParams,
    LlamaEngine,
    LlamaModelException,
    ModelParams,
    SpeculativeParams,
    StopReason,
)
from llamact.engine.batched import BatchScheduler
from llamact.engine.speculative.grammar_draft import GrammarDraft
from llamact.grammar import GbnfAcceptor, parse_gbnf

pytestmark = pytest.mark.model

NEAR_TIE = 0.5
CHAT = "<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n"
COPY = CHAT.format("Repeat this list exactly, twice: alpha, bravo, charlie, delta, echo, foxtrot, golf, hotel.")
HERMES = Path(__file__).resolve().parents[2] / "vendor" / "llama.cpp" / "models" / "templates" / \
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja"
WEATHER = [{"type": "function", "function": {
    "name": "get_weather", "description": "Get the weather in a city",
    "parameters": {"type": "object", "properties": {"location": {"type": "string"},
                                                    "unit": {"type": "string", "enum": ["c", "f"]}},
                   "required": ["location", "unit"]}}}]


def greedy(max_tokens: int = 40, **changes: Any) -> GenerationParams:
    settings: dict[str, Any] = {"cache_prompt": False, "logprobs": True, "top_logprobs": 2, **changes}
    return GenerationParams(greedy=True, max_tokens=max_tokens, **settings)


@pytest.fixture(scope="module")
def engines(smollm2_path: Path) -> Iterator[Any]:
    """One engine per speculative configuration (None: plain), loaded on first use."""
    loaded: dict[Any, LlamaEngine] = {}

    def get(spec: SpeculativeParams | None = None) -> LlamaEngine:
        if spec not in loaded:
            loaded[spec] = LlamaEngine.load(smollm2_path, ModelParams(n_ctx=2048, n_threads=1, speculative=spec))
        return loaded[spec]
    yield get
    for engine in loaded.values():
        engine.close()


def margin(entry: Any, a: int, b: int) -> float:
    """How far ``a`` was ahead of ``b`` in a logprob entry (its top 2)."""
    probs = {alt.id: alt.logprob for alt in entry.top_logprobs}
    return probs.get(a, entry.logprob) - probs.get(b, min(probs.values()))


def parting(a: list[int], b: list[int], logprobs_a: list[Any], logprobs_b: list[Any]) -> int | None:
    """Where two runs' tokens first differ (None: nowhere), after checking that it is a near tie."""
    i = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), None)
    if i is not None:
        noise = margin(logprobs_a[i], a[i], b[i]) + margin(logprobs_b[i], b[i], a[i])
        assert noise < NEAR_TIE, f"the runs part at token {i} where plain chose {a[i]}, speculative {b[i]}: " \
            f"not a near tie (margins add up to {noise:.3f})"
    return i


def assert_same_or_near_tie(plain: Any, spec: Any) -> int:
    """The tokens of two runs (``GenerationResult`` with logprobs) equal, or parting at a near tie;
    returns how many tokens agree."""
    i = parting(plain.tokens, spec.tokens, plain.logprobs, spec.logprobs)
    if i is None:
        assert len(plain.tokens) == len(spec.tokens) or plain.stop_reason is not StopReason.EOG
        return min(len(plain.tokens), len(spec.tokens))
    return i


NGRAMS = {
    "ngram-simple": SpeculativeParams(types=("ngram-simple",), ngram_simple_size_n=2, ngram_simple_size_m=8),
    "ngram-map-k": SpeculativeParams(types=("ngram-map-k",), ngram_map_k_size_n=2, ngram_map_k_size_m=8),
    "ngram-mod": SpeculativeParams(types=("ngram-mod",), ngram_mod_n_match=2, ngram_mod_n_min=1, ngram_mod_n_max=8),
}


@pytest.mark.parametrize("name", list(NGRAMS))
def test_greedy_with_ngram_drafts_is_greedy_without(engines: Any, name: str) -> None:
    plain = engines().complete(COPY, greedy())
    spec = engines(NGRAMS[name]).complete(COPY, greedy())
    assert spec.timings.n_draft_accepted > 0 and spec.timings.n_draft >= spec.timings.n_draft_accepted
    assert assert_same_or_near_tie(plain, spec) >= 20


def test_a_model_drafting_for_itself_is_accepted_throughout(engines: Any, smollm2_path: Path) -> None:
    """SmolLM2 drafting for itself proposes the target's own greedy tokens: the mechanics test of the
    draft model (its cache kept in step with the target's, every position verified)."""
    engine = engines(SpeculativeParams(draft_model=smollm2_path, draft_n_max=4))
    for prompt in (COPY, CHAT.format("Write a long story about the sea.")):
        plain = engines().complete(prompt, greedy())
        spec = engine.complete(prompt, greedy())
        agreed = assert_same_or_near_tie(plain, spec)
        t = spec.timings
        assert t.n_draft > 10 and t.n_draft_accepted >= 0.9 * t.n_draft, t   # near ties aside, all of them
        assert agreed >= 20
    totals = engine.speculator.totals   # type: ignore[union-attr]
    assert totals.n_steps > 0 and totals.accepted_per_pos[0] > 0


def test_sampling_keeps_the_targets_distribution(engines: Any) -> None:
    """Temperature 4 over the top 4 tokens, 120 seeds: the second token (sampled from the verification
    batch, where the n-gram draft proposes " green" after ",") follows the target's distribution given
    the first, computed from a plain decode (chi-square, p = 0.001). Accepting drafts blindly would
    give " green" every time."""
    spec = NGRAMS["ngram-simple"]
    spec = SpeculativeParams(types=spec.types, ngram_simple_size_n=1, ngram_simple_size_m=2)
    prompt = "red, green, blue, red, green, blue, red, green, blue, red, green"
    engine = engines(spec)
    runs = Counter()
    drafted = accepted = 0
    for seed in range(120):
        chunks = list(engine.generate(prompt, GenerationParams(temperature=4.0, top_k=4, top_p=1.0, min_p=0.0,
                                                               seed=seed, max_tokens=3)))
        sampled = [c.token for c in chunks if c.token is not None] + [c.end_token for c in chunks if c.end_token]
        runs[tuple(sampled[:2])] += 1   # an end token is sampled too
        drafted += chunks[-1].timings.n_draft
        accepted += chunks[-1].timings.n_draft_accepted
    assert drafted > 30 and 0 < accepted < drafted
    firsts = Counter(run[0] for run in runs.elements() if len(run) == 2)
    plain = engines()
    chi2, df = 0.0, 0
    for first, n in firsts.most_common(2):
        stream = plain.generate([*plain.prompt_tokens(prompt), first], GenerationParams(greedy=True, max_tokens=1,
                                                                                        cache_prompt=False))
        next(stream)
        logits = plain.logits()
        stream.close()
        top = np.argsort(-logits)[:4]
        p = np.exp((logits[top] - logits[top].max()) / 4.0)
        p /= p.sum()
        seen = np.array([runs[(first, int(t))] for t in top], dtype=float)
        assert seen.sum() == n   # every second token is one of the target's top 4
        chi2 += float(((seen - n * p) ** 2 / (n * p)).sum())
        df += 3
    assert chi2 < {3: 16.27, 6: 22.46}[df], f"chi-square {chi2:.1f} on {df} degrees of freedom"   # p = 0.001


def test_grammar_drafts_keep_a_named_tool_call_valid(engines: Any) -> None:
    messages = [{"role": "user", "content": "What is the weather in Paris?"}]
    options = {"tools": WEATHER, "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
               "custom_template": HERMES.read_text()}
    spec_params = SpeculativeParams(types=("grammar", "ngram-simple"), ngram_simple_size_n=2, ngram_simple_size_m=8)
    results = []
    for engine in (engines(), engines(spec_params)):
        with engine.create(messages, params=greedy(45), **options) as stream:
            completion = stream.completion()
            results.append((stream.tokens, completion))
    (plain_tokens, plain), (tokens, spec) = results
    assert spec.timings.draft_n_accepted > 10   # the envelope, the name, the keys came as drafts
    call = spec.message.tool_calls[0]
    assert call.name == "get_weather"
    assert set(json.loads(call.arguments)) == {"location", "unit"}
    parting(plain_tokens, tokens, plain.logprobs, spec.logprobs)


def test_grammar_drafts_keep_a_json_schema_answer_valid(engines: Any) -> None:
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                                               "city": {"type": "string"}},
              "required": ["name", "age", "city"], "additionalProperties": False}
    messages = [{"role": "user", "content": "Invent a person: name, age and city, as JSON."}]
    fmt = {"type": "json_schema", "json_schema": {"name": "person", "schema": schema}}
    spec = engines(SpeculativeParams(types=("grammar",))).complete_chat(messages, params=greedy(60),
                                                                        response_format=fmt)
    plain = engines().complete_chat(messages, params=greedy(60), response_format=fmt)
    value = json.loads(spec.content)
    assert set(value) == {"name", "age", "city"} and isinstance(value["age"], int)
    assert spec.timings.draft_n_accepted > 0
    if plain.finish_reason == spec.finish_reason == "stop":
        assert json.loads(plain.content).keys() == value.keys()


def test_the_grammar_draft_leaves_out_the_token_at_the_seam(engines: Any) -> None:
    """The forced text ``{"location": "`` is drafted without its last token (the model may write the
    quote and the value's first letters as one token); where the grammar must end right after the
    forced text (``"}``), its last token is drafted too."""
    engine = engines()
    vocab = engine.model.vocab
    acceptor = GbnfAcceptor(parse_gbnf('root ::= "{\\"location\\": \\"" [a-z]+ "\\"}"'))
    draft = GrammarDraft(acceptor, vocab)
    forced = '{"location": "'
    whole = engine.tokenize(forced, add_special=False, parse_special=True)
    assert len(whole) >= 3
    tokens = draft.draft(64)
    assert tokens == whole[:-1]
    draft.feed(engine.tokenize('{"location": "paris', add_special=False))
    assert draft.draft(64) == []                       # inside the free text: nothing forced
    assert draft.alive
    end = GrammarDraft(GbnfAcceptor(parse_gbnf('root ::= "ok\\"}"')), vocab)
    assert end.draft(64) == engine.tokenize('ok"}', add_special=False, parse_special=True)


def test_a_stop_string_inside_an_accepted_run_ends_it_there(engines: Any) -> None:
    """The stop string comes out of a verified run: the text, the reason and the KV cache are those
    of the plain loop (the record of the prompt cache is kept, not cleared)."""
    params = greedy(40, stop=["golf"], cache_prompt=True)
    plain_engine, spec_engine = engines(), engines(NGRAMS["ngram-simple"])
    plain = plain_engine.complete(COPY, params)
    spec = spec_engine.complete(COPY, params)
    assert spec.stop_reason is plain.stop_reason is StopReason.STOP_STRING
    assert spec.text == plain.text and spec.tokens == plain.tokens
    assert spec.timings.n_draft_accepted > 0
    assert spec_engine.context_tokens == plain_engine.context_tokens
    assert len(spec_engine.context_tokens) == len(spec.prompt_tokens) + len(spec.tokens) - 1


def test_cancel_during_speculative_generation(engines: Any, smollm2_path: Path) -> None:
    engine = engines(SpeculativeParams(draft_model=smollm2_path, draft_n_max=4))
    seen = []
    stream = engine.generate(COPY, GenerationParams(greedy=True, max_tokens=400, cache_prompt=False))
    for chunk in stream:
        seen.append(chunk)
        if len(seen) == 12:
            threading.Thread(target=engine.cancel).start()
    assert seen[-1].stop_reason is StopReason.CANCELLED
    assert len(seen) < 400
    again = engine.complete(COPY, greedy(8))   # the engine goes on: the next generation is whole
    assert again.stop_reason is StopReason.MAX_TOKENS and len(again.tokens) == 8


def test_slots_where_some_requests_speculate_and_some_do_not(smollm2_path: Path) -> None:
    prompts = [COPY, CHAT.format("Name three colors."), CHAT.format("Count from one to ten in words.")]
    out: dict[bool, list[Any]] = {}
    for speculate in (False, True):
        spec = NGRAMS["ngram-simple"] if speculate else None
        with LlamaEngine.load(smollm2_path, ModelParams(n_ctx=3072, n_seq_max=3, n_threads=1,
                                                        speculative=spec)) as engine:
            scheduler = BatchScheduler(engine)
            try:
                streams = [scheduler.generate(p, greedy(40, speculative=i != 1)) for i, p in enumerate(prompts)]
                out[speculate] = [list(stream) for stream in streams]
            finally:
                scheduler.close()
    for i, (plain, spec) in enumerate(zip(out[False], out[True], strict=True)):
        parting([c.token for c in plain if c.token is not None], [c.token for c in spec if c.token is not None],
                [c.logprob for c in plain], [c.logprob for c in spec])
        t = spec[-1].timings
        assert (t.n_draft > 0) is (i != 1), (i, t)   # the second request does not speculate


def test_a_draft_model_of_another_vocabulary_is_refused_at_load(smollm2_path: Path, gemma3_path: Path) -> None:
    with pytest.raises(LlamaModelException, match="cannot draft for .*: the vocabulary"):
        LlamaEngine.load(smollm2_path, ModelParams(n_ctx=512, speculative=SpeculativeParams(draft_model=gemma3_path)))
