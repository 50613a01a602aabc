"""The template set (upstream's ``common_chat_templates_init``, chat.cpp): sources, patches, tokens, caps.

    load_chat_templates(source=None, *, model_default=None, model_tool_use=None, bos_token="",
                        eos_token="", add_bos=False, add_eos=False, origin=...) -> ChatTemplates
    compile_chat_template(source, bos_token="", eos_token="", origin=...) -> ChatTemplate    (cached)

Where the source comes from, in upstream's order: an explicit override; else the model's
``tokenizer.chat_template`` and its ``tool_use`` variant. An empty or ``"chatml"`` default falls
back to the tool_use variant, else to upstream's built-in ChatML. A model holding a template *name*
(llama.cpp answers ``"mistral-v7-tekken"`` for some Mistral GGUFs) gets upstream's behaviour: the
name is Jinja source like any other. Two upstream source patches are applied (GPT-OSS's content
check, Mistral's empty-content check). Everything that depends only on (source, bos, eos) -- the
compiled template, its caps -- is computed once and cached.

Raises ``JinjaSyntaxError`` (naming ``origin``) when the default template does not compile; a
broken tool_use variant is ignored, as upstream ignores it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from ..jinja import CompiledTemplate, JinjaException, JinjaSyntaxError, compile_template
from ..jinja.caps import TemplateCaps, template_caps

__all__ = [
    "CHATML_TEMPLATE", "ORIGIN_MODEL", "ORIGIN_OVERRIDE", "ORIGIN_PER_CALL", "ChatTemplate", "ChatTemplates",
    "compile_chat_template", "load_chat_templates", "normalized_source",
]

# Where a template came from: named in every error it causes.
ORIGIN_MODEL = "model metadata (tokenizer.chat_template)"
ORIGIN_OVERRIDE = "ModelParams.chat_template"
ORIGIN_PER_CALL = "per-call custom_template"

CHATML_TEMPLATE = (
    "{%- for message in messages -%}\n"
    "  {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' -}}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "  {{- '<|im_start|>assistant\\n' -}}\n"
    "{%- endif -%}"
)

_GPT_OSS_CHECK = ('{%- if "<|channel|>analysis<|message|>" in message.content or '
                  '"<|channel|>final<|message|>" in message.content %}')
_MISTRAL_CHECK = ("{%- if (message['content'] is none or message['content'] == '' or "
                  "message['content']|length == 0) and (message['tool_calls'] is not defined or "
                  "message['tool_calls'] is none or message['tool_calls']|length == 0) %}")


def normalized_source(source: str) -> str:
    """The source as upstream's lexer keeps it (``tmpl.source()``): line ends as ``\\n``, one trailing
    newline dropped. Format detection searches this text."""
    if not source:
        return source
    out = source.replace("\r\n", "\n").replace("\r", "\n")
    return out[:-1] if source.endswith("\n") else out


def _patched(source: str) -> str:
    """Upstream's two temporary source patches (chat.cpp, ``common_chat_templates_init``)."""
    if "<|channel|>" in source and "in message.content or" in source:
        source = source.replace(_GPT_OSS_CHECK, "{%- if false %}")
    if "[TOOL_CALLS]" in source and "if (message['content'] is none or" in source:
        source = source.replace(_MISTRAL_CHECK, "{%- if false %}")
    return source


@dataclass(frozen=True, eq=False)
class ChatTemplate:
    """One compiled chat template (``common_chat_template``) with its special tokens and caps."""

    source: str          # as upstream's lexer keeps it (normalized_source)
    bos_token: str
    eos_token: str
    origin: str
    compiled: CompiledTemplate
    caps: TemplateCaps


@functools.lru_cache(maxsize=128)
def _cached_template(source: str, bos_token: str, eos_token: str, origin: str) -> ChatTemplate:
    try:
        source.encode("utf-8")
    except UnicodeEncodeError as exc:
        # a model file's template is UTF-8; only a Python string can hold a lone surrogate
        raise JinjaSyntaxError(f"the template holds a lone surrogate at character {exc.start}, which has no UTF-8 form",
                               origin) from None
    compiled = compile_template(source, origin, context_source=normalized_source(source))
    return ChatTemplate(normalized_source(source), bos_token, eos_token, origin, compiled, template_caps(source))


def compile_chat_template(source: str, bos_token: str = "", eos_token: str = "",
                          origin: str = ORIGIN_PER_CALL) -> ChatTemplate:
    """The compiled template and its caps for ``source`` (cached by source, tokens and origin).
    Raises ``JinjaSyntaxError`` naming ``origin`` when the source does not compile."""
    return _cached_template(source, bos_token, eos_token, origin)


@dataclass(frozen=True, eq=False)
class ChatTemplates:
    """A model's templates (``common_chat_templates``): the default one, always set, and the optional
    tool_use variant (chosen when a request has tools)."""

    default: ChatTemplate
    tool_use: ChatTemplate | None
    add_bos: bool
    add_eos: bool
    has_explicit_template: bool

    def for_request(self, has_tools: bool) -> ChatTemplate:
        return self.tool_use if has_tools and self.tool_use is not None else self.default


def load_chat_templates(source: str | None = None, *, model_default: str | None = None,
                        model_tool_use: str | None = None, bos_token: str = "", eos_token: str = "",
                        add_bos: bool = False, add_eos: bool = False,
                        origin: str | None = None) -> ChatTemplates:
    """Upstream's ``common_chat_templates_init`` (see the module docstring).

    ``source`` is an explicit template (override or per call); ``model_default`` / ``model_tool_use``
    are what the model's metadata holds (None when absent). ``origin`` names the source in errors
    (default: ORIGIN_PER_CALL for ``source``, else ORIGIN_MODEL).
    """
    default_src, tool_use_src = "", ""
    has_explicit = bool(source)
    if source:
        default_src = source
        default_origin = origin or ORIGIN_PER_CALL
    else:
        if model_default is not None:
            default_src, has_explicit = model_default, True
        if model_tool_use is not None:
            tool_use_src, has_explicit = model_tool_use, True
        default_origin = origin or ORIGIN_MODEL
    if not default_src or default_src == "chatml":
        default_src = tool_use_src or CHATML_TEMPLATE
    default = compile_chat_template(_patched(default_src), bos_token, eos_token, default_origin)
    tool_use = None
    if tool_use_src:
        try:
            tool_use = compile_chat_template(tool_use_src, bos_token, eos_token,
                                             (origin or ORIGIN_MODEL) + " [tool_use]")
        except JinjaException:
            tool_use = None  # upstream logs and ignores a broken tool_use variant
    return ChatTemplates(default, tool_use, add_bos, add_eos, has_explicit)

