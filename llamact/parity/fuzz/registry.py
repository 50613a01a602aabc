"""The built-in fuzz targets by name, in the order a run takes them: the table ``cli.py`` and the
replay tests read. A new target is one more class here."""

from __future__ import annotations

from collections.abc import Callable

from .target import FuzzContext, Target
from .targets_apply import ChatApplyTarget
from .targets_grammar import GbnfTarget, JsonSchemaTarget
from .targets_parse import ChatParseTarget, PegParseTarget
from .targets_templates import CapsTarget, JinjaRenderTarget

__all__ = ["BUILT_IN", "all_targets"]

BUILT_IN: tuple[type[Target], ...] = (ChatApplyTarget, JsonSchemaTarget, GbnfTarget, ChatParseTarget, PegParseTarget,
                                      JinjaRenderTarget, CapsTarget)


def all_targets() -> dict[str, Callable[[FuzzContext], Target]]:
    """Each built-in target's factory under its name."""
    return {target.name: target for target in BUILT_IN}
