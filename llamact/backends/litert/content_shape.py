"""The content-as-parts adapter: a template written for string content, made to work on LiteRT-LM 0.18.

    shape = classify(render)                -> ContentShape
    source = adapted(template)              the template with the prelude that gives it strings

From LiteRT-LM 0.18 the runtime hands a template each message's content as a list of parts,
``[{"type": "text", "text": ...}]``, where 0.17 passed the string. Templates written for strings
then fail in one of three ways (the specification's three shapes): one that concatenates
``message['content']`` fails the request ("+ operator on unsupported types string and sequence"),
one that interpolates it writes the serialized list into the prompt, and one that handles only
``content is string`` renders empty messages. A template that reads parts works as it is.

``classify`` asks the runtime's own template engine (``render`` renders a one-message
conversation whose content is a probe text and returns what the runtime rendered, "" when its
render failed), once per model and template, and tells the shapes apart by what comes out.
``adapted`` prepends a prelude, in the Jinja dialect the runtime's engine (MiniJinja) and llamact's
both run, that gives every message whose content is a list of parts its text as a string again,
so the bundle answers as it did with 0.17. Other keys of a message stay as they are (``dict(m,
content=...)``). A template the prelude cannot repair (one written in the runtime's single-turn
``is_appending_to_prefill`` form, or one that fails on strings too) is ``UNADAPTABLE``: the engine
logs one warning and a request that then fails names the template; the engine first checks whether
llamact's own Jinja renders it (a template with ``{% continue %}``, which MiniJinja rejects, is one):
then llamact renders its requests and the runtime only generates.
"""

from __future__ import annotations

import enum
from collections.abc import Callable

__all__ = ["PRELUDE", "PROBE", "ContentShape", "adapted", "classify"]

PROBE = "llamact probe 7f3a"

# Rebuilds ``messages`` with string content where a message has text parts (names without a
# leading underscore: the runtime's sandbox and llamact's both allow them).
PRELUDE = (
    "{%- set llamact_ns = namespace(messages=[]) -%}"
    "{%- for llamact_m in messages -%}"
    "{%- if llamact_m.content is string or llamact_m.content is none or llamact_m.content is not defined -%}"
    "{%- set llamact_ns.messages = llamact_ns.messages + [llamact_m] -%}"
    "{%- else -%}"
    "{%- set llamact_ns.messages = llamact_ns.messages + [dict(llamact_m, content=llamact_m.content"
    " | selectattr('type', 'equalto', 'text') | map(attribute='text') | join(''))] -%}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- set messages = llamact_ns.messages -%}"
)


class ContentShape(str, enum.Enum):
    READS_PARTS = "reads parts"            # works on the runtime's parts: left alone
    CONCATENATES = "concatenates"          # fails on parts
    INTERPOLATES = "interpolates"          # writes the serialized list into the prompt
    STRINGS_ONLY = "handles only strings"  # renders the message empty
    UNADAPTABLE = "cannot be adapted"

    @property
    def needs_prelude(self) -> bool:
        return self in (ContentShape.CONCATENATES, ContentShape.INTERPOLATES, ContentShape.STRINGS_ONLY)


def adapted(template: str) -> str:
    """``template`` with the prelude: its messages carry their text as strings."""
    return PRELUDE + template


def _serialized(rendered: str) -> bool:
    return "'type'" in rendered or '"type"' in rendered


def classify(render: Callable[[str, str], str], template: str) -> ContentShape:
    """The shape of ``template`` under the runtime: ``render(template, probe)`` is the runtime's
    render of a user message whose content is ``probe`` ("" when the render failed)."""
    plain = render(template, PROBE)
    if PROBE in plain and not _serialized(plain):
        return ContentShape.READS_PARTS
    fixed = render(adapted(template), PROBE)
    if PROBE not in fixed or _serialized(fixed):
        return ContentShape.UNADAPTABLE
    if not plain:
        return ContentShape.CONCATENATES
    return ContentShape.INTERPOLATES if _serialized(plain) else ContentShape.STRINGS_ONLY
