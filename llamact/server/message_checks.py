"""The checks llama-server makes of a chat body's messages before it parses them, with its words.

    check_messages(messages)      # LlamaRequestException naming the first message llama-server would refuse

llama-server's ``oaicompat_chat_params_parse`` (tools/server/server-common.cpp) walks the messages
before handing them to the chat parser: a non-assistant message needs ``content``, an assistant one
``content`` or ``tool_calls``, content is a string, null or a list of parts, and a part is text or a
media part the model must be able to take. Those errors reach a client with its messages ("All
non-assistant messages must contain 'content'", "unsupported content[].type"); llamact's parser
(``chat.oai``) words the same refusals its own way, so the server says them first. A media part the
model cannot take (no projector, or one without that modality; video always: mtmd is built without
it) is refused with its words, as a 400 where it answers 500 (docs/design.md deviation 12).
"""

from __future__ import annotations

from ..errors import LlamaRequestException
from ..json_types import Json

__all__ = ["MEDIA_REFUSALS", "check_messages"]

_HINT = " input is not supported - hint: if this is unexpected, you may need to provide the mmproj"
MEDIA_REFUSALS = {"image_url": "image" + _HINT, "input_audio": "audio" + _HINT,
                  "input_video": "video" + _HINT, "video_url": "video" + _HINT}


def _role(message: Json) -> str:
    role = message.get("role") if isinstance(message, dict) else None
    return role if isinstance(role, str) else ""


def check_messages(messages: list[Json], *, allow_image: bool = False, allow_audio: bool = False) -> None:
    """Raise ``LlamaRequestException`` (400 on the server) for the first message llama-server refuses;
    ``allow_image`` / ``allow_audio``: the server's projector takes that kind of media part."""
    allowed = {kind for kind, ok in (("image_url", allow_image), ("input_audio", allow_audio)) if ok}
    for message in messages:
        keys = message.keys() if isinstance(message, dict) else ()
        role = _role(message)
        if role != "assistant" and "content" not in keys:
            raise LlamaRequestException("All non-assistant messages must contain 'content'")
        if role == "assistant":
            if "content" not in keys and "tool_calls" not in keys:
                raise LlamaRequestException("Assistant message must contain either 'content' or 'tool_calls'!")
            if "content" not in keys:
                continue
        content = message["content"]
        if content is None or isinstance(content, str):
            continue
        if not isinstance(content, list):
            raise LlamaRequestException("Expected 'content' to be a string or an array")
        for part in content:
            kind = part.get("type") if isinstance(part, dict) else None
            kind = kind if isinstance(kind, str) else ""
            if kind in allowed:
                continue
            if kind in MEDIA_REFUSALS:
                raise LlamaRequestException(MEDIA_REFUSALS[kind])
            if kind != "text":
                raise LlamaRequestException("unsupported content[].type")
