"""Rendering a template for the analysis and comparing two renders (upstream's ``apply_template`` /
``compare_variants``, chat-auto-parser-helpers.cpp).

    TemplateParams                      upstream's ``template_params``
    TemplateProbe(tmpl).render(params) -> str          RENDER_FAILED when the template raises
    TemplateProbe(tmpl).compare(params, **changes) -> Comparison | None

A render is ``direct_apply`` with ``messages``, ``tools`` (when non-empty), ``add_generation_prompt``,
``enable_thinking`` and the extra context plus ``enable_thinking`` again, as upstream builds it (no
date variables). A template that raises yields upstream's sentinel text, and a comparison with a
failed side is None: the analysis skips that probe. One probe keeps one clock for all its renders
(templates printing the date then agree between the two sides of every comparison) and remembers
its renders: the phases render several conversations more than once.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace
from typing import Any

from ...errors import LlamaException
from ...json_types import Json
from ..render import TemplateInputs, direct_apply
from ..templates import ChatTemplate
from .diff_split import DiffSplit, calculate_diff_split

__all__ = ["RENDER_FAILED", "Comparison", "TemplateParams", "TemplateProbe"]

#: upstream's ERR_TMPL: what a failed render reads as
RENDER_FAILED = "#**ERROR**#"


@dataclass(frozen=True)
class TemplateParams:
    """What one render of the analysis varies (``tools`` None: no tools variable)."""

    messages: Json = field(default_factory=list)
    tools: Json = None
    add_generation_prompt: bool = False
    enable_thinking: bool = True
    extra_context: dict[str, Json] | None = None


@dataclass(frozen=True)
class Comparison:
    """Two renders and their diff split (upstream's ``compare_variants_result``)."""

    diff: DiffSplit
    output_a: str
    output_b: str


class TemplateProbe:
    """Renders one template for the analysis, with one clock and a memo of renders."""

    def __init__(self, tmpl: ChatTemplate, now: float | None = None) -> None:
        self.tmpl = tmpl
        self.now = time.time() if now is None else now
        self._renders: dict[str, str] = {}

    def render(self, params: TemplateParams) -> str:
        key = json.dumps([params.messages, params.tools, params.add_generation_prompt, params.enable_thinking,
                          params.extra_context], sort_keys=False)
        cached = self._renders.get(key)
        if cached is None:
            cached = self._renders[key] = self._render(params)
        return cached

    def _render(self, params: TemplateParams) -> str:
        extra = dict(params.extra_context or {})
        extra["enable_thinking"] = params.enable_thinking
        inputs = TemplateInputs(messages=params.messages, tools=params.tools,
                                add_generation_prompt=params.add_generation_prompt,
                                enable_thinking=params.enable_thinking, extra_context=extra, now=self.now)
        try:
            return direct_apply(self.tmpl, inputs)
        except LlamaException:
            return RENDER_FAILED

    def compare(self, params: TemplateParams, **changes: Any) -> Comparison | None:
        """Render ``params`` (A) and ``params`` with ``changes`` (B); None when either render fails."""
        output_a = self.render(params)
        output_b = self.render(replace(params, **changes))
        if RENDER_FAILED in (output_a, output_b):
            return None
        return Comparison(calculate_diff_split(output_a, output_b), output_a, output_b)
