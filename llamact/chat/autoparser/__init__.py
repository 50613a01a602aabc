"""The differential autoparser: the route for every template that matches no specialized family
(upstream's chat-diff-analyzer / chat-auto-parser-generator, and the autoparser branch of
``common_chat_templates_apply_jinja`` in chat.cpp).

    apply_autoparser(tmpl, inputs) -> ChatParams

What enters: the chosen template and the request as the format builders see it
(:class:`~llamact.chat.render.TemplateInputs`, after the OpenAI conversions and workarounds).

What happens: the template is analysed (``analysis.analyze_template``: rendered with probe
conversations and diffed, to find its reasoning, content and tool-call markers; the result is an
:class:`~.model.AutoparserAnalysis`), then the generator (``generator.generate_parser``) renders the
prompt and builds the parser and grammar from that analysis.

What leaves: :class:`~llamact.chat.result.ChatParams` in upstream's ``peg-native`` format, with
the message delimiters taken from the analysis (assistant start, user start), ``supports_thinking``
when the analysis found reasoning, and the thinking tags trimmed of whitespace.

Raises :class:`AutoparserError` (a ``LlamaUnsupportedException``) when any of it fails: the template
raised while being rendered, a tool or response schema is outside the supported subset, ... The
message is upstream's ("Unable to generate parser for this template. Automatic parser generation
failed: " and the reason); the original exception is its ``__cause__``.
"""

from __future__ import annotations

from ...errors import LlamaException, LlamaUnsupportedException
from ...jinja import JinjaException
from ..render import TemplateInputs
from ..result import ChatParams
from ..templates import ChatTemplate
from .generator import generate_parser
from .helpers import trim_whitespace
from .model import AutoparserAnalysis, ReasoningMode

__all__ = ["AutoparserError", "apply_autoparser"]

_FAILED = "Unable to generate parser for this template. Automatic parser generation failed: "


class AutoparserError(LlamaUnsupportedException):
    """No parser could be generated for the template (upstream's ``std::invalid_argument``);
    ``reason`` is upstream's text, without llamact's naming of the template source."""

    reason: str = ""


def apply_autoparser(tmpl: ChatTemplate, inputs: TemplateInputs,
                     analysis: AutoparserAnalysis | None = None) -> ChatParams:
    """The prompt, parser and grammar of ``tmpl`` for ``inputs`` (see the module docstring).

    ``analysis`` replaces the template's own analysis (tests drive the generator with upstream's).
    """
    try:
        if analysis is None:
            from .analysis import analyze_template

            analysis = analyze_template(tmpl)
        data = generate_parser(tmpl, inputs, analysis)
    except LlamaException as exc:
        # upstream's what(): a template error's own text (its located message), not llamact's
        # "(template <origin>, line N)" suffix; the template's origin goes in the details
        inner = exc.reason if isinstance(exc, JinjaException) else exc.message
        reason = _FAILED + inner
        error = AutoparserError(reason, {"origin": tmpl.origin, "reason": reason})
        error.reason = reason
        raise error from exc

    pairs = []
    if analysis.assistant_start:
        pairs.append(("assistant", analysis.assistant_start))
    if analysis.user_start:
        pairs.append(("user", analysis.user_start))
    data.delimiters(*pairs)

    data.supports_thinking = analysis.reasoning.mode != ReasoningMode.NONE
    if data.supports_thinking:
        data.thinking_start_tag = trim_whitespace(analysis.reasoning.start)
        end_tag = trim_whitespace(analysis.reasoning.end)
        if end_tag:
            data.thinking_end_tags = [end_tag]
    return data
