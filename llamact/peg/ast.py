"""The parse tree a PEG parse produces (upstream's ``common_peg_ast_node``).

Rule and tag parsers wrap what their child matched in an :class:`AstNode`; everything else only
passes its children's nodes up. Positions are byte offsets into the parsed input (UTF-8), as
upstream's are. Nodes are immutable once made, and an incremental parse shares the nodes of
everything that was complete before the input grew.

Upstream keeps nodes in an arena and children as ids; here children are the nodes themselves
(ids carried no meaning beyond the arena). ``text`` decodes the node's bytes (a stray invalid
byte becomes U+FFFD); :meth:`AstNode.sanitized_text` is upstream's: every recorded invalid run
becomes one U+FFFD.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

#: an invalid UTF-8 run: (byte position, length)
InvalidRun = tuple[int, int]


class Source:
    """The input an incremental parse has seen so far. Nodes share it, so a node kept from an
    earlier (shorter) input reads the newest bytes, which extend the ones it was made from."""

    __slots__ = ("data",)

    def __init__(self, data: bytes = b"") -> None:
        self.data = data


class AstNode:
    """One rule or tag match: ``rule`` or ``tag`` (the other is ""), its span, children and
    whether it is partial (its parser needed more input)."""

    __slots__ = ("rule", "tag", "start", "end", "children", "is_partial", "invalid_utf8", "_source", "has_tags",
                 "_text")

    def __init__(self, rule: str, tag: str, start: int, end: int, source: bytes | Source, children: tuple[AstNode, ...],
                 is_partial: bool, invalid_utf8: tuple[InvalidRun, ...]) -> None:
        self.rule = rule
        self.tag = tag
        self.start = start
        self.end = end
        self._source = source
        self.children = children
        self.is_partial = is_partial
        self.invalid_utf8 = invalid_utf8
        #: whether this node or a descendant is a tag node (lets mappers skip plain rule subtrees)
        self.has_tags: bool = bool(tag) or any(c.has_tags for c in children)
        self._text: str | None = None

    @property
    def raw(self) -> bytes:
        """The node's input bytes (empty when it starts at the end of the input, as upstream's)."""
        src = self._source
        data = src if isinstance(src, bytes) else src.data
        if self.start >= len(data):
            return b""
        return data[self.start:self.end]

    @property
    def text(self) -> str:
        # decoded once: a node kept across an incremental parse is mapped again on every token
        if self._text is None:
            self._text = self.raw.decode("utf-8", "replace")
        return self._text

    def sanitized_text(self) -> str:
        """The text with every invalid UTF-8 run replaced by one U+FFFD (upstream's sanitized_text)."""
        if not self.invalid_utf8:
            return self.text
        out = []
        seg = self.start
        src = self._source if isinstance(self._source, bytes) else self._source.data
        for pos, length in self.invalid_utf8:
            out.append(src[seg:pos].decode("utf-8", "replace"))
            out.append("\ufffd")
            seg = pos + length
        out.append(src[seg:self.end].decode("utf-8", "replace"))
        return "".join(out)

    def __repr__(self) -> str:
        kind = f"rule={self.rule!r}" if self.rule else f"tag={self.tag!r}"
        partial = " partial" if self.is_partial else ""
        return f"AstNode({kind} [{self.start}:{self.end}]{partial} {self.text!r} children={len(self.children)})"

    def to_json(self) -> dict[str, object]:
        """The oracle's ``peg_parse`` shape of this subtree (for parity tests)."""
        return {"rule": self.rule, "tag": self.tag, "start": self.start, "end": self.end,
                "is_partial": self.is_partial, "invalid_utf8": [list(r) for r in self.invalid_utf8],
                "children": [c.to_json() for c in self.children]}


def visit(nodes: Iterable[AstNode]) -> Iterator[AstNode]:
    """Every node of these trees in upstream's visit order (pre-order, children left to right)."""
    stack = list(reversed(tuple(nodes)))
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(node.children))


def find_by_tag(parent: AstNode, tag: str, max_depth: int = 3) -> AstNode | None:
    """The first descendant tagged ``tag`` within ``max_depth`` levels (upstream's depth-first order)."""
    return _find(parent, "tag", tag, max_depth)


def find_by_rule(parent: AstNode, rule: str, max_depth: int = 3) -> AstNode | None:
    """The first descendant of rule ``rule`` within ``max_depth`` levels."""
    return _find(parent, "rule", rule, max_depth)


def _find(parent: AstNode, field: str, value: str, max_depth: int) -> AstNode | None:
    for child in parent.children:
        if getattr(child, field) == value:
            return child
        if max_depth > 1:
            found = _find(child, field, value, max_depth - 1)
            if found is not None:
                return found
    return None
