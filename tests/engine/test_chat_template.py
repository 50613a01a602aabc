"""LlamaEngine.chat_template on the real models against upstream's init + apply with the same GGUF.

The oracle's chat_apply with ``model`` runs common_chat_templates_init(model, override): BOS/EOS
and add_bos/add_eos come from the vocab, the template from the GGUF (or the override). The engine
must give the same result for the model's own template, a per-call ``custom_template`` and a
``ModelParams.chat_template`` override (docs/design.md deviation 7), and ``get_metadata`` keeps reporting
the GGUF's own template.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from llamact import ChatRequest, LlamaEngine, ModelParams
from llamact.parity.components import ORACLE_NOW
from llamact.parity.oracle import OracleClient, OracleError

pytestmark = [pytest.mark.model, pytest.mark.parity]

TEMPLATES = Path(__file__).resolve().parents[2] / "vendor" / "llama.cpp" / "models" / "templates"
QWEN3 = (TEMPLATES / "Qwen-Qwen3-0.6B.jinja").read_text(encoding="utf-8")
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
                                            "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                           "required": ["city"]}}}
CONVERSATION = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather in Paris?"}]
REQUESTS = {
    "plain": {"messages": CONVERSATION},
    "tools": {"messages": CONVERSATION, "tools": [WEATHER], "tool_choice": "auto"},
    "required": {"messages": CONVERSATION, "tools": [WEATHER], "tool_choice": "required"},
}


def _expected(oracle: OracleClient, model: Path, inputs: dict, template: str = "") -> dict:
    answer = oracle.request("chat_apply", model=str(model), template=template,
                            inputs={"reasoning_format": "deepseek", **inputs}, now=ORACLE_NOW)
    assert not isinstance(answer, OracleError), answer
    return answer


def _ours(engine: LlamaEngine, inputs: dict, **kwargs: object) -> dict:
    # upstream_compat: upstream's "required" grammar (deviation 19 is tests/chat/test_required_tool.py's)
    return engine.chat_template(inputs["messages"], tools=inputs.get("tools"),
                                tool_choice=inputs.get("tool_choice", "auto"), reasoning_format="deepseek",
                                template_now=ORACLE_NOW, upstream_compat=True, **kwargs).to_json()


@pytest.fixture(scope="module")
def engine(model_path: Path):
    with LlamaEngine.load(model_path, ModelParams(n_ctx=512, n_threads=2)) as eng:
        yield eng


@pytest.mark.parametrize("name", sorted(REQUESTS))
def test_the_models_own_template(oracle: OracleClient, engine: LlamaEngine, model_path: Path, name: str) -> None:
    assert _ours(engine, REQUESTS[name]) == _expected(oracle, model_path, REQUESTS[name])


@pytest.mark.parametrize("name", sorted(REQUESTS))
def test_a_per_call_custom_template(oracle: OracleClient, engine: LlamaEngine, model_path: Path, name: str) -> None:
    ours = _ours(engine, REQUESTS[name], custom_template=QWEN3)
    assert ours == _expected(oracle, model_path, REQUESTS[name], template=QWEN3)


def test_a_model_level_override_replaces_the_template_but_not_the_metadata(oracle: OracleClient,
                                                                           model_path: Path) -> None:
    with LlamaEngine.load(model_path, ModelParams(n_ctx=512, n_threads=2, chat_template=QWEN3)) as engine:
        for inputs in REQUESTS.values():
            assert _ours(engine, inputs) == _expected(oracle, model_path, inputs, template=QWEN3)
        own = engine.get_metadata().get("tokenizer.chat_template")
        assert own == engine.model.template_source() and own != QWEN3
        # a per-call template still wins over the model-level one
        other = (TEMPLATES / "Qwen3-Coder.jinja").read_text(encoding="utf-8")
        assert _ours(engine, REQUESTS["tools"], custom_template=other)["prompt"] == \
            _expected(oracle, model_path, REQUESTS["tools"], template=other)["prompt"]


@pytest.mark.parametrize("override", ["", "chatml"])
def test_an_empty_or_chatml_override_is_read_as_upstream_reads_it(oracle: OracleClient, model_path: Path,
                                                                  override: str) -> None:
    """``ModelParams.chat_template=""`` keeps the model's template; the one name upstream's init knows,
    "chatml", is its built-in ChatML (the value is otherwise Jinja source: docs/design.md deviation 7)."""
    with LlamaEngine.load(model_path, ModelParams(n_ctx=512, n_threads=2, chat_template=override)) as engine:
        for inputs in REQUESTS.values():
            assert _ours(engine, inputs) == _expected(oracle, model_path, inputs, template=override)


SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
OTHER_SCHEMA = {"type": "array", "items": {"type": "integer"}}


def _schema_format(schema: dict) -> dict:
    return {"type": "json_schema", "json_schema": {"schema": schema}}


def test_the_deprecated_json_schema_shortcut_is_read_and_response_format_wins(
        oracle: OracleClient, engine: LlamaEngine, model_path: Path) -> None:
    """The specification: "chatTemplate(...) still accepts the deprecated jsonSchema shortcut; if both
    are passed, responseFormat wins." The shortcut is upstream's ``json_schema`` input (its grammar
    here equals the oracle's), with a DeprecationWarning."""
    plain = REQUESTS["plain"]
    with pytest.warns(DeprecationWarning, match=r"json_schema=.*response_format"):
        shortcut = _ours(engine, plain, json_schema=SCHEMA)
    assert shortcut == _expected(oracle, model_path, {**plain, "json_schema": SCHEMA})
    assert shortcut["grammar"] and shortcut == _ours(engine, plain, response_format=_schema_format(SCHEMA))
    with pytest.warns(DeprecationWarning):
        both = _ours(engine, plain, json_schema=OTHER_SCHEMA, response_format=_schema_format(SCHEMA))
    assert both == shortcut
    # a request that carries a response_format keeps it too
    request = ChatRequest(plain["messages"], response_format=_schema_format(SCHEMA), reasoning_format="deepseek",
                          template_now=ORACLE_NOW)
    with pytest.warns(DeprecationWarning):
        assert engine.chat_template(request, json_schema=OTHER_SCHEMA).to_json() == shortcut
    # json_schema=None asks for nothing (still deprecated)
    with pytest.warns(DeprecationWarning):
        assert _ours(engine, plain, json_schema=None) == _ours(engine, plain)
