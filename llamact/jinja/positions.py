"""Where upstream's parser puts each node: its type name and its position in the source.

Upstream's runtime errors name the innermost statement that failed and where it is ("While
executing MemberExpression at line 12, column 42"), and each node's position is that of one token
of it (parser.cpp ``mk_stmt(start_pos, ...)``): a ``for``, ``set``, ``if``, ``call`` or ``filter``
keyword; the ``{%`` before an ``elif``; a binary operator; the ``|`` of a filter; the ``is`` of a
test; the ``(`` of a call; the first ``.`` or ``[`` of a chain of member accesses (a call or
parentheses start a new chain); the ``else`` of a ternary; the ``{`` of an object literal; the
operator of a unary expression.

Enters: the token stream of ``LlamaLexer`` (each token knows its position and index) and the tree
``LlamaParser`` builds from it (each expression node knows its first and last token). Leaves, on
the nodes that can fail (``locate``): ``LOC`` = (upstream type name, position) -- for a ``~`` or
``+`` chain (one node here, several upstream) a tuple of positions, one per operator. Positions are
character offsets in the source the lexer saw (locations.py turns them into upstream's line,
column and excerpt).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from jinja2 import nodes
from jinja2.lexer import Token
from jinja2.parser import Parser

__all__ = ["LOC", "LlamaParser", "PosToken", "locate", "positioned"]

LOC = "llama_loc"      # on a node: (upstream type name, position or positions)
_SPAN = "llama_span"   # on a node: (index of its first token, index of its last token)


class PosToken(Token):
    """A token that knows its index in the stream and its character offset in the source."""

    pos: int
    idx: int


def positioned(raw: Iterator[tuple[int, str, str]], source: str) -> Iterator[tuple[int, str, str, int]]:
    """jinja2's raw tokens with their offsets: each token's text is found in ``source`` from where
    the previous one ended (what jinja2 drops between tokens is whitespace it strips)."""
    cursor = 0
    for lineno, token, value in raw:
        at = source.find(value, cursor) if value else -1
        if at < 0:
            at = cursor
        else:
            cursor = at + len(value)
        yield lineno, token, value, at


def _index(token: Token) -> int | None:
    return getattr(token, "idx", None)


def _spanned(name: str, takes_node: bool) -> Callable[..., Any]:
    base = getattr(Parser, name)

    def method(self: LlamaParser, *args: Any, **kwargs: Any) -> Any:
        given = args[0] if takes_node and args and isinstance(args[0], nodes.Node) else None
        start = _start(given) if given is not None else _index(self.stream.current)
        node = base(self, *args, **kwargs)
        if isinstance(node, nodes.Node) and node is not given and _SPAN not in node.__dict__:
            setattr(node, _SPAN, (start, self.last_index()))
        return node

    method.__name__ = name
    return method


class LlamaParser(Parser):
    """jinja2's parser, recording each expression's tokens and each statement's keyword."""

    def __init__(self, environment: Any, source: str, name: str | None = None, filename: str | None = None) -> None:
        super().__init__(environment, source, name, filename)
        self.tokens: list[PosToken] = getattr(self.stream, "llama_tokens", [])

    def last_index(self) -> int | None:
        """The index of the last token consumed."""
        current = _index(self.stream.current)
        if current is None:  # at the end of the stream
            return len(self.tokens) - 1 if self.tokens else None
        return current - 1

    def _keyword(self) -> tuple[int, int | None]:
        token = self.stream.current
        return getattr(token, "pos", -1), _index(token)

    def parse_for(self) -> nodes.For:
        pos, _ = self._keyword()
        node = super().parse_for()
        setattr(node, LOC, ("For", pos))
        return node

    def parse_set(self) -> nodes.Assign | nodes.AssignBlock:
        pos, _ = self._keyword()
        node = super().parse_set()
        setattr(node, LOC, ("Set", pos))
        return node

    def parse_call_block(self) -> nodes.CallBlock:
        pos, _ = self._keyword()
        node = super().parse_call_block()
        setattr(node.call, LOC, ("CallStatement", pos))
        return node

    def parse_filter_block(self) -> nodes.FilterBlock:
        pos, _ = self._keyword()
        node = super().parse_filter_block()
        setattr(node.filter, LOC, ("FilterStatement", pos))
        return node

    def parse_if(self) -> nodes.If:
        """jinja2's ``if`` grammar; each branch's node records upstream's position: the ``if``
        keyword, and for an ``elif`` the ``{%`` before it."""
        pos, _ = self._keyword()
        node = result = nodes.If(lineno=self.stream.expect("name:if").lineno)
        while True:
            setattr(node, LOC, ("If", pos))
            node.test = self.parse_tuple(with_condexpr=False)
            node.body = self.parse_statements(("name:elif", "name:else", "name:endif"))
            node.elif_ = []
            node.else_ = []
            token = next(self.stream)
            if token.test("name:elif"):
                index = _index(token)
                pos = self.tokens[index - 1].pos if index else -1
                node = nodes.If(lineno=self.stream.current.lineno)
                result.elif_.append(node)
                continue
            if token.test("name:else"):
                result.else_ = self.parse_statements(("name:endif",), drop_needle=True)
            break
        return result


for _name in ("parse_expression", "parse_condexpr", "parse_or", "parse_and", "parse_not", "parse_compare",
              "parse_math1", "parse_concat", "parse_math2", "parse_pow", "parse_unary", "parse_primary",
              "parse_tuple", "parse_list", "parse_dict"):
    setattr(LlamaParser, _name, _spanned(_name, takes_node=False))
for _name in ("parse_postfix", "parse_filter_expr", "parse_subscript", "parse_call", "parse_filter", "parse_test"):
    setattr(LlamaParser, _name, _spanned(_name, takes_node=True))


# -- upstream's positions --------------------------------------------------------------------------


def _start(node: nodes.Node) -> int | None:
    span = node.__dict__.get(_SPAN)
    if span is not None and span[0] is not None:
        return int(span[0])
    children = list(node.iter_child_nodes())
    return _start(children[0]) if children else None


def _end(node: nodes.Node) -> int | None:
    span = node.__dict__.get(_SPAN)
    if span is not None and span[1] is not None:
        return int(span[1])
    children = list(node.iter_child_nodes())
    return _end(children[-1]) if children else None


class _Locator:
    def __init__(self, tokens: list[PosToken]) -> None:
        self.tokens = tokens

    def after(self, node: nodes.Node, *types: str) -> int | None:
        """The position of the first token after ``node`` (closing parentheses skipped), when it is
        one of ``types`` (a type, or ``name:<word>``)."""
        end = _end(node)
        if end is None:
            return None
        i = end + 1
        while i < len(self.tokens) and self.tokens[i].type == "rparen":
            i += 1
        if i < len(self.tokens) and any(self.tokens[i].test(t) for t in types):
            return self.tokens[i].pos
        return None

    def before(self, node: nodes.Node) -> int | None:
        """The position of the token before ``node`` (opening parentheses skipped): its operator."""
        start = _start(node)
        if start is None:
            return None
        i = start - 1
        while i >= 0 and self.tokens[i].type == "lparen":
            i -= 1
        return self.tokens[i].pos if i >= 0 else None

    def member(self, node: nodes.Getattr | nodes.Getitem) -> int | None:
        """A chain of member accesses has its first ``.`` or ``[``'s position."""
        obj = node.node
        end = _end(obj)
        if isinstance(obj, (nodes.Getattr, nodes.Getitem)) and LOC in obj.__dict__ and end is not None \
                and end + 1 < len(self.tokens) and self.tokens[end + 1].type in ("dot", "lbracket"):
            return int(getattr(obj, LOC)[1])
        return self.after(obj, "dot", "lbracket")


_BINARY = {nodes.Add: ("add",), nodes.Sub: ("sub",), nodes.Mul: ("mul",), nodes.Div: ("div",),
           nodes.FloorDiv: ("floordiv",), nodes.Mod: ("mod",), nodes.Pow: ("pow",), nodes.And: ("name:and",),
           nodes.Or: ("name:or",)}
_COMPARE = ("eq", "ne", "lt", "lteq", "gt", "gteq", "name:in", "name:not")


def locate(tree: nodes.Template, tokens: list[PosToken]) -> None:
    """Set ``LOC`` on every node of ``tree`` that can fail at run time (see the module docstring)."""
    if not tokens:
        return
    loc = _Locator(tokens)

    def put(node: nodes.Node, kind: str, pos: Any) -> None:
        if pos is not None and LOC not in node.__dict__:
            setattr(node, LOC, (kind, pos))

    # find_all walks depth first, parents before children: a chain's inner member comes later, so
    # members are placed in a second pass, innermost first
    members: list[nodes.Getattr | nodes.Getitem] = []
    for node in tree.find_all(nodes.Node):
        kind = type(node)
        if kind in _BINARY:
            put(node, "BinaryExpression", loc.after(node.left, *_BINARY[kind]))  # type: ignore[attr-defined]
        elif isinstance(node, nodes.Compare):
            left: nodes.Node = node.expr
            for operand in node.ops:
                put(operand, "BinaryExpression", loc.after(left, *_COMPARE))
                left = operand.expr
        elif isinstance(node, nodes.Concat):
            ops = [loc.after(n, "tilde") for n in node.nodes[:-1]]
            if all(p is not None for p in ops):
                put(node, "BinaryExpression", tuple(ops))
        elif isinstance(node, (nodes.Not, nodes.Neg, nodes.Pos)):
            put(node, "UnaryExpression", loc.before(node.node))
        elif isinstance(node, (nodes.Getattr, nodes.Getitem)):
            members.append(node)
        elif isinstance(node, nodes.Call):
            put(node, "CallExpression", loc.after(node.node, "lparen"))
        elif isinstance(node, nodes.Filter) and node.node is not None:
            put(node, "FilterExpression", loc.after(node.node, "pipe"))
        elif isinstance(node, nodes.Test):
            put(node, "TestExpression", loc.after(node.node, "name:is"))
        elif isinstance(node, nodes.CondExpr):
            if node.expr2 is not None:
                put(node, "Ternary", loc.after(node.test, "name:else"))
            else:  # ``a if b``: upstream's select expression
                put(node, "SelectExpression", loc.after(node.expr1, "name:if"))
        elif isinstance(node, nodes.Dict):
            start = _start(node)
            if start is not None:
                put(node, "ObjectLiteral", tokens[start].pos)
    for member in reversed(members):
        put(member, "MemberExpression", loc.member(member))
