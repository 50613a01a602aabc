"""The differential analysis (llamact.chat.autoparser.analysis) against upstream's, via the oracle's
``analyze`` op: every vendored template (two sets of special tokens), and small templates made to
reach the branches the vendored ones do not (call-id positions, JSON layouts, delimiter-style
reasoning, templates that refuse some conversations or every one, upstream's own exceptions).
Also: the per-template cache and the render-failure sentinel."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from llamact.chat.autoparser import analysis as analysis_module
from llamact.chat.autoparser.analysis import AutoparserAnalysisError, analyze_template, run_analysis
from llamact.chat.autoparser.variants import RENDER_FAILED, TemplateParams, TemplateProbe
from llamact.chat.templates import compile_chat_template, load_chat_templates
from llamact.json_types import Json
from llamact.parity.oracle import OracleClient, OracleError

pytestmark = pytest.mark.parity

TEMPLATES = sorted((Path(__file__).resolve().parents[2] / "vendor" / "llama.cpp" / "models" / "templates")
                   .glob("*.jinja"))


def expected_analysis(oracle: OracleClient, source: str, bos: str, eos: str) -> Json:
    answer = oracle.request("analyze", template=source, bos_token=bos, eos_token=eos)
    return {"error": answer} if isinstance(answer, OracleError) else answer


@pytest.mark.parametrize("tokens", [("<s>", "</s>"), ("", "")], ids=["tokens", "no-tokens"])
@pytest.mark.parametrize("path", TEMPLATES, ids=[p.stem for p in TEMPLATES])
def test_vendored_template(oracle: OracleClient, path: Path, tokens: tuple[str, str]) -> None:
    source = path.read_text(encoding="utf-8")
    expected = expected_analysis(oracle, source, *tokens)
    assert "error" not in expected, expected  # upstream analyses every vendored template
    tmpl = load_chat_templates(source, bos_token=tokens[0], eos_token=tokens[1]).default
    assert run_analysis(tmpl).to_json() == expected


# --- small templates for the other branches ------------------------------------------------------

_TURNS = """{%- for m in messages -%}
{%- if m.role == 'user' -%}<|user|>{{ m.content }}<|end|>
{%- elif m.role == 'assistant' -%}<|assistant|>{% if m.reasoning_content %}<think>{{ m.reasoning_content }}</think>\
{% endif %}{{ m.content or '' }}{% if m.tool_calls %}CALLS{% endif %}<|end|>
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}<|assistant|>{%- endif -%}"""


def _turns(calls: str) -> str:
    return _TURNS.replace("CALLS", calls)


SYNTHETIC = {
    # JSON layouts: function name as key, ids and array wrapping, a generated id and a nested name
    "json_function_is_key": _turns(
        "<calls>{% for tc in m.tool_calls %}{{ {tc.function.name: tc.function.arguments} | tojson }}{% endfor %}"
        "</calls>"),
    "json_id_array": _turns(
        '<calls>[{% for tc in m.tool_calls %}{% if not loop.first %}, {% endif %}{"id": {{ tc.id | tojson }}, '
        '"name": {{ tc.function.name | tojson }}, "arguments": {{ tc.function.arguments | tojson }}}{% endfor %}]'
        '</calls>'),
    "json_gen_id_nested": _turns(
        '{% for tc in m.tool_calls %}<call>{"call_idx": {{ loop.index0 }}, "function": {"name": '
        '{{ tc.function.name | tojson }}}, "arguments": {{ tc.function.arguments | tojson }}}</call>{% endfor %}'),
    # call ids before the name, after the arguments, between the two
    "call_id_pre_func": _turns(
        "[TOOL_CALLS]{% for tc in m.tool_calls %}[CALL_ID]{{ tc.id }}[FUNC]{{ tc.function.name }}[ARGS]"
        "{{ tc.function.arguments | tojson }}{% endfor %}"),
    "call_id_post_args": _turns(
        "[TOOL_CALLS]{% for tc in m.tool_calls %}[FUNC]{{ tc.function.name }}[ARGS]"
        "{{ tc.function.arguments | tojson }}[CALL_ID]{{ tc.id }}{% endfor %}"),
    "call_id_between": _turns(
        "[TOOL_CALLS]{% for tc in m.tool_calls %}{{ tc.function.name }}[CALL_ID]{{ tc.id }}[ARGS]"
        "{{ tc.function.arguments | tojson }}{% endfor %}"),
    # tagged arguments in angle and square markers; JSON arguments with no end marker
    "tagged_args": _turns(
        '<tools>{% for tc in m.tool_calls %}<invoke name="{{ tc.function.name }}">{% for k, v in '
        'tc.function.arguments.items() %}<param name="{{ k }}">{{ v }}</param>{% endfor %}</invoke>{% endfor %}'
        '</tools>'),
    "tagged_square": _turns(
        "{% for tc in m.tool_calls %}[call {{ tc.function.name }}]{% for k, v in tc.function.arguments.items() %}"
        "[{{ k }}]{{ v }}[/{{ k }}]{% endfor %}[/call]{% endfor %}"),
    "tag_json_no_end": _turns(
        "{% for tc in m.tool_calls %}<function={{ tc.function.name }}>{{ tc.function.arguments | tojson }}"
        "{% endfor %}"),
    # templates that refuse an empty conversation, or every conversation
    "refuses_empty": "{% if not messages %}{{ raise_exception('no messages') }}{% endif %}" + _turns(""),
    "always_raises": "{{ raise_exception('never') }}",
    "no_tools": ("{%- for m in messages -%}[{{ m.role }}]{{ m.content }}[/{{ m.role }}]{%- endfor -%}"
                 "{%- if add_generation_prompt -%}[assistant]{%- endif -%}"),
    # reasoning: delimiter style, opened / closed by the generation prompt, only with tool calls
    "delimiter_reasoning": (
        "{%- for m in messages -%}{%- if m.role == 'user' -%}<|user|>{{ m.content }}"
        "{%- elif m.role == 'assistant' -%}<|assistant|>{% if m.reasoning_content %}Thoughts: {{ m.reasoning_content }}"
        "[BEGIN FINAL RESPONSE]{% endif %}{{ m.content }}<|end|>{%- endif -%}{%- endfor -%}"
        "{%- if add_generation_prompt -%}<|assistant|>{%- endif -%}"),
    "thinking_prompt": (
        "{%- for m in messages -%}<|{{ m.role }}|>{{ m.content }}<|end|>{%- endfor -%}"
        "{%- if add_generation_prompt -%}<|assistant|>{% if enable_thinking %}<think>{% else %}<think></think>"
        "{% endif %}{%- endif -%}"),
    "thinking_open": (
        "{%- for m in messages -%}<|{{ m.role }}|>{{ m.content }}<|end|>{%- endfor -%}"
        "{%- if add_generation_prompt -%}<|assistant|>{% if enable_thinking %}<seed:think>{% endif %}{%- endif -%}"),
    "wrapped_content": (
        "{%- for m in messages -%}{%- if m.role == 'assistant' -%}<|assistant|>{% if m.tool_calls %}<tool>"
        "{{ m.tool_calls[0].function | tojson }}</tool>{% else %}<answer>{{ m.content }}</answer>{% endif %}<|end|>"
        "{%- else -%}<|{{ m.role }}|>{{ m.content }}<|end|>{%- endif -%}{%- endfor -%}"
        "{%- if add_generation_prompt -%}<|assistant|>{%- endif -%}"),
    "tools_only_reasoning": (
        "{%- for m in messages -%}{%- if m.role == 'assistant' -%}<|assistant|>{% if m.tool_calls %}<|think|>"
        "{{ m.reasoning_content }}<|/think|><|act|>{{ m.tool_calls | map(attribute='function') | list | tojson }}"
        "<|/act|>{% else %}{{ m.content }}{% endif %}<|end|>{%- else -%}<|{{ m.role }}|>{{ m.content }}<|end|>"
        "{%- endif -%}{%- endfor -%}{%- if add_generation_prompt -%}<|assistant|>{%- endif -%}"),
}


@pytest.mark.parametrize("name", list(SYNTHETIC))
def test_synthetic_template(oracle: OracleClient, name: str) -> None:
    source = SYNTHETIC[name]
    expected = expected_analysis(oracle, source, "", "")
    assert "error" not in expected, expected
    assert run_analysis(compile_chat_template(source)).to_json() == expected


def test_branches_reached() -> None:
    """The synthetic templates are there for these outcomes (checked against the oracle above)."""
    def analysed(name: str) -> Any:
        return run_analysis(compile_chat_template(SYNTHETIC[name]))
    assert analysed("json_function_is_key").tools.format.fun_name_is_key
    assert analysed("json_id_array").tools.format.tools_array_wrapped
    assert analysed("json_id_array").tools.format.id_field == "id"
    assert analysed("json_gen_id_nested").tools.format.gen_id_field == "call_idx"
    assert analysed("call_id_pre_func").tools.call_id.pos == "PRE_FUNC_NAME"
    assert analysed("call_id_post_args").tools.call_id.pos == "POST_ARGS"
    assert analysed("call_id_between").tools.call_id.pos == "BETWEEN_FUNC_AND_ARGS"
    assert analysed("always_raises").user_start == ""
    assert analysed("refuses_empty").user_start == "<|user|>"
    assert analysed("delimiter_reasoning").reasoning.start == ""
    assert analysed("delimiter_reasoning").reasoning.end == "[BEGIN FINAL RESPONSE]"
    assert analysed("tools_only_reasoning").reasoning.mode == "TOOLS_ONLY"
    assert analysed("wrapped_content").content.mode == "ALWAYS_WRAPPED"


# --- where upstream's analysis throws ----------------------------------------------------------


def test_tool_call_without_braces_raises_upstreams_error(oracle: OracleClient) -> None:
    """JSON-quoted name but no ``{``: upstream's substr(npos) throws std::out_of_range."""
    source = _turns('{% for tc in m.tool_calls %}<call>name: "{{ tc.function.name }}"</call>{% endfor %}')
    expected = oracle.request("analyze", template=source)
    assert isinstance(expected, OracleError) and expected.kind == "exception"
    with pytest.raises(AutoparserAnalysisError) as info:
        run_analysis(compile_chat_template(source))
    assert info.value.message == expected.message


def test_tool_call_that_is_not_json_raises(oracle: OracleClient) -> None:
    """The call object does not parse: upstream throws nlohmann's parse_error (its wording is not
    reproduced; the template is named in ours)."""
    source = _turns('<call>{% for tc in m.tool_calls %}{"name": "{{ tc.function.name }}", "arguments": '
                    '{{ tc.function.arguments }}}{% endfor %}</call>')
    expected = oracle.request("analyze", template=source)
    assert isinstance(expected, OracleError) and expected.kind == "json_error", expected
    assert "parse error" in expected.message
    with pytest.raises(AutoparserAnalysisError, match="not JSON"):
        run_analysis(compile_chat_template(source))


# --- compare_variants' failure sentinel ----------------------------------------------------------


def test_render_that_prints_the_sentinel_counts_as_failed(oracle: OracleClient) -> None:
    """Upstream cannot tell a template printing its sentinel from a failed render."""
    source = "{{ '#**ERROR**#' if messages | length > 1 else 'one' }}"
    a = {"messages": [{"role": "user", "content": "x"}]}
    b = {"messages": [{"role": "user", "content": "x"}, {"role": "user", "content": "y"}]}
    assert oracle.request("autoparser_helper", helper="compare_variants", template=source, a=a, b=b) is None
    probe = TemplateProbe(compile_chat_template(source))
    assert probe.render(TemplateParams(messages=b["messages"])) == RENDER_FAILED
    assert probe.compare(TemplateParams(messages=a["messages"]), messages=b["messages"]) is None


# --- the cache -----------------------------------------------------------------------------------


def test_analysis_is_computed_once_per_source_and_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    runs: list[str] = []
    real = analysis_module.run_analysis

    def counting(tmpl: Any, now: float | None = None) -> Any:
        runs.append(tmpl.bos_token)
        return real(tmpl, now)
    monkeypatch.setattr(analysis_module, "run_analysis", counting)
    monkeypatch.setattr(analysis_module, "_cache", type(analysis_module._cache)())
    source = SYNTHETIC["tagged_args"] + "{# cache test #}"
    first = analyze_template(load_chat_templates(source, bos_token="<s>").default)
    # another ChatTemplate object with the same text and tokens: the cached value
    again = analyze_template(load_chat_templates(source + "\n", bos_token="<s>").default)
    assert again is first and runs == ["<s>"]
    other_tokens = analyze_template(load_chat_templates(source, bos_token="<bos>").default)
    assert runs == ["<s>", "<bos>"] and other_tokens.to_json() == first.to_json()


def test_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(analysis_module, "_cache", type(analysis_module._cache)())
    monkeypatch.setattr(analysis_module, "_CACHE_SIZE", 2)
    monkeypatch.setattr(analysis_module, "run_analysis", lambda tmpl, now=None: object())
    for i in range(4):
        analyze_template(compile_chat_template(f"{{{{ {i} }}}}"))
    assert len(analysis_module._cache) == 2
