"""Text and token ids crossing into native code: typed errors, never silent truncation.

A NUL in text llama.cpp reads as a C string would cut it short without a word; a lone surrogate
has no UTF-8 form (UnicodeEncodeError); a token id that is not an integer would reach ctypes
(TypeError) or wrap around. Native calls that answer "the buffer is too small, retry" are
checked on the retry too (simulated here with fake functions that misbehave).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from llamact import GenerationParams, LlamaEngine, ModelParams
from llamact.errors import LlamaInferenceException, LlamaModelException, LlamaRequestException, LlamaStateException
from llamact.native import sampler as s
from llamact.native.context import Batch, Context, ContextOptions
from llamact.native.model import Model

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def engine(smollm2_path: Path) -> Iterator[LlamaEngine]:
    with LlamaEngine.load(smollm2_path, ModelParams(n_ctx=256, n_threads=2)) as e:
        yield e


@pytest.fixture(scope="module")
def model(engine: LlamaEngine) -> Model:
    return engine.model


# -- NUL characters and lone surrogates -------------------------------------------------------------

NUL, SURROGATE = "before\x00after", "before\ud800after"


def test_a_nul_in_chat_messages_is_text(engine: LlamaEngine) -> None:
    # as upstream: the JSON string carries the NUL, the template renders it, the tokenizer reads it
    assert NUL in engine.chat_template([{"role": "user", "content": NUL}]).prompt


def test_a_lone_surrogate_in_chat_messages_is_a_typed_error(engine: LlamaEngine) -> None:
    for message in ({"role": "user", "content": SURROGATE}, {"role": SURROGATE, "content": "hi"}):
        with pytest.raises(LlamaRequestException, match="lone surrogate"):   # a malformed request
            engine.chat_template([message])


def test_a_lone_surrogate_in_a_chat_template_is_a_typed_error(engine: LlamaEngine) -> None:
    from llamact.jinja import JinjaSyntaxError

    with pytest.raises(JinjaSyntaxError, match="lone surrogate"):
        engine.chat_template([{"role": "user", "content": "hi"}], custom_template="{{ 'x' }}" + "\ud800")


@pytest.mark.parametrize("text", [NUL, SURROGATE], ids=["nul", "surrogate"])
@pytest.mark.parametrize(
    ("make", "name"),
    [
        (lambda t: s.Grammar(f'root ::= "{t}"'), "Grammar.grammar"),
        (lambda t: s.Grammar('root ::= "a"', root=t), "Grammar.root"),
        (lambda t: s.Grammar('root ::= "a"', trigger_patterns=(t,)), "Grammar.trigger_patterns"),
        (lambda t: s.Dry(multiplier=0.8, seq_breakers=("\n", t)), "Dry.seq_breakers"),
    ],
)
def test_sampler_text(model: Model, text: str, make: Callable[[str], s.SamplerSpec], name: str) -> None:
    with pytest.raises(LlamaInferenceException) as info:
        s.SamplerChain(model, [make(text), s.Greedy()])
    assert name in str(info.value)


@pytest.mark.parametrize("text", [NUL, SURROGATE], ids=["nul", "surrogate"])
def test_model_metadata_keys_and_template_names(model: Model, text: str) -> None:
    assert model.metadata_value("general.name")  # the prefix of the bad key is a real key
    with pytest.raises(LlamaModelException, match="metadata key"):
        model.metadata_value("general.name" + text)
    with pytest.raises(LlamaModelException, match="template name"):
        model.template_source("tool_use" + text)


def test_state_file_paths(tmp_path: Path, engine: LlamaEngine) -> None:
    path = tmp_path / "state.bin"
    bad = str(path) + "\x00.ignored"
    with pytest.raises(LlamaStateException, match="NUL"):
        engine.context.save_state(bad, [1, 2])
    assert not path.exists()  # not saved under the name before the NUL
    engine.context.save_state(path, [1, 2])
    with pytest.raises(LlamaStateException, match="NUL"):
        engine.context.load_state(bad)


def test_prompts_keep_nul_and_refuse_surrogates(engine: LlamaEngine) -> None:
    # llama_tokenize takes a length: a NUL in a prompt is text like any other, not an end
    with_nul = engine.tokenize("a\x00b", add_special=False)
    assert with_nul != engine.tokenize("a", add_special=False) and len(with_nul) == 3
    assert engine.detokenize(with_nul) == "a\x00b"
    with pytest.raises(LlamaInferenceException, match="surrogate"):
        engine.complete("a\udfffb", GenerationParams(max_tokens=1))


# -- token ids that are not integers ----------------------------------------------------------------

NOT_IDS = ["5", 5.0, 2.5, None, True, b"5", math.nan]


@pytest.mark.parametrize("bad", NOT_IDS, ids=repr)
def test_token_ids_must_be_integers(engine: LlamaEngine, model: Model, bad: Any) -> None:
    vocab = model.vocab
    for call in (
        lambda: engine.detokenize([1, bad]),
        lambda: engine.complete([1, bad], GenerationParams(max_tokens=1)),
        lambda: vocab.detokenize([bad]),
        lambda: vocab.token_to_piece(bad),
        lambda: vocab.is_eog(bad),
        lambda: vocab.text(bad),
        lambda: s.SamplerChain(model, [s.Grammar('root ::= "a"', trigger_tokens=(bad,)), s.Greedy()]),
        lambda: s.SamplerChain(model, [s.Greedy()]).accept(bad),
    ):
        with pytest.raises(LlamaInferenceException) as info:
            call()
        assert repr(bad) in str(info.value) or "integer" in str(info.value)
    stream = engine.generate([1], GenerationParams(max_tokens=1, greedy=True))  # not left busy
    stream.close()


@pytest.mark.parametrize("bad", NOT_IDS, ids=repr)
def test_batch_fields_must_be_integers(engine: LlamaEngine, bad: Any) -> None:
    with Batch(engine.context, 4) as batch:
        for call in (
            lambda: batch.add(bad, 0),
            lambda: batch.add(1, bad),
            lambda: batch.add(1, 0, seq_ids=(bad,)),
            lambda: batch.set_sequence([1, bad], 0),
            lambda: batch.set_sequence([1], bad),
        ):
            with pytest.raises(LlamaInferenceException, match="integer"):
                call()
        with pytest.raises(LlamaInferenceException, match="32 bits"):
            batch.add(2**40, 0)  # ctypes would silently keep the low 32 bits
        assert batch.n_tokens == 0


def test_a_bytes_prompt_is_text_not_token_ids(engine: LlamaEngine) -> None:
    params = GenerationParams(greedy=True, max_tokens=3)
    as_text = engine.complete("Hello", params)
    assert engine.complete(b"Hello", params).prompt_tokens == as_text.prompt_tokens != list(b"Hello")
    assert engine.complete(bytearray(b"Hello"), params).tokens == as_text.tokens


def test_integer_like_token_ids_are_accepted(engine: LlamaEngine) -> None:
    numpy = pytest.importorskip("numpy")
    ids = engine.tokenize("Hello world", add_special=False)
    assert engine.detokenize(numpy.array(ids, dtype=numpy.int64).tolist()) == "Hello world"
    assert engine.detokenize([numpy.int32(t) for t in ids]) == "Hello world"


# -- native calls that misbehave on their retry -----------------------------------------------------


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Callable[[str, Callable[..., int]], None]:
    """Replace one libllama function for the test."""
    from llamact.native._library import native

    def install(name: str, fn: Callable[..., int]) -> None:
        monkeypatch.setattr(native().llama, name, fn)

    return install


def test_token_to_piece_that_never_fits(model: Model, fake: Any) -> None:
    fake("llama_token_to_piece", lambda *_args: -100)  # "I need 100 bytes", every time
    with pytest.raises(LlamaInferenceException, match="could not render token 42"):
        model.vocab.token_to_piece(42)


def test_detokenize_that_never_fits(model: Model, fake: Any) -> None:
    fake("llama_detokenize", lambda *_args: -5)
    with pytest.raises(LlamaInferenceException, match="detokenization failed"):
        model.vocab.detokenize([1, 2, 3])


def test_tokenize_that_keeps_growing(model: Model, fake: Any) -> None:
    sizes = iter([-1000, -2000])
    fake("llama_tokenize", lambda *_args: next(sizes))
    with pytest.raises(LlamaInferenceException, match="tokenization failed"):
        model.vocab.tokenize("hello")


def test_c_string_that_keeps_growing(model: Model, fake: Any) -> None:
    lengths = iter([300, 600])  # the second answer does not fit the buffer the first asked for
    fake("llama_model_desc", lambda _model, _buf, _size: next(lengths))
    with pytest.raises(LlamaModelException, match="inconsistent lengths reading the model description"):
        model.description  # noqa: B018


def test_c_string_read_again_in_a_larger_buffer(model: Model) -> None:
    # the real retry path, with a first buffer far too small for the description
    from llamact.native.model import _read_c_string

    description = model.description
    assert len(description) > 8
    with model.pinned() as ptr:
        again = _read_c_string(lambda b, n: model._lib.llama_model_desc(ptr, b, n), "the description", size=8)
    assert again == description


def test_context_from_a_closed_model_is_refused(smollm2_path: Path) -> None:
    m = Model(smollm2_path)
    m.close()
    with pytest.raises(LlamaStateException, match="closed"):
        Context(m, ContextOptions(n_ctx=64))
