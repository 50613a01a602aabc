"""The LiteRT-LM template registry: a chat template for a bundle, by family, from its file name.

    family = family_for(path, model_type)   -> Family | None
    family.template()                       the family's Jinja source (shipped in templates/)
    LITERT_LM_QWEN3_CHAT_TEMPLATE           the canonical Qwen 3 template (exported by ``llamact``)

LiteRT-LM's C API gives no way to read a bundle's embedded template, and bundles made for older
runtimes embed none, or only a single-turn form. The specification's answer is a registry keyed
by the file name for the Gemma and Qwen LiteRT-LM families; llamact reads the embedded template
from the file as well (``bundle.py``), so the registry is what a bundle without a usable one gets,
and, for Qwen 3, the template that replaces the bundle's: legacy Qwen 3 bundles render a generic
ChatML that ignores ``enable_thinking``, so the canonical one is given to the runtime too
(``replaces_bundle_template``). A bundle's declared model type (LlmMetadata field 6) identifies
its family as surely as its name does; for a renamed Qwen 3 bundle without one, the specification's
answer is ``ModelParams(chat_template=LITERT_LM_QWEN3_CHAT_TEMPLATE)``: the canonical template, read
from the installed package when llamact is imported (so it follows llamact's upgrades; no Jinja to
copy), which both sides then render as they render a Qwen 3 bundle's.

The entries are ordered most specific first (``gemma-4`` and ``gemma-3n`` before ``gemma-3``,
``qwen3.5`` before ``qwen3`` before ``qwen2``). The templates are the models' own, as llama.cpp's
tree carries them (``models/templates``: Gemma 4, Gemma 2, Qwen 3, Qwen 3.5, Qwen 2.5); Gemma 3's
own template is not in that tree, so the Gemma 2 / 3 / 3n family gets Gemma 2's (the same turn
markers; a system message must then come from the bundle's template or ModelParams.chat_template).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

__all__ = ["FAMILIES", "LITERT_LM_QWEN3_CHAT_TEMPLATE", "Family", "family_for"]


@dataclass(frozen=True)
class Family:
    name: str
    template_file: str
    file_names: tuple[str, ...]          # lower-case substrings of the bundle's file name
    model_types: tuple[str, ...] = ()    # bundle.MODEL_TYPES names that identify the family
    replaces_bundle_template: bool = False

    def template(self) -> str:
        return _template_source(self.template_file)

    def matches_name(self, path: Path) -> bool:
        name = _normalized(path.name)
        return any(_normalized(key) in name for key in self.file_names)


FAMILIES: tuple[Family, ...] = (
    Family("gemma4", "gemma4.jinja", ("gemma-4", "gemma4"), ("gemma4",)),
    Family("gemma3n", "gemma2.jinja", ("gemma-3n", "gemma3n"), ("gemma3n",)),
    Family("gemma", "gemma2.jinja", ("gemma-3", "gemma3", "gemma-2", "gemma2"), ("gemma3", "gemma3_270m")),
    Family("qwen3_5", "qwen3_5.jinja", ("qwen3.5", "qwen3_5", "qwen-3.5")),
    Family("qwen3", "qwen3.jinja", ("qwen3", "qwen-3"), ("qwen3",), replaces_bundle_template=True),
    Family("qwen2_5", "qwen2_5.jinja", ("qwen2.5", "qwen-2.5", "qwen2_5", "qwen2"), ("qwen2p5",)),
)


QWEN3: Family = next(f for f in FAMILIES if f.name == "qwen3")


def _normalized(text: str) -> str:
    return re.sub(r"[\s_]+", "-", text.lower())


def family_for(path: str | Path, model_type: str | None = None) -> Family | None:
    """The family of the bundle at ``path``: by its file name, else by its declared model type."""
    path = Path(path)
    for family in FAMILIES:
        if family.matches_name(path):
            return family
    for family in FAMILIES:
        if model_type is not None and model_type in family.model_types:
            return family
    return None


@functools.cache
def _template_source(file: str) -> str:
    return (resources.files(__package__) / "templates" / file).read_text(encoding="utf-8")


#: The canonical Qwen 3 chat template LiteRT-LM bundles of the Qwen 3 family get (the specification's
#: ``liteRtLmQwen3ChatTemplate``): set it as ``ModelParams.chat_template`` for a renamed Qwen 3 bundle
#: that declares no model type.
LITERT_LM_QWEN3_CHAT_TEMPLATE: str = QWEN3.template()
"""The canonical Qwen 3 chat template, as the installed llamact ships it: give it to a renamed Qwen 3
``.litertlm`` bundle that declares no model type, ``ModelParams(chat_template=LITERT_LM_QWEN3_CHAT_TEMPLATE)``."""
