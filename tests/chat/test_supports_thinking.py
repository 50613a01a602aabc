"""``supports_enable_thinking`` against upstream's ``common_chat_templates_support_enable_thinking``
(the oracle's chat_apply with the inputs that function uses): small templates, and every vendored one;
and the capabilities object that carries it with upstream's probed caps (``template_capabilities``).

It replaced a marker heuristic over the source (``<think>`` and the like) that disagreed with upstream
on 13 of these cases: upstream asks the apply pipeline, and so does llamact now.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from llamact.chat import TemplateCaps, load_chat_templates, supports_enable_thinking, template_capabilities
from llamact.parity.corpus import template_files
from llamact.parity.oracle import OracleError

pytestmark = pytest.mark.parity

LLAMA_CPP = Path(__file__).resolve().parents[2] / "vendor" / "llama.cpp"

SOURCES = {
    "reasoning_printed": "{% for m in messages %}{% if m.reasoning_content %}<think>{{ m.reasoning_content }}</think>"
                         "{% endif %}{{ m.content }}{% endfor %}",
    "think_in_generation_prompt": "{{ messages[0].content }}{% if add_generation_prompt %}<|assistant|><think>\n"
                                  "{% endif %}",
    "think_brackets_literal": "{{ messages[0].content }}[THINK]plan[/THINK]",
    "seed_think_literal": "{{ messages[0].content }}<seed:think>",
    "no_marker": "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}",
    "no_marker_generation_prompt": "{{ messages[0].content }}{% if add_generation_prompt %}<|assistant|>{% endif %}",
    "think_word": "{{ messages[0].content }} I think so.",
}


def _params() -> list[Any]:
    vendored = [(p.stem, p.read_text(encoding="utf-8")) for p in template_files(LLAMA_CPP)]
    return [pytest.param(source, id=name) for name, source in [*SOURCES.items(), *vendored]]


@pytest.mark.parametrize("source", _params())
def test_supports_enable_thinking_is_upstreams(oracle: Any, source: str) -> None:
    answer = oracle.request("chat_apply", template=source, bos_token="<s>", eos_token="</s>", add_bos=False,
                            add_eos=False, inputs={"messages": [{"role": "user", "content": "test"}],
                                                   "enable_thinking": True, "add_generation_prompt": True,
                                                   "reasoning_format": "deepseek"})
    assert not isinstance(answer, OracleError), answer
    assert supports_enable_thinking(source, bos_token="<s>", eos_token="</s>") is answer["supports_thinking"]


def test_both_answers_occur() -> None:
    # the comparison above means something only if the answer varies over the cases
    answers = {supports_enable_thinking(source) for source in SOURCES.values()}
    assert answers == {True, False}


@pytest.mark.parametrize("source", _params())
def test_the_capabilities_report_thinking_with_upstreams_caps(oracle: Any, source: str) -> None:
    """The specification: "TemplateCaps reports whether a template supports system role, tools, tool
    calls, parallel tool calls, string and typed content, object arguments, and thinking channels."
    The probed caps are upstream's map, and thinking is upstream's answer (the apply pipeline's, not
    the specification's thinking markers: see the module docstring)."""
    caps = template_capabilities(source, bos_token="<s>", eos_token="</s>")
    assert caps.to_map() == oracle.request("caps", template=source)
    assert caps.supports_thinking is supports_enable_thinking(source, bos_token="<s>", eos_token="</s>")


def test_thinking_is_unknown_on_the_probed_caps_alone() -> None:
    """The probes cannot tell thinking: a template's own caps leave it None (and upstream's map has
    no such key), ``template_capabilities`` answers it, for a template set too."""
    source = (LLAMA_CPP / "models" / "templates" / "Qwen-Qwen3-0.6B.jinja").read_text(encoding="utf-8")
    templates = load_chat_templates(source)
    assert templates.default.caps.supports_thinking is None and "supports_thinking" not in TemplateCaps().to_map()
    assert template_capabilities(templates).supports_thinking is True
    assert template_capabilities(SOURCES["no_marker"]).supports_thinking is False
