"""Template targets: random conversations and tool sets rendered directly through every vendored
template (``jinja_render``), and the capabilities of vendored templates after small mutations that
keep them well-formed (``caps``).

Inputs: ``{"template": <file stem>, "context": {...}}`` for renders (plus ``"source"`` when the
template was mutated); ``{"template": <stem>, "source": <mutated source>}`` for caps. A mutation
drops an output tag, a text run or a ``set`` statement, or pins an ``if`` condition to true or
false: changes that move what the template reads (and so its capabilities) without breaking its
syntax.
"""

from __future__ import annotations

import random
import re
from typing import Any

from ...json_types import Json
from ..components import ORACLE_NOW
from ..corpus import BOS_TOKEN, EOS_TOKEN
from .gen_conversation import conversation, random_json_value, tools
from .target import FuzzContext, Target

_SEGMENTS = re.compile(r"(\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\})", re.DOTALL)
_IF = re.compile(r"^(\{%-?\s*(?:el)?if\s+)(.*?)(\s*-?%\})$", re.DOTALL)
_SET = re.compile(r"^\{%-?\s*set\s+[^%]*=.*-?%\}$", re.DOTALL)


def mutate_template(source: str, rng: random.Random) -> str:
    """One to three well-formedness-keeping mutations of ``source`` (see the module docstring)."""
    parts = _SEGMENTS.split(source)
    for _ in range(rng.randint(1, 3)):
        outputs = [i for i, p in enumerate(parts) if p.startswith("{{")]
        ifs = [i for i, p in enumerate(parts) if _IF.match(p)]
        sets = [i for i, p in enumerate(parts) if _SET.match(p)]
        texts = [i for i, p in enumerate(parts) if p and not p.startswith(("{{", "{%", "{#"))]
        choices = [c for c in (outputs, ifs, sets, texts) if c]
        if not choices:
            break
        pool = rng.choice(choices)
        i = rng.choice(pool)
        if pool is ifs:
            m = _IF.match(parts[i])
            assert m is not None
            parts[i] = m.group(1) + rng.choice(["true", "false"]) + m.group(3)
        else:
            parts[i] = ""
    return "".join(parts)


def _context(rng: random.Random) -> Json:
    tool_set = tools(rng) if rng.random() < 0.5 else None
    context: Json = {"messages": conversation(rng, tool_set)}
    if tool_set:
        context["tools"] = tool_set
    context.update(bos_token=BOS_TOKEN, eos_token=EOS_TOKEN)
    if rng.random() < 0.7:
        context["add_generation_prompt"] = True
    context["enable_thinking"] = rng.random() < 0.5
    for key in ("reasoning_effort", "tool_choice", "builtin_tools", "custom_key"):
        if rng.random() < 0.1:
            context[key] = rng.choice(["low", "high", "auto"]) if key != "builtin_tools" else \
                random_json_value(rng)
    return context


class JinjaRenderTarget(Target):
    name = "jinja_render"
    component = "template_jinja"
    unit = "render"
    fixed_keys = frozenset({"template"})

    def generate(self, rng: random.Random) -> Json:
        stem = rng.choice(self.ctx.template_names())
        inp: Json = {"template": stem}
        if rng.random() < 0.1:
            inp["source"] = mutate_template(self.ctx.template(stem), rng)
        inp["context"] = _context(rng)
        return inp

    def _source(self, inp: Json) -> str:
        return str(inp["source"]) if "source" in inp else self.ctx.template(inp["template"])

    def request(self, inp: Json) -> dict[str, Any]:
        return {"op": "jinja_render", "template": self._source(inp), "context": inp.get("context", {})}

    def run(self, inp: Json) -> Json:
        from ...jinja import render

        return render(self._source(inp), inp.get("context", {}), now=ORACLE_NOW, source_name=inp["template"])


class CapsTarget(Target):
    name = "caps"
    component = "caps"
    unit = "template"
    fixed_keys = frozenset({"template"})
    ordered = True

    def generate(self, rng: random.Random) -> Json:
        stem = rng.choice(self.ctx.template_names())
        return {"template": stem, "source": mutate_template(self.ctx.template(stem), rng)}

    def request(self, inp: Json) -> dict[str, Any]:
        return {"op": "caps", "template": inp.get("source", "")}

    def run(self, inp: Json) -> Json:
        from ...jinja.caps import template_caps

        return template_caps(inp.get("source", "")).to_map()


__all__ = ["CapsTarget", "JinjaRenderTarget", "mutate_template", "FuzzContext"]
