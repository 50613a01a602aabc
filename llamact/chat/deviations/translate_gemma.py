"""Deviation 18: TranslateGemma's language codes from ``chat_template_kwargs``, defaulting to en-GB.

TranslateGemma's template reads the languages from each user message's content item
(``{"type": "text", "text": ..., "source_lang_code": "en", "target_lang_code": "ko"}``). At the
pin nothing puts them there: upstream's OpenAI conversion keeps only ``type`` and ``text`` of a part,
and ``chat_template_kwargs`` reach the template as globals only, so every request renders
"... from  to : ..." (the oracle shows it for parts with codes, for kwargs, for both). The
specification reads them from ``chat_template_kwargs``
(``{"source_lang_code": "en", "target_lang_code": "ko"}``), each defaulting to ``en-GB``, as
upstream's own TranslateGemma handler did before the pin.

A template is TranslateGemma's when its source names both item fields. Every text item of a user
message (the content normalised for the template's caps: a template that reads items gets a
string as one text item) gets the two codes it lacks; nothing else changes.

Enters: the template source, the messages as the template will see them (OpenAI JSON, changed in
place) and the request's ``chat_template_kwargs``. Raises nothing.
"""

from __future__ import annotations

from collections.abc import Mapping

from ...json_types import Json

__all__ = ["DEFAULT_LANGUAGE", "LANGUAGE_FIELDS", "add_language_codes", "reads_language_codes"]

LANGUAGE_FIELDS = ("source_lang_code", "target_lang_code")
DEFAULT_LANGUAGE = "en-GB"


def reads_language_codes(source: str) -> bool:
    """Whether the template reads TranslateGemma's language codes from its content items."""
    return all(name in source for name in LANGUAGE_FIELDS)


def add_language_codes(messages: Json, kwargs: Mapping[str, Json]) -> None:
    """Each text item of each user message gets the codes it lacks: the kwargs', else en-GB."""
    codes = {name: kwargs.get(name) if isinstance(kwargs.get(name), str) else DEFAULT_LANGUAGE
             for name in LANGUAGE_FIELDS}
    for message in messages if isinstance(messages, list) else ():
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            content = message["content"] = [{"type": "text", "text": content}]
        for item in content if isinstance(content, list) else ():
            if isinstance(item, dict) and item.get("type") == "text":
                for name, code in codes.items():
                    item.setdefault(name, code)
