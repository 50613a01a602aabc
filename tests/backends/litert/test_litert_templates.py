"""Templates on the LiteRT-LM runtime: what llamact renders is what the runtime renders, the
content-as-parts adapter for the three string shapes (and a template reading parts left alone),
one that cannot be adapted, the ModelParams.chat_template override (an empty one too), and
enable_thinking reaching a runtime-rendered template."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from litert_bundles import needs_runtime

from llamact import LlamaEngine, LlamaException, LlamaInferenceException
from llamact.backends.litert import ContentShape

pytestmark = needs_runtime

CONVERSATIONS = [
    [{"role": "user", "content": "Hello"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
     {"role": "assistant", "content": "Hello! How can I help?"}, {"role": "user", "content": "Name a colour."}],
    [{"role": "user", "content": "üñí ✓ 漢字 \\n {{ not jinja }}"}],
]

# The three string shapes of the specification, and one that reads the runtime's parts.
CONCATENATES = ("{%- for m in messages -%}{{- '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' -}}"
                "{%- endfor -%}{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}")
INTERPOLATES = ("{%- for m in messages -%}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{%- endfor -%}"
                "{%- if add_generation_prompt -%}<|im_start|>assistant\n{%- endif -%}")
STRINGS_ONLY = ("{%- for m in messages -%}<|im_start|>{{ m['role'] }}\n{% if m['content'] is string %}"
                "{{ m['content'] }}{% endif %}<|im_end|>\n{%- endfor -%}"
                "{%- if add_generation_prompt -%}<|im_start|>assistant\n{%- endif -%}")
READS_PARTS = ("{%- for m in messages -%}<|im_start|>{{ m['role'] }}\n{%- if m['content'] is string -%}"
               "{{ m['content'] }}{%- else -%}{%- for p in m['content'] -%}"
               "{%- if p['type'] == 'text' -%}{{ p['text'] }}{%- endif -%}{%- endfor -%}{%- endif -%}"
               "<|im_end|>\n{%- endfor -%}"
               "{%- if add_generation_prompt -%}<|im_start|>assistant\n{%- endif -%}")
# the runtime's single-turn form: it reads no messages, so no prelude gives it the text
SINGLE_TURN = "{%- if is_appending_to_prefill -%}{{ prompt }}{%- endif -%}<|im_start|>assistant\n"


def _runtime_render(engine: LlamaEngine, messages: list[dict], **options: object) -> str:
    """What the runtime's own template engine renders for ``messages`` (render_message_to_string)."""
    return engine.runtime_render(messages, **options)   # type: ignore[attr-defined]


@pytest.mark.parametrize("messages", CONVERSATIONS, ids=["one", "history", "unicode"])
def test_chat_template_renders_what_the_runtime_renders(tiny_engine: LlamaEngine, messages: list[dict]) -> None:
    assert tiny_engine.content_shape in (None, ContentShape.CONCATENATES)   # type: ignore[attr-defined]
    rendered = _runtime_render(tiny_engine, messages)
    assert rendered, "the runtime rendered nothing: the adapter did not apply"
    assert tiny_engine.chat_template(messages).prompt == rendered
    assert tiny_engine.content_shape is ContentShape.CONCATENATES   # type: ignore[attr-defined]  # SmolLM2's own


def test_tools_reach_the_runtime_template_as_llamact_renders_them(tiny_bundle: Path) -> None:
    template = ("{%- if tools -%}<tools>{{ tools | tojson }}</tools>\n{%- endif -%}" + READS_PARTS)
    parameters = {"type": "object", "properties": {"city": {"type": "string"}}}
    tool = {"type": "function",
            "function": {"name": "get_weather", "description": "Weather.", "parameters": parameters}}
    with LlamaEngine.load(tiny_bundle, n_ctx=512, n_threads=1, chat_template=template) as engine:
        messages = CONVERSATIONS[0]
        prompt = engine.chat_template(messages, tools=[tool]).prompt
        assert "<tools>" in prompt and _runtime_render(engine, messages, tools=[tool]) == prompt


@pytest.mark.parametrize(("template", "shape"), [(CONCATENATES, ContentShape.CONCATENATES),
                                                 (INTERPOLATES, ContentShape.INTERPOLATES),
                                                 (STRINGS_ONLY, ContentShape.STRINGS_ONLY),
                                                 (READS_PARTS, ContentShape.READS_PARTS)])
def test_string_shapes_get_the_string_and_a_parts_template_is_left_alone(tiny_bundle: Path, template: str,
                                                                         shape: ContentShape) -> None:
    with LlamaEngine.load(tiny_bundle, n_ctx=512, n_threads=1, chat_template=template) as engine:
        runtime_template = engine.runtime_template()   # type: ignore[attr-defined]
        assert engine.content_shape is shape   # type: ignore[attr-defined]
        assert (runtime_template == template) is (shape is ContentShape.READS_PARTS)
        for messages in CONVERSATIONS:
            rendered = _runtime_render(engine, messages)
            assert rendered == engine.chat_template(messages).prompt   # as llamact renders it with strings
            assert "'type'" not in rendered and '"type"' not in rendered
            assert messages[-1]["content"] in rendered
        # and a request through the conversation answers
        stream = engine.create(CONVERSATIONS[1], max_tokens=4, seed=1)
        stream.completion()
        assert stream.generation.path == "conversation"


def test_a_template_that_cannot_be_adapted_warns_once_and_its_failure_names_it(
        tiny_bundle: Path, caplog: pytest.LogCaptureFixture) -> None:
    with LlamaEngine.load(tiny_bundle, n_ctx=512, n_threads=1, chat_template=SINGLE_TURN) as engine, \
            caplog.at_level(logging.WARNING, logger="llamact.litert"):
        engine.runtime_template()   # type: ignore[attr-defined]
        engine.runtime_template()   # type: ignore[attr-defined]
        assert engine.content_shape is ContentShape.UNADAPTABLE   # type: ignore[attr-defined]
        warnings = [r for r in caplog.records if "cannot be adapted" in r.getMessage()]
        assert len(warnings) == 1 and "ModelParams.chat_template" in warnings[0].getMessage()
    broken = "{{ raise_exception('this template always fails') }}"
    with LlamaEngine.load(tiny_bundle, n_ctx=512, n_threads=1, chat_template=broken) as engine:
        with pytest.raises(LlamaException, match="raise_exception.*this template always fails"):
            engine.create(CONVERSATIONS[0], max_tokens=4)   # llamact's own rendering fails first, showing where


def test_a_request_the_runtime_template_fails_on_names_the_template(tiny_bundle: Path) -> None:
    # a system message the runtime's MiniJinja cannot render (no str.upper there); the probe has none
    template = ("{%- if messages[0]['role'] == 'system' -%}{{ messages[0]['content'].upper() }}{%- endif -%}"
                + READS_PARTS)
    with LlamaEngine.load(tiny_bundle, n_ctx=512, n_threads=1, chat_template=template) as engine:
        assert engine.runtime_template() == template   # type: ignore[attr-defined]  # the probe renders
        assert engine.chat_template(CONVERSATIONS[1]).prompt.startswith("BE BRIEF.")
        with pytest.raises(LlamaInferenceException, match="chat template from ModelParams.chat_template"):
            engine.create(CONVERSATIONS[1], max_tokens=4)
        assert engine.complete_chat(CONVERSATIONS[0], max_tokens=2, seed=7).finish_reason is not None


def test_a_template_only_llamact_can_run_is_rendered_by_llamact(tiny_bundle: Path,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    # MiniJinja, the runtime's engine, rejects {% continue %}; llamact's Jinja runs it
    skip_tools = "{%- for m in messages -%}{%- if m['role'] == 'tool' -%}{% continue %}{%- endif -%}"
    template = CONCATENATES.replace("{%- for m in messages -%}", skip_tools)
    with LlamaEngine.load(tiny_bundle, n_ctx=512, n_threads=1, chat_template=template) as engine, \
            caplog.at_level(logging.WARNING, logger="llamact.litert"):
        stream = engine.create(CONVERSATIONS[1], max_tokens=4, seed=1)
        reply = stream.completion()
        assert engine.content_shape is ContentShape.UNADAPTABLE   # type: ignore[attr-defined]
        assert stream.generation.path == "rendered" and reply.finish_reason is not None
        assert any("llamact renders its requests" in r.getMessage() for r in caplog.records)


def test_an_empty_override_replaces_the_template_with_none(tiny_bundle: Path) -> None:
    with LlamaEngine.load(tiny_bundle, n_ctx=512, n_threads=1, chat_template="") as engine:
        messages = CONVERSATIONS[1]
        prompt = engine.chat_template(messages).prompt
        assert prompt == "".join(m["content"] for m in messages)
        assert _runtime_render(engine, messages) == prompt
        assert "ModelParams.chat_template" not in engine.get_metadata().get("tokenizer.chat_template", "")


def test_enable_thinking_false_reaches_the_runtime_template(tiny_bundle: Path) -> None:
    template = READS_PARTS.replace("<|im_start|>assistant\n{%- endif -%}",
                                   "<|im_start|>assistant\n"
                                   "{%- if enable_thinking is defined and not enable_thinking -%}"
                                   "{{- '<think>\\n\\n</think>\\n\\n' -}}{%- else -%}{{- '<think>\\n' -}}{%- endif -%}"
                                   "{%- endif -%}")
    with LlamaEngine.load(tiny_bundle, n_ctx=512, n_threads=1, chat_template=template) as engine:
        off = engine.chat_template(CONVERSATIONS[0], enable_thinking=False).prompt
        assert off.endswith("<think>\n\n</think>\n\n")
        assert _runtime_render(engine, CONVERSATIONS[0], enable_thinking=False) == off
        stream = engine.create(CONVERSATIONS[0], enable_thinking=False, max_tokens=6, seed=2, temperature=1.0)
        reply = stream.completion()
        assert stream.generation.path == "conversation"
        assert reply.message.reasoning_content == "" and reply.content   # no thought: the answer is content


def test_chat_template_reads_the_deprecated_json_schema_shortcut(tiny_engine: LlamaEngine) -> None:
    """As on llama.cpp (tests/engine/test_chat_template.py): ``json_schema=`` warns, reads as the
    response format, and a ``response_format`` passed with it wins."""
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
    wanted = tiny_engine.chat_template(CONVERSATIONS[0], response_format={
        "type": "json_schema", "json_schema": {"schema": schema}})
    with pytest.warns(DeprecationWarning, match="json_schema"):
        assert tiny_engine.chat_template(CONVERSATIONS[0], json_schema=schema).grammar == wanted.grammar != ""
    with pytest.warns(DeprecationWarning, match="json_schema"):
        both = tiny_engine.chat_template(CONVERSATIONS[0], json_schema={"type": "array"},
                                         response_format={"type": "json_schema", "json_schema": {"schema": schema}})
    assert both.grammar == wanted.grammar


def test_a_renamed_qwen3_bundle_given_the_exported_template_honours_enable_thinking(tiny_bundle: Path) -> None:
    """The specification: set ``ModelParams.chat_template`` to the exported canonical Qwen 3 template
    for a renamed bundle; native text conversations then honour ``enable_thinking: false``."""
    import llamact

    with LlamaEngine.load(tiny_bundle, n_ctx=512, n_threads=1,
                          chat_template=llamact.LITERT_LM_QWEN3_CHAT_TEMPLATE) as engine:
        messages = CONVERSATIONS[1]
        off = engine.chat_template(messages, enable_thinking=False).prompt
        assert off.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
        assert _runtime_render(engine, messages, enable_thinking=False) == off
        on = engine.chat_template(messages).prompt
        assert on.endswith("<|im_start|>assistant\n") and _runtime_render(engine, messages) == on


@pytest.mark.parametrize(("ending", "rendered"), [
    ("X\n", "X\n"), ("X\n\n", "X\n\n"), ("{{ 'E' }}\n", "E\n"), ("X\n  ", "X\n  "), ("X", "X"),
    ("{% if true %}Y{% endif %}\n", "Y"), ("Q{% set x = 1 %}\n", "Q"),
    ("X\r\n", "X\n"), ("X\r", "X\n"), ("X\r\nY\r\n", "X\nY\n"),
], ids=["newline", "two", "after_an_expression", "then_spaces", "none", "after_a_block", "after_a_set",
        "crlf", "cr", "crlf_inside"])
def test_chat_template_shows_what_the_runtime_renders_at_a_templates_end(tiny_bundle: Path, ending: str,
                                                                          rendered: str) -> None:
    """README: ``chat_template()`` shows what the runtime renders, for a template that ends with a line
    break too (the runtime's engine keeps it; llama.cpp's Jinja drops one). CR and CRLF line breaks
    reach both sides as LF, as llama.cpp renders them."""
    template = READS_PARTS + ending
    with LlamaEngine.load(tiny_bundle, n_ctx=512, n_threads=1, chat_template=template) as engine:
        for messages in CONVERSATIONS[:2]:
            prompt = engine.chat_template(messages).prompt
            assert prompt.endswith("<|im_start|>assistant" + rendered)   # READS_PARTS ends "-%}"
            assert _runtime_render(engine, messages) == prompt
        # the model's metadata keeps the bundle's own template; the override is as given
        assert engine.get_metadata().get("tokenizer.chat_template") != template
