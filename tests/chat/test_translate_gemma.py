"""docs/design.md deviation 18: TranslateGemma's language codes from ``chat_template_kwargs``.

The template here has TranslateGemma's shape (from its model card: a user message's content is a
list whose text item carries ``source_lang_code`` and ``target_lang_code``; the prompt names both).
The oracle shows upstream at the pin rendering no languages whatever the request does; llamact puts
the kwargs' codes (each defaulting to en-GB, the specification's sentence) on every user text item.
"""

from __future__ import annotations

from typing import Any

import pytest

from llamact.chat import apply_chat_template
from llamact.parity.oracle import OracleClient, OracleError

pytestmark = pytest.mark.parity

TRANSLATE_GEMMA = (
    "{{ bos_token }}"
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'user' -%}"
    "{{ '<start_of_turn>user\\n' }}"
    "{%- for item in message['content'] -%}{%- if item['type'] == 'text' -%}"
    "{{ 'You are a professional ' + (item['source_lang_code'] | default('')) + ' to '"
    " + (item['target_lang_code'] | default('')) + ' translator. Produce only the translation:\\n\\n\\n'"
    " + item['text'] }}"
    "{%- endif -%}{%- endfor -%}"
    "{{ '<end_of_turn>\\n' }}"
    "{%- elif message['role'] == 'assistant' -%}"
    "{{ '<start_of_turn>model\\n' }}{%- for item in message['content'] -%}{{ item['text'] }}{%- endfor -%}"
    "{{ '<end_of_turn>\\n' }}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<start_of_turn>model\\n' }}{%- endif -%}"
)
KO = {"source_lang_code": "en", "target_lang_code": "ko"}
TEXT = [{"role": "user", "content": "Hello"}]
PARTS = [{"role": "user", "content": [{"type": "text", "text": "Hello"}]}]
PARTS_WITH_CODES = [{"role": "user", "content": [{"type": "text", "text": "Hello", **KO}]}]
HISTORY = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "안녕"},
           {"role": "user", "content": "Bye"}]


def _upstream(oracle: OracleClient, messages: list[Any], kwargs: dict[str, Any]) -> str:
    answer = oracle.chat_apply(TRANSLATE_GEMMA, {"messages": messages, "chat_template_kwargs": kwargs,
                                                 "add_generation_prompt": True}, bos_token="<bos>")
    assert not isinstance(answer, OracleError), answer
    return str(answer["prompt"])


def _ours(messages: list[Any], kwargs: dict[str, Any] | None) -> str:
    return apply_chat_template(TRANSLATE_GEMMA, messages, chat_template_kwargs=kwargs, bos_token="<bos>").prompt


@pytest.mark.parametrize(("messages", "kwargs"), [(TEXT, {}), (TEXT, KO), (PARTS, KO), (PARTS_WITH_CODES, {})],
                         ids=["text", "text_kwargs", "parts_kwargs", "parts_with_codes"])
def test_upstream_renders_no_languages(oracle: OracleClient, messages: list[Any], kwargs: dict[str, Any]) -> None:
    """At the pin neither the kwargs nor a part's own codes reach the template's items."""
    assert "professional  to  translator" in _upstream(oracle, messages, kwargs)


@pytest.mark.parametrize("messages", [TEXT, PARTS], ids=["text", "parts"])
def test_the_language_codes_come_from_the_kwargs(messages: list[Any]) -> None:
    """The specification: "TranslateGemma reads its language codes from {'source_lang_code': 'en',
    'target_lang_code': 'ko'}, defaulting to en-GB"."""
    assert "professional en to ko translator" in _ours(messages, KO)
    assert "professional en-GB to en-GB translator" in _ours(messages, None)
    assert "professional en-GB to ko translator" in _ours(messages, {"target_lang_code": "ko"})


def test_every_user_message_gets_them_and_nothing_else_changes(oracle: OracleClient) -> None:
    prompt = _ours(HISTORY, KO)
    assert prompt.count("professional en to ko translator") == 2
    # the rest of the prompt is upstream's: only the codes were added
    assert prompt.replace("en to ko", " to ") == _upstream(oracle, HISTORY, KO)


def test_a_template_without_the_fields_is_left_alone(oracle: OracleClient) -> None:
    """Other templates see the kwargs as upstream gives them: globals only."""
    template = "{% for m in messages %}{{ m['content'] }}|{{ source_lang_code }}{% endfor %}"
    ours = apply_chat_template(template, TEXT, chat_template_kwargs=KO).prompt
    assert ours == _upstream_of(oracle, template) == "Hello|en"


def _upstream_of(oracle: OracleClient, template: str) -> str:
    answer = oracle.chat_apply(template, {"messages": TEXT, "chat_template_kwargs": KO, "add_generation_prompt": True})
    assert not isinstance(answer, OracleError), answer
    return str(answer["prompt"])
