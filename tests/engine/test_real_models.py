"""llamact on the real models: tokenization, greedy parity with upstream, generation, engine state.

Greedy parity is measured against upstream's ``llama-simple`` (examples/simple/simple.cpp) built
from the same vendored tree. That program tokenizes the prompt with add_special and
parse_special, prints the prompt's pieces then each generated piece (special tokens rendered),
uses n_ctx = n_prompt + n_predict - 1, n_batch = n_prompt and a greedy sampler, stops at an
end-of-generation token or after n_predict tokens, and ends with a newline. llamact, sized the
same way, must print the very same bytes.

Expected texts are never written down here: they come from upstream, or from a first run of the
model inside the test.
"""

from __future__ import annotations

import codecs
import gc
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from llamact import (
    GenerationChunk,
    GenerationParams,
    LlamaContextException,
    LlamaEngine,
    LlamaStateException,
    ModelParams,
    StopReason,
)

pytestmark = pytest.mark.model

GREEDY = dict(greedy=True, render_special=True)

# A special token of each model's chat format.
SPECIAL = {"smollm2": "<|im_start|>", "gemma3": "<start_of_turn>"}

ROUND_TRIP_TEXTS = [
    "Hello, world!",
    "café naïve façade Ångström Ünïcödé",
    "日本語のテキスト、中文文本。한국어",
    "emoji 🙂👍🏽🇫🇷 👨\u200d👩\u200d👧 ✨",
    "a   b\t\tc    ",
    "line1\nline2\n\n\nline3\r\nend\n",
    "def f(x):\n    return {'a': [x, x**2]}  # comment\n\tpass\n",
    " leading space",
    "   three leading spaces and trailing   ",
    "\n starts with a newline",
    " ",
    "nbsp\u00a0zero\u200bwidth\ufeffbom",
    "rare: 龘 靐 齉 𠜎 𝒴",
    "x" * 300,
]

SMOLLM2_CHAT = (
    "<|im_start|>user\nWhat is 2+2? Answer briefly.<|im_end|>\n<|im_start|>assistant\n"
)


@pytest.fixture(scope="module")
def smollm2(smollm2_path: Path) -> Iterator[LlamaEngine]:
    with LlamaEngine.load(smollm2_path, ModelParams(n_ctx=512)) as engine:
        yield engine


@pytest.fixture(scope="module")
def gemma3(gemma3_path: Path) -> Iterator[LlamaEngine]:
    with LlamaEngine.load(gemma3_path, ModelParams(n_ctx=512)) as engine:
        yield engine


@pytest.fixture(scope="module", params=["smollm2", "gemma3"])
def engine(request: pytest.FixtureRequest) -> LlamaEngine:
    """Each real model's engine."""
    return request.getfixturevalue(request.param)


def _name(engine: LlamaEngine) -> str:
    return "gemma3" if engine.get_metadata()["general.architecture"] == "gemma3" else "smollm2"


def _pieces_text(engine: LlamaEngine, tokens: list[int], special: bool) -> str:
    """Concatenate token pieces through a strict incremental UTF-8 decoder."""
    dec = codecs.getincrementaldecoder("utf-8")(errors="strict")
    out = [dec.decode(engine.model.vocab.token_to_piece(t, special=special)) for t in tokens]
    out.append(dec.decode(b"", final=True))
    return "".join(out)


def _greedy(max_tokens: int, **kw: object) -> GenerationParams:
    return GenerationParams(max_tokens=max_tokens, **GREEDY, **kw)  # type: ignore[arg-type]


# -- tokenization ------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ROUND_TRIP_TEXTS, ids=lambda t: repr(t[:12]))
def test_round_trip(engine: LlamaEngine, text: str) -> None:
    vocab = engine.model.vocab
    # Both vocabularies reproduce the text exactly: SmolLM2 is byte-level BPE without
    # clean-up of spaces ("smollm" pre-tokenizer), Gemma's SentencePiece file says
    # add_space_prefix=false, so no leading space is added on encode or removed on decode.
    assert engine.get_metadata()["tokenizer.ggml.add_space_prefix"] == "false"
    tokens = vocab.tokenize(text, add_special=False, parse_special=False)
    assert vocab.detokenize(tokens) == text
    # The engine's defaults (parse and render special tokens) round-trip plain text too.
    tokens2 = engine.tokenize(text, add_special=False)
    assert engine.detokenize(tokens2) == text
    # Pieces, joined through an incremental UTF-8 decoder, make the same text.
    assert _pieces_text(engine, tokens, special=False) == text
    assert _pieces_text(engine, tokens2, special=True) == text


def test_round_trip_empty(engine: LlamaEngine) -> None:
    assert engine.tokenize("", add_special=False) == []
    assert engine.detokenize([]) == ""


def test_add_special_follows_the_vocabulary(engine: LlamaEngine) -> None:
    vocab = engine.model.vocab
    plain = engine.tokenize("Hello there", add_special=False)
    with_special = engine.tokenize("Hello there", add_special=True)
    if vocab.add_bos:  # Gemma
        assert with_special == [vocab.bos, *plain]
        assert engine.detokenize(with_special) == vocab.text(vocab.bos) + "Hello there"
        assert engine.detokenize(with_special, render_special=False) == "Hello there"
    else:  # SmolLM2
        assert with_special == plain


def test_special_token_is_parsed_only_when_asked(engine: LlamaEngine) -> None:
    vocab = engine.model.vocab
    marker = SPECIAL[_name(engine)]
    (tid,) = vocab.tokenize(marker, add_special=False, parse_special=True)
    assert vocab.text(tid) == marker
    assert vocab.is_control(tid)
    as_text = vocab.tokenize(marker, add_special=False, parse_special=False)
    assert len(as_text) > 1 and tid not in as_text
    assert vocab.detokenize(as_text) == marker

    text = f"{marker}user\nHi there{marker}"
    tokens = engine.tokenize(text, add_special=False)  # engine default: parse_special=True
    assert tokens.count(tid) == 2 and tokens[0] == tid and tokens[-1] == tid
    assert engine.detokenize(tokens, render_special=True) == text
    # Control tokens are not rendered unless asked.
    assert engine.detokenize(tokens, render_special=False) == "user\nHi there"
    assert vocab.token_to_piece(tid, special=True) == marker.encode()
    assert vocab.token_to_piece(tid, special=False) == b""
    assert _pieces_text(engine, tokens, special=True) == text


# -- greedy parity with upstream's llama-simple -----------------------------------------------

PARITY_CASES = [
    ("smollm2", "The capital of France is", 40),
    ("smollm2", SMOLLM2_CHAT, 40),  # ends with an end-of-generation token
    ("smollm2", "def fibonacci(n):", 40),
    ("gemma3", "日本の首都は", 40),  # Japanese continuation
    ("gemma3", "Rare CJK: 龘 靐 齉 𠜎", 32),  # byte-fallback tokens: pieces split characters
    ("gemma3", "Le café est", 40),
]


@pytest.mark.parametrize(
    ("model", "prompt", "n_predict"), PARITY_CASES, ids=[f"{m}-{p[:10]!r}" for m, p, _ in PARITY_CASES]
)
def test_greedy_output_matches_llama_simple(
    request: pytest.FixtureRequest, upstream_bin, model: str, prompt: str, n_predict: int
) -> None:
    path: Path = request.getfixturevalue(f"{model}_path")
    proc = subprocess.run(
        [str(upstream_bin("llama-simple")), "-m", str(path), "-n", str(n_predict), prompt],
        capture_output=True, timeout=300,
        # llama-simple runs 4 OpenMP threads whatever the core count; passive waiting keeps that
        # from spinning a busy machine to a crawl (it does not change any result).
        env={**os.environ, "OMP_WAIT_POLICY": "passive"},
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-2000:]
    # llama-simple writes raw bytes; when n_predict ends inside a character (the byte-fallback
    # case below) its output ends with an incomplete sequence, which llamact's stream flushes as
    # one U+FFFD (engine/detokenizer.py) -- exactly what a replacing decode of the bytes gives.
    upstream = proc.stdout.decode("utf-8", errors="replace")

    shared: LlamaEngine = request.getfixturevalue(model)
    prompt_tokens = shared.tokenize(prompt)  # add_special + parse_special, like llama-simple
    n_prompt = len(prompt_tokens)
    params = ModelParams(n_ctx=n_prompt + n_predict - 1, n_batch=n_prompt)
    with LlamaEngine.load(path, params) as engine:
        first = engine.complete(prompt, _greedy(n_predict))
        # (without the prompt cache: a prompt half cached is evaluated in another batch shape, which
        # may move a near tie; docs/design.md, "Caveats")
        second = engine.complete(prompt, _greedy(n_predict, cache_prompt=False))

    prompt_echo = _pieces_text(shared, prompt_tokens, special=True)
    assert prompt_echo + first.text + "\n" == upstream
    assert first.prompt_tokens == prompt_tokens
    if first.stop_reason is StopReason.EOG:
        assert len(first.tokens) < n_predict
    else:
        assert first.stop_reason is StopReason.MAX_TOKENS
        assert len(first.tokens) == n_predict
    # Determinism: a second run (same engine, memory cleared) picks the same tokens.
    assert second.tokens == first.tokens
    assert second.text == first.text
    assert second.stop_reason is first.stop_reason


def test_parity_cases_cover_eog_and_split_characters(smollm2: LlamaEngine, gemma3: LlamaEngine) -> None:
    """The parity prompts exercise what they claim to (guards the list above)."""
    r = smollm2.complete(SMOLLM2_CHAT, _greedy(40))
    assert r.stop_reason is StopReason.EOG
    chunks = list(gemma3.generate("Rare CJK: 龘 靐 齉 𠜎", _greedy(32)))
    tokens = [c.token for c in chunks if c.token is not None]
    text = "".join(c.text for c in chunks)
    assert any(ord(c) > 0xFFFF for c in text)
    assert _count_partial_pieces(gemma3, tokens) > 0
    # 32 tokens end inside a 4-byte character: only the final chunk's flush shows U+FFFD.
    raw = b"".join(gemma3.model.vocab.token_to_piece(t, special=True) for t in tokens)
    with pytest.raises(UnicodeDecodeError):
        raw.decode("utf-8")
    assert text == raw.decode("utf-8", errors="replace") and text.endswith("\ufffd")
    assert chunks[-1].text == "\ufffd" and all("\ufffd" not in c.text for c in chunks[:-1])


# -- generation behaviour ----------------------------------------------------------------------

BASE_PROMPT = "The capital of France is"


@pytest.fixture(scope="module")
def base(smollm2: LlamaEngine):
    """SmolLM2's greedy continuation of BASE_PROMPT (40 tokens): the reference for the stop tests."""
    result = smollm2.complete(BASE_PROMPT, _greedy(40))
    assert result.stop_reason is StopReason.MAX_TOKENS and len(result.tokens) == 40
    return result


def _first_k_containing(engine: LlamaEngine, tokens: list[int], stop: str) -> int:
    """The fewest leading tokens whose text contains ``stop``."""
    for k in range(1, len(tokens) + 1):
        if stop in _pieces_text(engine, tokens[:k], special=True):
            return k
    raise AssertionError(f"{stop!r} never appears")


def _check_stop(engine: LlamaEngine, base_tokens: list[int], base_text: str, stops: tuple[str, ...]) -> None:
    cut = min(base_text.find(s) for s in stops if s in base_text)
    first_stop = min((s for s in stops if s in base_text), key=base_text.find)
    chunks = list(engine.generate(BASE_PROMPT, _greedy(40, stop=stops)))
    assert chunks[-1].stop_reason is StopReason.STOP_STRING
    assert all(c.stop_reason is None for c in chunks[:-1])
    # The text is everything before the first stop string (no chunk shows any part of it) ...
    assert "".join(c.text for c in chunks) == base_text[:cut]
    # ... and generation ends with the token that completes the stop string, not later.
    k = _first_k_containing(engine, base_tokens, first_stop)
    assert [c.token for c in chunks if c.token is not None] == base_tokens[:k]


def test_stop_string_inside_one_token(smollm2: LlamaEngine, base) -> None:
    vocab = smollm2.model.vocab
    pieces = [vocab.token_to_piece(t, special=True).decode() for t in base.tokens]  # ASCII output
    j = next(i for i in range(5, len(pieces)) if len(pieces[i].strip()) >= 4)
    stop = pieces[j].strip()[1:3]
    _check_stop(smollm2, base.tokens, base.text, (stop,))
    result = smollm2.complete(BASE_PROMPT, _greedy(40, stop=(stop,)))
    assert result.stop_reason is StopReason.STOP_STRING and result.stop_reason.finish_reason == "stop"
    assert result.text == base.text[: base.text.find(stop)]
    assert result.tokens == base.tokens[: _first_k_containing(smollm2, base.tokens, stop)]


def test_stop_string_across_tokens(smollm2: LlamaEngine, base) -> None:
    vocab = smollm2.model.vocab
    pieces = [vocab.token_to_piece(t, special=True).decode() for t in base.tokens]
    j = next(i for i in range(5, len(pieces) - 1) if len(pieces[i]) >= 2 and len(pieces[i + 1]) >= 2)
    stop = pieces[j][-2:] + pieces[j + 1][:2]
    _check_stop(smollm2, base.tokens, base.text, (stop,))


def test_earliest_of_several_stop_strings_wins(smollm2: LlamaEngine, base) -> None:
    text = base.text
    a, b = text[len(text) // 3 :][:4], text[len(text) * 3 // 4 :][:5]
    assert a in text and b in text and text.find(a) != text.find(b)
    early, late = sorted((a, b), key=text.find)
    # The earlier match wins whatever the order of the stop strings.
    _check_stop(smollm2, base.tokens, text, (late, early, "no such text ~~~"))
    _check_stop(smollm2, base.tokens, text, (early, late))


def test_result_names_the_stop_string_that_matched(smollm2: LlamaEngine, base) -> None:
    """GenerationResult.stop_string says which stop string ended generation (None otherwise)."""
    text = base.text
    a, b = text[len(text) // 3 :][:4], text[len(text) * 3 // 4 :][:5]
    early, late = sorted((a, b), key=text.find)
    result = smollm2.complete(BASE_PROMPT, _greedy(40, stop=(late, early)))
    assert result.stop_reason is StopReason.STOP_STRING
    assert result.stop_string == early
    assert smollm2.complete(BASE_PROMPT, _greedy(3, stop=("~~ never ~~",))).stop_string is None


def test_stop_string_absent_changes_nothing(smollm2: LlamaEngine, base) -> None:
    result = smollm2.complete(BASE_PROMPT, _greedy(40, stop=("~~ never ~~",)))
    assert result.stop_reason is StopReason.MAX_TOKENS
    assert result.text == base.text and result.tokens == base.tokens


@pytest.mark.parametrize("n", [0, 1, 7, 23])
def test_max_tokens_is_exact(smollm2: LlamaEngine, base, n: int) -> None:
    result = smollm2.complete(BASE_PROMPT, _greedy(n))
    assert result.stop_reason is StopReason.MAX_TOKENS
    assert len(result.tokens) == n
    assert result.tokens == base.tokens[:n]
    assert result.text == _pieces_text(smollm2, base.tokens[:n], special=True)
    assert result.timings.n_generated == n
    # the prompt: evaluated (at least one token), or reused from the KV cache
    assert result.timings.n_prompt + result.timings.n_cached == len(result.prompt_tokens)
    assert result.timings.n_prompt >= 1


def test_end_of_generation_stops(smollm2: LlamaEngine) -> None:
    vocab = smollm2.model.vocab
    chunks = list(smollm2.generate(SMOLLM2_CHAT, _greedy(500)))
    final = chunks[-1]
    assert final.stop_reason is StopReason.EOG and final.finish_reason == "stop"
    assert final.token is None
    tokens = [c.token for c in chunks if c.token is not None]
    assert 0 < len(tokens) < 500
    assert not any(vocab.is_eog(t) for t in tokens)
    text = "".join(c.text for c in chunks)
    assert text.strip() and "<|im_end|>" not in text and "<|endoftext|>" not in text


def test_stream_equals_complete(engine: LlamaEngine) -> None:
    prompt = "Once upon a time"
    params = _greedy(32)
    chunks: list[GenerationChunk] = list(engine.generate(prompt, params))
    result = engine.complete(prompt, params)
    assert all(c.stop_reason is None for c in chunks[:-1])
    final = chunks[-1]
    assert final.stop_reason is result.stop_reason and final.timings is not None
    tokens = [c.token for c in chunks if c.token is not None]
    assert tokens == result.tokens
    assert len(chunks) == len(tokens) + 1  # one chunk per token, then the final one
    assert "".join(c.text for c in chunks) == result.text
    assert final.timings.n_generated == len(tokens)
    assert final.timings.n_prompt + final.timings.n_cached == len(engine.tokenize(prompt))


def test_context_full_stops_cleanly(smollm2_path: Path) -> None:
    with LlamaEngine.load(smollm2_path, ModelParams(n_ctx=64)) as engine:
        n_ctx = engine.context.n_ctx  # llama.cpp pads the context to a multiple of 256
        assert n_ctx >= 64
        filler = engine.tokenize("The quick brown fox jumps over the lazy dog. " * 60, add_special=False)
        prompt = filler[: n_ctx - 20]
        params = GenerationParams(greedy=True, max_tokens=-1)
        results = [engine.complete(prompt, params) for _ in range(2)]
        for result in results:
            assert result.stop_reason is StopReason.CONTEXT_FULL
            assert result.stop_reason.finish_reason == "length"
            # Every cell is used: the last token is sampled from the logits of position n_ctx - 1
            # (llama-simple sizes n_ctx = n_prompt + n_predict - 1 for n_predict tokens likewise).
            assert len(prompt) + len(result.tokens) == n_ctx + 1
        assert results[0].tokens == results[1].tokens
        with pytest.raises(LlamaContextException):
            engine.complete(filler[: n_ctx + 1], _greedy(4))
        # The engine still works after a full context and a refused prompt.
        again = engine.complete(prompt, _greedy(5))
        assert again.tokens == results[0].tokens[:5]


def test_seeded_sampling_is_reproducible(smollm2: LlamaEngine) -> None:
    prompt = "My favourite thing about summer is"

    def sample(seed: int) -> list[int]:
        return smollm2.complete(prompt, GenerationParams(temperature=1.0, seed=seed, max_tokens=16)).tokens

    runs = {seed: sample(seed) for seed in (11, 22, 33, 44)}
    for seed in (11, 33):
        assert sample(seed) == runs[seed], f"seed {seed} gave a different sequence on a second run"
    # Four independent seeds at temperature 1 over 16 tokens: identical outputs for all four
    # would mean the seed is ignored (or sampling is greedy).
    assert len({tuple(t) for t in runs.values()}) >= 2
    greedy = smollm2.complete(prompt, _greedy(16)).tokens
    assert any(t != greedy for t in runs.values())


def _count_partial_pieces(engine: LlamaEngine, tokens: list[int]) -> int:
    """How many tokens' pieces are not valid UTF-8 on their own."""
    n = 0
    for t in tokens:
        try:
            engine.model.vocab.token_to_piece(t, special=True).decode("utf-8")
        except UnicodeDecodeError:
            n += 1
    return n


@pytest.mark.parametrize(
    ("model", "prompt"),
    [("gemma3", "Rare CJK: 龘 靐 齉 𠜎"), ("smollm2", "日本の首都は")],
    ids=["gemma3", "smollm2"],
)
def test_chunks_are_whole_characters(request: pytest.FixtureRequest, model: str, prompt: str) -> None:
    engine: LlamaEngine = request.getfixturevalue(model)
    chunks = list(engine.generate(prompt, _greedy(40)))
    tokens = [c.token for c in chunks if c.token is not None]
    # The output really has characters split over several tokens.
    assert _count_partial_pieces(engine, tokens) > 0
    # Each chunk carries exactly the characters completed by its token (the model's bytes are valid
    # UTF-8 up to where max_tokens may cut a character: that tail is the final chunk's one U+FFFD).
    dec = codecs.getincrementaldecoder("utf-8")(errors="strict")
    per_token = [dec.decode(engine.model.vocab.token_to_piece(t, special=True)) for t in tokens]
    cut_tail = dec.getstate()[0]
    assert any(ord(c) > 0x7F for c in "".join(per_token))
    token_chunks = [c for c in chunks if c.token is not None]
    for c in token_chunks:
        assert "\ufffd" not in c.text
        assert not any(0xD800 <= ord(ch) <= 0xDFFF for ch in c.text)
        c.text.encode("utf-8")  # strict: fails on lone surrogates
    assert [c.text for c in token_chunks] == per_token
    assert chunks[-1].text == ("\ufffd" if cut_tail else "")


# -- engine state ------------------------------------------------------------------------------


def test_sequential_generations_are_independent(smollm2: LlamaEngine, base) -> None:
    other = smollm2.complete("Write a haiku about the sea.", _greedy(24))
    again = smollm2.complete(BASE_PROMPT, _greedy(40))
    assert again.tokens == base.tokens and again.text == base.text
    assert smollm2.complete("Write a haiku about the sea.", _greedy(24)).tokens == other.tokens


def test_second_generate_while_streaming_raises(smollm2: LlamaEngine, base) -> None:
    stream = smollm2.generate(BASE_PROMPT, _greedy(40))
    first = next(stream)
    assert first.token == base.tokens[0]
    with pytest.raises(LlamaStateException):
        smollm2.generate("Hello", _greedy(4))
    with pytest.raises(LlamaStateException):
        smollm2.complete("Hello", _greedy(4))
    # The refused calls did not disturb the running stream.
    rest = list(stream)
    assert [first.token] + [c.token for c in rest if c.token is not None] == base.tokens
    assert first.text + "".join(c.text for c in rest) == base.text
    # Finished: the engine is free again.
    assert smollm2.complete(BASE_PROMPT, _greedy(40)).tokens == base.tokens


def test_closing_a_stream_early_releases_the_engine(smollm2: LlamaEngine, base) -> None:
    stream = smollm2.generate("Write a haiku about the sea.", _greedy(40))
    for _ in range(3):
        next(stream)
    stream.close()
    result = smollm2.complete(BASE_PROMPT, _greedy(40))
    assert result.tokens == base.tokens and result.text == base.text


def test_closing_an_unstarted_stream_releases_the_engine(smollm2: LlamaEngine, base) -> None:
    stream = smollm2.generate(BASE_PROMPT, _greedy(40))
    stream.close()  # never iterated
    assert list(stream) == []  # a closed stream yields nothing more
    result = smollm2.complete(BASE_PROMPT, _greedy(40))
    assert result.tokens == base.tokens


def test_dropping_a_stream_releases_the_engine(smollm2: LlamaEngine, base) -> None:
    stream = smollm2.generate(BASE_PROMPT, _greedy(40))
    next(stream)
    del stream
    gc.collect()
    unstarted = smollm2.generate(BASE_PROMPT, _greedy(40))
    del unstarted
    gc.collect()
    with smollm2.generate(BASE_PROMPT, _greedy(40)) as stream:
        next(stream)
    assert smollm2.complete(BASE_PROMPT, _greedy(40)).tokens == base.tokens
