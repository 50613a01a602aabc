"""ChatRequest: the one typed chat request, checked once when it is made (no model needed)."""

from __future__ import annotations

import dataclasses
import re

import pytest

from llamact import ChatRequest, LlamaRequestException
from llamact.chat import ChatRequestError, apply_chat_template, chat_inputs
from llamact.chat.request import as_chat_request

HELLO = [{"role": "user", "content": "Hi"}]
TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}
CHATML = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def test_the_request_keeps_parsed_copies_of_what_it_was_given() -> None:
    messages = [{"role": "user", "content": "Hi"}]
    kwargs = {"x": [1]}
    request = ChatRequest(messages, tools=[TOOL], chat_template_kwargs=kwargs)
    messages[0]["content"] = "changed"
    kwargs["x"].append(2)
    assert request.messages[0].content == "Hi"
    assert request.tools[0].name == "f"
    assert request.chat_template_kwargs == {"x": [1]} and request.inputs.chat_template_kwargs == {"x": [1]}


@pytest.mark.parametrize(("options", "message"), [
    ({"tools": [TOOL], "grammar": 'root ::= "x"'}, "Cannot use custom grammar constraints with tools."),
    ({"response_format": {"type": "json_object"}, "grammar": 'root ::= "x"'},
     "Cannot use both json_schema and grammar"),
    ({"chat_template_kwargs": {"enable_thinking": "no"}}, 'invalid type for "enable_thinking"'),
    ({"tool_choice": "required"}, 'tool_choice "required" needs at least one tool'),
    ({"tools": [TOOL], "tool_choice": {"type": "function", "function": {"name": "g"}}}, "not among the request's"),
    ({"continue_final_message": True, "add_generation_prompt": True}, "Cannot set both add_generation_prompt"),
    ({"thinking_budget_tokens": -2}, "thinking_budget_tokens must be -1"),
    ({"top_logprobs": 3, "logprobs": False}, "top_logprobs requires logprobs to be set to true"),
    ({"tools": [{}]}, "Failed to parse tools: Missing tool type"),
])
def test_a_request_is_checked_when_it_is_made(options: dict, message: str) -> None:
    with pytest.raises(ChatRequestError, match=re.escape(message)):
        ChatRequest(HELLO, **options)


def test_request_errors_are_request_exceptions() -> None:
    assert issubclass(ChatRequestError, LlamaRequestException)


def test_a_changed_copy_is_checked_again() -> None:
    request = ChatRequest(HELLO, tools=[TOOL])
    with pytest.raises(ChatRequestError, match="Cannot use custom grammar"):
        dataclasses.replace(request, grammar='root ::= "x"')
    assert dataclasses.replace(request, tool_choice="none").inputs.tool_choice == "none"


def test_reasoning_options_reach_the_template_inputs_as_llama_server_sets_them() -> None:
    assert ChatRequest(HELLO, reasoning_effort="none").inputs.enable_thinking is False
    assert ChatRequest(HELLO, reasoning_effort="high").inputs.chat_template_kwargs["reasoning_effort"] == "high"
    assert ChatRequest(HELLO, chat_template_kwargs={"enable_thinking": False}).inputs.enable_thinking is False
    assert ChatRequest(HELLO, preserve_reasoning=True).inputs.chat_template_kwargs["preserve_reasoning"] is True


def test_a_named_choice_is_required_plus_the_name() -> None:
    request = ChatRequest(HELLO, tools=[TOOL], tool_choice={"type": "function", "function": {"name": "f"}})
    assert (request.inputs.tool_choice, request.named_tool) == ("required", "f")


def test_a_misspelt_option_is_refused_by_name() -> None:
    with pytest.raises(ChatRequestError, match="did you mean 'tool_choice'"):
        as_chat_request(HELLO, {"tool_choise": "auto"})


def test_the_keyword_forms_build_the_same_request() -> None:
    request = ChatRequest(HELLO, tools=[TOOL], parallel_tool_calls=True, template_now=0.0)
    assert as_chat_request(HELLO, request.options()) == request
    assert as_chat_request(request, {}) is request
    assert chat_inputs(HELLO, tools=[TOOL], parallel_tool_calls=True, template_now=0.0) == request.inputs
    assert apply_chat_template(CHATML, request).prompt == apply_chat_template(CHATML, HELLO, tools=[TOOL],
                                                                                parallel_tool_calls=True,
                                                                                template_now=0.0).prompt


def test_a_per_call_template_wins_over_the_one_given() -> None:
    other = "{% for m in messages %}[{{ m.content }}]{% endfor %}"
    assert apply_chat_template(CHATML, HELLO, custom_template=other).prompt == "[Hi]"
