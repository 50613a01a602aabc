"""What llamact reads from a .litertlm bundle without the runtime, and the decisions made from it:
the file reader and its errors, the template registry and choice, the sampler mapping, the routing
of a request. None of these needs litert-lm-api."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from llamact import ChatRequest, GenerationParams, LlamaModelException, LlamaUnsupportedException
from llamact.backends.litert import (
    FAMILIES,
    PASS_THROUGH,
    choose_template,
    conversation_call,
    family_for,
    read_bundle,
    refuse_unsupported,
    runtime_sampling,
    vocab_size,
)
from llamact.chat.templates import CHATML_TEMPLATE, compile_chat_template

SMOLLM2_TEMPLATE_START = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
DEFAULTS = {name: getattr(GenerationParams(), name) for name in GenerationParams.__dataclass_fields__}


def test_the_bundle_says_its_template_model_type_and_limits(tiny_bundle: Path) -> None:
    info = read_bundle(tiny_bundle)
    assert info.version[0] == 1
    assert info.template is not None and info.template.startswith(SMOLLM2_TEMPLATE_START)
    assert "message['content'] + '<|im_end|>'" in info.template   # the concatenating shape of issue 29
    assert info.model_type == "generic"
    assert info.max_num_tokens == 512
    assert {s.type for s in info.sections} >= {"llm_metadata", "hf_tokenizer_zlib", "tflite_model"}
    assert vocab_size(info) == 49152


def _copy(tmp_path: Path, data: bytes) -> Path:
    path = tmp_path / "bad.litertlm"
    path.write_bytes(data)
    return path


def test_a_file_that_is_not_a_bundle_says_so(tmp_path: Path, smollm2_path: Path) -> None:
    with pytest.raises(LlamaModelException, match="does not start with LITERTLM.*GGUF"):
        read_bundle(_copy(tmp_path, smollm2_path.read_bytes()[:4096]))


@pytest.mark.parametrize("cut", [20, 4000, 40000, 1_000_000])
def test_a_truncated_bundle_says_download_again(tmp_path: Path, tiny_bundle: Path, cut: int) -> None:
    with pytest.raises(LlamaModelException, match="truncated.*again"):
        read_bundle(_copy(tmp_path, tiny_bundle.read_bytes()[:cut]))


def test_an_unknown_format_version_says_what_to_install(tmp_path: Path, tiny_bundle: Path) -> None:
    data = bytearray(tiny_bundle.read_bytes()[:64 * 1024])
    struct.pack_into("<I", data, 8, 2)
    with pytest.raises(LlamaModelException, match="format version 2.*install"):
        read_bundle(_copy(tmp_path, bytes(data)))


def test_corrupt_metadata_is_refused_before_the_runtime_sees_it(tmp_path: Path, tiny_bundle: Path) -> None:
    data = bytearray(tiny_bundle.read_bytes())
    data[32:40] = b"\xff" * 8          # the FlatBuffer's root offset
    with pytest.raises(LlamaModelException, match="header does not decode"):
        read_bundle(_copy(tmp_path, bytes(data)))
    data = bytearray(tiny_bundle.read_bytes())
    llm = next(s for s in read_bundle(tiny_bundle).sections if s.type == "llm_metadata")
    data[llm.begin:llm.begin + 4] = b"\x0f\xff\xff\xff"   # a field of wire type 7
    with pytest.raises(LlamaModelException, match="LLM metadata does not decode"):
        read_bundle(_copy(tmp_path, bytes(data)))


# -- the registry and the choice of template ----------------------------------------------------


@pytest.mark.parametrize(("name", "family"), [
    ("gemma-4-E2B-it.litertlm", "gemma4"), ("Gemma4_E4B.litertlm", "gemma4"),
    ("gemma-3n-E2B-it-int4.litertlm", "gemma3n"),
    ("gemma3-1b-it-int4.litertlm", "gemma"), ("Gemma-2-2b.litertlm", "gemma"), ("Qwen3.5-0.8B.litertlm", "qwen3_5"),
    ("Qwen3-0.6B.litertlm", "qwen3"), ("qwen_3_0.6b.litertlm", "qwen3"), ("Qwen2.5-1.5B-Instruct.litertlm", "qwen2_5"),
    ("smollm2.litertlm", None), ("model.litertlm", None),
])
def test_the_registry_matches_the_file_name_most_specific_first(name: str, family: str | None) -> None:
    found = family_for(Path(name))
    assert (found.name if found else None) == family


def test_a_declared_model_type_identifies_a_renamed_bundle() -> None:
    found = family_for(Path("renamed.litertlm"), "qwen3")
    assert found is not None and found.name == "qwen3"
    assert family_for(Path("renamed.litertlm"), "generic") is None


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.name)
def test_every_registry_template_compiles_in_llamact(family: object) -> None:
    compile_chat_template(family.template())   # type: ignore[attr-defined]


def test_the_template_choice_order(tiny_bundle: Path, tmp_path: Path) -> None:
    info = read_bundle(tiny_bundle)
    embedded = choose_template(info, None)
    assert embedded.source == embedded.runtime_source == info.template and "jinja_prompt_template" in embedded.origin
    override = choose_template(info, "{{ messages[0]['content'] }}")
    assert override.source == override.runtime_source == "{{ messages[0]['content'] }}"
    assert override.origin == "ModelParams.chat_template"
    empty = choose_template(info, "")   # LiteRT-LM: an empty override replaces the template with none
    assert empty.source == empty.runtime_source == PASS_THROUGH
    assert choose_template(info, "chatml").source == CHATML_TEMPLATE
    from dataclasses import replace

    qwen = choose_template(replace(info, path=tmp_path / "Qwen3-0.6B.litertlm"), None)
    assert qwen.family is not None and qwen.source == qwen.runtime_source == qwen.family.template()
    gemma = choose_template(replace(info, path=tmp_path / "gemma-4-E2B.litertlm"), None)
    assert gemma.source == info.template    # other families keep the bundle's own template
    single = choose_template(replace(info, path=tmp_path / "gemma-4-E2B.litertlm",
                                     template="{% if is_appending_to_prefill %}x{% endif %}"), None)
    assert single.family is not None and single.source == single.family.template() and single.runtime_source is None
    bare = choose_template(replace(info, template=None), None)
    assert bare.source == CHATML_TEMPLATE and bare.runtime_source is None


# -- sampling --------------------------------------------------------------------------------------


def _sampling(**changes: object) -> object:
    values = dict(DEFAULTS, **changes)
    return runtime_sampling(values, DEFAULTS)


def test_the_runtime_sampler_takes_top_k_top_p_temperature_and_seed() -> None:
    s = _sampling(temperature=0.7, top_k=20, top_p=0.9, seed=5, max_tokens=12, stop=["END"])
    assert s.sampler == {"top_k": 20, "top_p": 0.9, "temperature": 0.7, "seed": 5}   # type: ignore[attr-defined]
    assert s.max_output_tokens == 12 and s.stop == ("END",)   # type: ignore[attr-defined]
    greedy = _sampling(temperature=0.0)
    assert greedy.sampler["top_k"] == 1 and greedy.sampler["temperature"] == 0.0   # type: ignore[attr-defined]
    assert _sampling(max_tokens=-1).max_output_tokens is None   # type: ignore[attr-defined]
    penalties = _sampling(repeat_penalty=1.3, repeat_last_n=-1)
    assert penalties.repetition == {"repetition_penalty": 1.3, "frequency_penalty": 0.0,   # type: ignore[attr-defined]
                                    "presence_penalty": 0.0, "window_size": 0}


@pytest.mark.parametrize("field,value", [("min_p", 0.1), ("mirostat", 2), ("typical_p", 0.5), ("dry_multiplier", 0.8),
                                         ("xtc_probability", 0.5), ("grammar", "root ::= \"a\""), ("logprobs", True),
                                         ("logit_bias", {5: 2.0}), ("samplers", ("top_k",))])
def test_a_sampler_field_the_runtime_lacks_is_refused_by_name(field: str, value: object) -> None:
    with pytest.raises(LlamaUnsupportedException, match=field):
        _sampling(**{field: value})


def test_a_ban_is_a_logit_bias_the_runtime_can_apply() -> None:
    assert _sampling(logit_bias={7: float("-inf")}).suppress == (7,)   # type: ignore[attr-defined]


# -- routing a chat request --------------------------------------------------------------------------

USER = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}


def _route(messages: object = USER, parses_tools: bool = False, **options: object) -> tuple[object, str]:
    return conversation_call(ChatRequest(messages, **options), runtime_parses_tools=parses_tools, has_template=True)


def test_an_eligible_request_becomes_a_conversation() -> None:
    call, reason = _route(tools=[TOOL], chat_template_kwargs={"x": 1}, enable_thinking=False)
    assert reason == "" and call is not None
    assert call.preface == [{"role": "system", "content": "Be brief."}]   # type: ignore[attr-defined]
    assert call.message == {"role": "user", "content": "Hi"}   # type: ignore[attr-defined]
    assert call.tools == [TOOL | {"function": {**TOOL["function"], "description": ""}}]   # type: ignore[attr-defined]
    assert call.extra_context == {"x": 1, "enable_thinking": False}   # type: ignore[attr-defined]


@pytest.mark.parametrize(("messages", "options", "why"), [
    (USER, {"custom_template": "{{ 'x' }}"}, "custom_template"),
    (USER + [{"role": "assistant", "content": "Hel"}], {"continue_final_message": True}, "continuing"),
    (USER, {"add_generation_prompt": False}, "continuing"),
    (USER + [{"role": "assistant", "content": "", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"}], {"tools": [TOOL]}, "not the user's"),
])
def test_what_the_conversation_cannot_express_is_rendered_by_llamact(messages: object, options: dict, why: str) -> None:
    call, reason = _route(messages, **options)
    assert call is None and why in reason


def test_tools_on_a_model_type_that_parses_calls_itself_are_rendered() -> None:
    call, reason = _route(parses_tools=True, tools=[TOOL])
    assert call is None and "parses tool calls itself" in reason
    assert _route(parses_tools=True)[0] is not None


@pytest.mark.parametrize(("options", "match"), [
    ({"grammar": 'root ::= "yes"'}, "GBNF"),
    ({"tools": [TOOL], "tool_choice": {"type": "function", "function": {"name": "get_weather"}}}, "named tool_choice"),
    ({"tools": [TOOL], "tool_choice": "required"}, "required"),
    ({"logprobs": True}, "probabilities"),
    ({"response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "string", "format": "uri"}}}},
     "cannot be enforced"),
])
def test_what_no_path_can_honour_is_refused_before_generation(options: dict, match: str) -> None:
    with pytest.raises(LlamaUnsupportedException, match=match):
        refuse_unsupported(ChatRequest(USER, **options))


def test_a_response_format_needs_the_conversation_path() -> None:
    with pytest.raises(LlamaUnsupportedException, match="response_format.*conversation path"):
        _route(USER + [{"role": "assistant", "content": "{"}], continue_final_message=True,
               response_format={"type": "json_object"})


# -- the runtime's chunks as text ------------------------------------------------------------------


def test_a_thought_channel_is_put_back_between_its_markers() -> None:
    from llamact.backends.litert import Channel, conversation_text

    thought = Channel("thought", "<|channel>thought\n", "<channel|>", True)
    chunks = [{"role": "assistant", "channels": {"thought": "Let me"}},
              {"role": "assistant", "channels": {"thought": " think."}},
              {"role": "assistant", "content": [{"type": "text", "text": "Paris"}]},
              {"role": "assistant", "content": [{"type": "text", "text": "."}]}]
    assert "".join(conversation_text(chunks, [thought])) == "<|channel>thought\nLet me think.<channel|>Paris."
    # a channel still open when the stream ends is closed; plain content passes as it is
    assert "".join(conversation_text(chunks[:1], [thought])) == "<|channel>thought\nLet me<channel|>"
    assert "".join(conversation_text([{"content": "plain"}], [])) == "plain"


def test_tool_calls_the_runtime_parsed_itself_are_not_passed_off_as_text() -> None:
    from llamact import LlamaInferenceException
    from llamact.backends.litert import conversation_text

    with pytest.raises(LlamaInferenceException, match="parsed tool calls itself"):
        list(conversation_text([{"role": "assistant", "tool_calls": [{"function": {"name": "f"}}]}]))


def test_the_canonical_qwen3_template_is_exported(tiny_bundle: Path, tmp_path: Path) -> None:
    """The specification's ``liteRtLmQwen3ChatTemplate``: the canonical Qwen 3 template, exported by
    the package and read from the installed one (no copied Jinja), which a renamed Qwen 3 bundle
    gets as ModelParams.chat_template: both sides then render what a bundle named Qwen 3 renders."""
    from dataclasses import replace

    import llamact
    from llamact.backends import litert

    template = llamact.LITERT_LM_QWEN3_CHAT_TEMPLATE
    assert "LITERT_LM_QWEN3_CHAT_TEMPLATE" in llamact.__all__ and litert.LITERT_LM_QWEN3_CHAT_TEMPLATE is template
    own = (Path(litert.__file__).parent / "templates" / "qwen3.jinja").read_text(encoding="utf-8")
    assert template == own
    info = read_bundle(tiny_bundle)
    named = choose_template(replace(info, path=tmp_path / "Qwen3-0.6B.litertlm"), None)
    renamed = choose_template(replace(info, path=tmp_path / "my-model.litertlm"), template)
    assert renamed.source == renamed.runtime_source == named.source == named.runtime_source
