"""What llamact.compat.Llama refuses, and that it says why: an option llamact cannot honour is a
LlamaUnsupportedException naming it (never taken and ignored), unless it is at llama-cpp-python's
default; llamact's own ModelParams fields pass through the keywords."""

from __future__ import annotations

import pytest

from llamact.compat import Llama, LlamaGrammar
from llamact.errors import LlamaException, LlamaUnsupportedException

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def llm(smollm2_path):
    with Llama(str(smollm2_path), n_ctx=512, n_threads=2, verbose=False) as model:
        yield model


@pytest.mark.parametrize(("options", "named"), [
    ({"use_mlock": True}, "use_mlock"),
    ({"kv_overrides": {"a": 1}}, "kv_overrides"),
    ({"rope_freq_base": 10000.0}, "rope_freq_base"),
    ({"draft_model": object()}, "draft_model"),
    ({"chat_handler": object()}, "chat_handler"),
    ({"numa": True}, "numa"),
    ({"lora_base": "base.gguf"}, "lora_base"),
    ({"chat_format": "llama-2"}, "chat_format"),
    ({"type_k": 99}, "type_k"),
    ({"split_mode": 7}, "split_mode"),
    ({"pooling_type": 9}, "pooling_type"),
    ({"n_gpu_layer": 10}, "n_gpu_layer"),        # misspelt: not silently dropped as **kwargs
])
def test_an_option_llamact_cannot_honour_is_refused_by_name(smollm2_path, options, named):
    with pytest.raises(LlamaUnsupportedException) as caught:
        Llama(str(smollm2_path), verbose=False, **options)
    assert named in str(caught.value) and caught.value.details.get("option", named) == named


def test_options_at_their_default_and_model_params_fields_are_accepted(smollm2_path):
    spelt_out = dict(use_mlock=False, kv_overrides=None, rope_freq_base=0.0, offload_kqv=True, numa=False,
                     draft_model=None, chat_handler=None, logits_all=True, embedding=True, type_k=8, type_v=1)
    with Llama(str(smollm2_path), n_ctx=256, verbose=False, n_seq_max=1, **spelt_out) as model:
        params = model.engine.params
        assert (params.type_k, params.type_v, params.n_ctx, params.n_gpu_layers) == ("q8_0", "f16", 256, 0)


def test_chat_format_chatml_is_the_built_in_template(smollm2_path, llm):
    # SmolLM2's own template adds its default system prompt; the built-in ChatML one does not
    ask = [{"role": "user", "content": "Hi"}]
    assert "named SmolLM" in llm.engine.chat_template(ask).prompt
    with Llama(str(smollm2_path), n_ctx=256, verbose=False, chat_format="chatml") as model:
        prompt = model.engine.chat_template(ask).prompt
    assert prompt == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"


@pytest.mark.parametrize(("call", "named"), [
    (lambda m: m.create_completion("a", suffix="b"), "suffix"),
    (lambda m: m.create_completion("a", tfs_z=0.5), "tfs_z"),
    (lambda m: m.create_completion("a", echo=True, logprobs=2), "echo"),
    (lambda m: m.create_chat_completion([{"role": "user", "content": "a"}], tfs_z=0.9), "tfs_z"),
])
def test_a_call_option_llamact_cannot_honour_is_refused(llm, call, named):
    with pytest.raises(LlamaUnsupportedException, match=named):
        call(llm)
    assert llm.create_completion("a", max_tokens=1)["choices"][0]["finish_reason"] in ("stop", "length")


def test_from_pretrained_wants_an_exact_file_name():
    with pytest.raises(LlamaUnsupportedException, match="exact name"):
        Llama.from_pretrained("org/repo", "*Q4_K_M.gguf")


def test_bad_grammars_and_requests_are_llama_exceptions(llm):
    with pytest.raises(LlamaException, match="line"):
        LlamaGrammar.from_string('root ::= "unterminated')
    with pytest.raises(LlamaException):
        llm.create_chat_completion([{"role": "user", "content": "a"}],
                                   tools=[{"type": "function", "function": {"name": "f", "parameters": {}}}],
                                   tool_choice={"type": "function", "function": {"name": "g"}})
    with pytest.raises(LlamaException):
        llm.create_completion("x " * 600)   # more than the 512-token context


def test_n_ctx_0_is_the_models_training_context(smollm2_path):
    # llama-cpp-python's (and llama.cpp's) meaning; llama_context_default_params() would say 512
    with Llama(str(smollm2_path), n_ctx=0, verbose=False) as model:
        assert model.n_ctx() == int(model.metadata["llama.context_length"]) > 512


def test_prompt_lookup_decoding_runs_as_llama_cpps_ngram_simple(smollm2_path):
    class LlamaPromptLookupDecoding:   # llama_cpp.llama_speculative's class, as llamact reads it
        max_ngram_size = 2
        num_pred_tokens = 8

    prompt = "Repeat: one two three four five six seven eight. Repeat: one two three four"
    with Llama(str(smollm2_path), n_ctx=512, n_threads=1, verbose=False,
               draft_model=LlamaPromptLookupDecoding()) as model:
        spec = model.engine.params.speculative
        assert spec.types == ("ngram-simple",) and (spec.ngram_simple_size_n, spec.ngram_simple_size_m) == (2, 8)
        model.create_completion(prompt, max_tokens=16, temperature=0)
        assert model.engine.speculator.totals.n_steps > 0


def test_llama_cpp_names_are_importable_from_the_top_level():
    """Code written as ``llama_cpp.Llama(...)`` / ``llama_cpp.LlamaGrammar.from_string(...)`` runs with
    ``import llamact as llama_cpp`` (LlamaGrammar was only in llamact.compat)."""
    import llamact as llama_cpp

    assert llama_cpp.Llama is Llama and llama_cpp.LlamaGrammar is LlamaGrammar
    assert "LlamaGrammar" in llama_cpp.__all__
    assert llama_cpp.LlamaGrammar.from_string('root ::= "yes" | "no"')


def test_required_through_a_template_without_a_tool_call_format_is_refused(llm):
    """As the server and ``llamact chat`` refuse it (docs/design.md deviation 15), not answered in text;
    a named function still gets llama-cpp-python's schema-constrained call (its documented behaviour)."""
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
    messages = [{"role": "user", "content": "Weather in Paris?"}]
    with pytest.raises(LlamaUnsupportedException, match="has no tool-call format"):
        llm.create_chat_completion(messages=messages, tools=tools, tool_choice="required", max_tokens=8)
    named = llm.create_chat_completion(messages=messages, tools=tools, max_tokens=48, temperature=0,
                                       tool_choice={"type": "function", "function": {"name": "get_weather"}})
    assert named["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "get_weather"
