"""The PEG parser arena: upstream's ``common_peg_arena``.

An :class:`Arena` holds the nodes (``nodes.py``) in id order (a node's id is its index), the named
rules (``name -> id``, kept in the order they were read) and the root id (:data:`INVALID_PARSER_ID`
when the arena has none). Its JSON form, upstream's ``to_json`` / ``from_json``, is read and written
by ``serialize.py``, which knows the nodes but not this class.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .nodes import INVALID_PARSER_ID, Parser, PegArenaError
from .serialize import fields_from_json, fields_to_json


@dataclass(frozen=True)
class Arena:
    """Parser nodes (id = index), rules (name -> id, insertion order) and the root id."""

    parsers: tuple[Parser, ...]
    rules: dict[str, int]
    root: int = INVALID_PARSER_ID

    def get(self, parser_id: int) -> Parser:
        """The node with this id; raises PegArenaError when there is none."""
        if not 0 <= parser_id < len(self.parsers):
            raise PegArenaError(f"parser id {parser_id} is out of range (the arena has {len(self.parsers)} parsers)",
                                {"id": parser_id})
        return self.parsers[parser_id]

    def get_rule(self, name: str) -> int:
        """The id of the rule ``name``; raises PegArenaError ("Rule not found") when there is none."""
        try:
            return self.rules[name]
        except KeyError:
            raise PegArenaError(f"Rule not found: {name}", {"rule": name}) from None

    @property
    def empty(self) -> bool:
        return not self.parsers

    def to_json(self) -> dict[str, Any]:
        """Upstream's ``common_peg_arena::to_json()`` shape (see serialize.py)."""
        return fields_to_json(self.parsers, self.rules, self.root)


def load_arena(obj: Any) -> Arena:
    """An arena from upstream's serialised JSON (a parsed object, or its text); raises PegArenaError."""
    return Arena(*fields_from_json(obj))
