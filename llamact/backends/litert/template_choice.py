"""Which chat template a ``.litertlm`` model uses, on llamact's side and in the runtime.

    choice = choose_template(bundle, override)
    choice.source          what llamact renders and parses with (chat_template(), the rendered path)
    choice.runtime_source  what the runtime's conversation renders with (None: the bundle's own prompt affixes)
    choice.origin          named in errors and warnings

In order: ``ModelParams.chat_template`` (Jinja source, for both sides; an empty string too, as the
specification says of LiteRT-LM: it replaces the built-in template with none, so each message's
text reaches the model as it is, ``PASS_THROUGH``); a registry family whose template replaces the
bundle's (Qwen 3); the template embedded in the bundle (``jinja_prompt_template``), unless it is
the runtime's single-turn ``is_appending_to_prefill`` form, which cannot render a conversation;
the registry's template for the bundle's family; else llama.cpp's default, ChatML, on llamact's
side while the runtime keeps the bundle's own affixes.

The runtime renders ``bos_token`` and ``eos_token`` as empty strings and adds the start token
itself, so llamact renders these templates with both empty too: ``chat_template()``'s prompt is
what the runtime renders. Two rules of the runtime's template engine (MiniJinja) differ from
llama.cpp's Jinja, which llamact's follows: it keeps line breaks written as CR or CRLF (llama.cpp's
lexer makes them LF, as jinja2 does for Hugging Face), and it keeps a template's final line break
(llama.cpp's drops one). So the runtime is given the template with its line breaks as LF
(``runtime_source``: what every other engine renders, and what the model was trained on), and
llamact compiles ``render_source``, whose final line break is doubled so that one remains.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...chat.templates import CHATML_TEMPLATE, ORIGIN_OVERRIDE
from .bundle import BundleInfo
from .registry import Family, family_for

__all__ = ["ORIGIN_BUNDLE", "PASS_THROUGH", "TemplateChoice", "choose_template"]

ORIGIN_BUNDLE = "bundle metadata (LlmMetadata.jinja_prompt_template)"
# ModelParams.chat_template="" on LiteRT-LM: no template, every message's text as it is
PASS_THROUGH = "{%- for message in messages -%}{{- message['content'] -}}{%- endfor -%}"
_SINGLE_TURN = "is_appending_to_prefill"


@dataclass(frozen=True)
class TemplateChoice:
    source: str                   # as given: the override, the bundle's or the registry's
    runtime_source: str | None    # what the runtime's conversation renders (None: the bundle's affixes)
    origin: str
    family: Family | None

    @property
    def render_source(self) -> str:
        """What llamact compiles to render what the runtime renders (see the module docstring)."""
        if self.runtime_source is None:
            return self.source
        return self.runtime_source + "\n" if self.runtime_source.endswith("\n") else self.runtime_source


def _line_breaks_as_lf(source: str) -> str:
    return source.replace("\r\n", "\n").replace("\r", "\n")


def _rendered_by_both(source: str, origin: str, family: Family | None) -> TemplateChoice:
    return TemplateChoice(source, _line_breaks_as_lf(source), origin, family)


def choose_template(bundle: BundleInfo, override: str | None) -> TemplateChoice:
    """See the module docstring."""
    family = family_for(bundle.path, bundle.model_type)
    if override is not None:
        if override == "":
            return _rendered_by_both(PASS_THROUGH, f"{ORIGIN_OVERRIDE} (empty: no template)", family)
        source = CHATML_TEMPLATE if override == "chatml" else override   # as load_chat_templates reads it
        return _rendered_by_both(source, ORIGIN_OVERRIDE, family)
    registry = f"LiteRT-LM template registry ({family.name})" if family is not None else ""
    if family is not None and family.replaces_bundle_template:
        return _rendered_by_both(family.template(), registry, family)
    embedded = bundle.template
    if embedded and _SINGLE_TURN not in embedded:
        return _rendered_by_both(embedded, ORIGIN_BUNDLE, family)
    if family is not None:
        return TemplateChoice(family.template(), None, registry, family)
    return TemplateChoice(CHATML_TEMPLATE, None, "llama.cpp's ChatML (the bundle embeds no usable template)", family)
