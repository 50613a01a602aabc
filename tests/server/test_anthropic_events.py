"""``AnthropicEvents`` on made-up chunk sequences, for what the live cases do not reach with SmolLM2:
the final parse's deltas. llama-server's final result renders them with no block counted as open
(``to_json_anthropic_stream`` keeps its own, empty, state), so a delta there opens its block a second
time, and a call's index counts the final message's thought and text. Read from server-task.cpp at
the pin; the live cases of the wire-parity module do not produce final-parse deltas (looked at for
its tool case: one content_block_start per index)."""

from __future__ import annotations

from types import SimpleNamespace

from llamact.chat.deltas import ToolCallDelta
from llamact.chat.messages import ChatMessage, ToolCall
from llamact.engine.chat_types import ChatChunk, Usage
from llamact.server.messages.stream import AnthropicEvents, anthropic_sse


def _stream(message: ChatMessage, stop_string: str | None = None) -> SimpleNamespace:
    return SimpleNamespace(id="msg", n_prompt=10, n_cached=4, message=message, stop_string=stop_string)


def _names(events: list) -> list:
    return [(name, data.get("index"), (data.get("content_block") or data.get("delta") or {}).get("type"))
            for name, data in events]


def test_final_parse_deltas_open_their_blocks_again() -> None:
    message = ChatMessage(role="assistant", content="Hi.", reasoning_content="Hm",
                          tool_calls=[ToolCall("f", '{"a":1}', "id1")])
    renderer = AnthropicEvents(_stream(message), "m")
    chunks = [ChatChunk(role="assistant"), ChatChunk(thinking="Hm"), ChatChunk(content="Hi"),
              ChatChunk(tool_calls=(ToolCallDelta(0, "id1", "f", '{"a":'),)),
              ChatChunk(content=".", final_parse=True),
              ChatChunk(tool_calls=(ToolCallDelta(0, None, None, "1}"),), final_parse=True),
              ChatChunk(finish_reason="tool_calls", usage=Usage(10, 7, 4))]
    events = [e for c in chunks for e in renderer.render(c)]
    assert events[0] == ("message_start", {"type": "message_start", "message": {
        "id": "msg", "type": "message", "role": "assistant", "content": [], "model": "m", "stop_reason": None,
        "stop_sequence": None, "usage": {"cache_read_input_tokens": 4, "input_tokens": 6, "output_tokens": 0}}})
    assert _names(events[1:]) == [
        ("content_block_start", 0, "thinking"), ("content_block_delta", 0, "thinking_delta"),
        ("content_block_start", 1, "text"), ("content_block_delta", 1, "text_delta"),
        ("content_block_start", 2, "tool_use"), ("content_block_delta", 2, "input_json_delta"),
        # the final parse: blocks opened again
        ("content_block_start", 1, "text"), ("content_block_delta", 1, "text_delta"),
        ("content_block_start", 2, "tool_use"), ("content_block_delta", 2, "input_json_delta"),
        ("content_block_delta", 0, "signature_delta"), ("content_block_stop", 0, None),
        ("content_block_stop", 1, None), ("content_block_stop", 2, None),
        ("message_delta", None, None), ("message_stop", None, None)]
    assert events[9][1]["content_block"] == {"type": "tool_use", "id": "id1", "name": "f"}
    assert events[-2][1] == {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                             "usage": {"output_tokens": 7}}


def test_events_are_written_with_event_lines() -> None:
    assert anthropic_sse(("message_stop", {"type": "message_stop"})) == \
        b'event: message_stop\ndata: {"type":"message_stop"}\n\n'


def test_a_failed_stream_ends_with_an_error_event_holding_the_bare_error_object() -> None:
    """server-context.cpp's format_error for this route: ``event: error``, its data the error object
    itself (not wrapped in ``{"error": ...}`` as on the OpenAI routes), and no [DONE]."""
    from llamact.server.messages.stream import ANTHROPIC_FRAMING

    error = {"code": 500, "message": "boom", "type": "server_error"}
    assert ANTHROPIC_FRAMING.error(error) == \
        b'event: error\ndata: {"code":500,"message":"boom","type":"server_error"}\n\n'
    assert ANTHROPIC_FRAMING.done == b""
