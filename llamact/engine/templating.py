"""A loaded model's chat templates, as llama-server sets them up (``common_chat_templates_init`` with a model).

The template source, in order (docs/design.md deviation 7): a per-call ``custom_template``, else
``ModelParams.chat_template`` (replacing the model's template and its tool_use variant for every
request), else the GGUF's ``tokenizer.chat_template`` and ``tokenizer.chat_template.tool_use``.
BOS / EOS are the vocab's special tokens rendered as text (empty when the vocab has none), and
add_bos / add_eos the vocab's flags. The model's own template set is built once per engine; the
compiled templates and caps are cached by source anyway.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from ..chat.templates import ORIGIN_MODEL, ORIGIN_OVERRIDE, ORIGIN_PER_CALL, ChatTemplates, load_chat_templates
from ..native.model import Model


@dataclass(frozen=True)
class _Tokens:
    bos: str
    eos: str
    add_bos: bool
    add_eos: bool


def _special_text(model: Model, token: int | None) -> str:
    if token is None:
        return ""
    return model.vocab.token_to_piece(token, special=True).decode("utf-8", errors="replace")


class EngineTemplates:
    """The template sets of one engine's model (see the module docstring)."""

    def __init__(self, model: Model, override: str | None) -> None:
        self._model = model
        self._override = override or None
        self._lock = threading.Lock()
        self._tokens: _Tokens | None = None
        self._default: ChatTemplates | None = None

    def tokens(self) -> _Tokens:
        if self._tokens is None:
            vocab = self._model.vocab
            self._tokens = _Tokens(_special_text(self._model, vocab.bos), _special_text(self._model, vocab.eos),
                                   vocab.add_bos, vocab.add_eos)
        return self._tokens

    def templates(self, custom_template: str | None = None) -> ChatTemplates:
        """The template set for a request; ``custom_template`` (Jinja source) wins over everything."""
        t = self.tokens()
        if custom_template:
            return load_chat_templates(custom_template, bos_token=t.bos, eos_token=t.eos, add_bos=t.add_bos,
                                       add_eos=t.add_eos, origin=ORIGIN_PER_CALL)
        with self._lock:
            if self._default is None:
                if self._override:
                    self._default = load_chat_templates(self._override, bos_token=t.bos, eos_token=t.eos,
                                                        add_bos=t.add_bos, add_eos=t.add_eos, origin=ORIGIN_OVERRIDE)
                else:
                    self._default = load_chat_templates(
                        model_default=self._model.template_source(),
                        model_tool_use=self._model.template_source("tool_use"),
                        bos_token=t.bos, eos_token=t.eos, add_bos=t.add_bos, add_eos=t.add_eos, origin=ORIGIN_MODEL)
            return self._default
