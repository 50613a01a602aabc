"""``Tokenizer.chat_template``: the engine's rendering without the weights (what a prompt router
renders and tokenizes: llamact.serve_ray), equal to ``LlamaEngine.chat_template`` for the same
request, with the model's template, an override, and tools."""

from __future__ import annotations

from pathlib import Path

import pytest

from llamact import LlamaEngine, ModelParams, Tokenizer
from llamact.errors import LlamaStateException

pytestmark = pytest.mark.model

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": "Sunny."}, {"role": "user", "content": "And Rome?"}]
OVERRIDE = ("{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}"
            "{% if add_generation_prompt %}>{% endif %}")


@pytest.mark.parametrize("override", [None, OVERRIDE])
@pytest.mark.parametrize("tools", [None, TOOLS])
def test_the_tokenizer_renders_what_the_engine_renders(model_path: Path, override: str | None,
                                                       tools: list | None) -> None:
    with Tokenizer.load(model_path, chat_template=override) as tokenizer, \
            LlamaEngine.load(model_path, ModelParams(n_ctx=512, n_threads=1, chat_template=override)) as engine:
        got = tokenizer.chat_template(MESSAGES, tools=tools)
        expected = engine.chat_template(MESSAGES, tools=tools)
        assert got == expected
        assert tokenizer.tokenize(got.prompt) == engine.tokenize(expected.prompt)


def test_a_closed_tokenizer_refuses_to_render(smollm2_path: Path) -> None:
    tokenizer = Tokenizer.load(smollm2_path)
    tokenizer.close()
    with pytest.raises(LlamaStateException):
        tokenizer.chat_template(MESSAGES)
