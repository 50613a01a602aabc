"""The tree pass that turns jinja2's Python-semantics nodes into calls of upstream's operations.

Enters: the tree ``LlamaParser`` built, with upstream's node types and positions on the nodes that
can fail (positions.LOC). Leaves: the same tree where comparisons, ``~``, ``+`` chains, slices,
loop iterables, ``set obj.attr`` and tuple assignments call the environment's internal filters
(upstream's semantics and messages), truth tests of ``if``, ternaries and loop filters call
``bool`` through a filter (so that a failing one is placed where upstream places it), and every
new node carries the position of what it replaces. Raises ``TemplateSyntaxError`` for the
statements upstream does not have.
"""

from __future__ import annotations

from typing import Any

from jinja2 import nodes
from jinja2.exceptions import TemplateSyntaxError
from jinja2.visitor import NodeTransformer

from .positions import LOC

__all__ = ["Rewriter", "TRUTH_FILTER"]

TRUTH_FILTER = "__llamact_truth"  # bool(): a value upstream tests for truth (a function is none)

_FORBIDDEN = (nodes.Extends, nodes.Include, nodes.Import, nodes.FromImport, nodes.Block, nodes.With,
              nodes.ScopedEvalContextModifier, nodes.EvalContextModifier)
_CMP = {"eq": "==", "ne": "!=", "gt": ">", "gteq": ">=", "lt": "<", "lteq": "<=", "in": "in", "notin": "notin"}


def _loc(node: nodes.Node) -> Any:
    return node.__dict__.get(LOC)


_NO_FUNCTION = frozenset({"__llamact_cmp", "__llamact_concat", "__llamact_add"})  # bools, strings, numbers


def _maybe_function(node: nodes.Node) -> bool:
    """Whether ``node``'s value may be a function (which upstream refuses to test for truth): not
    for comparisons, tests, ``not``, constants, arithmetic and concatenation."""
    if isinstance(node, (nodes.Test, nodes.Not, nodes.Const, nodes.BinExpr, nodes.UnaryExpr)):
        return isinstance(node, (nodes.And, nodes.Or)) and (_maybe_function(node.left) or _maybe_function(node.right))
    if isinstance(node, nodes.Filter):
        return node.name not in _NO_FUNCTION
    if isinstance(node, nodes.CondExpr):
        return _maybe_function(node.expr1) or node.expr2 is None or _maybe_function(node.expr2)
    return True


def _positions(loc: Any) -> tuple[Any, ...]:
    """The operator positions a (possibly chained) binary node's LOC holds."""
    if loc is None:
        return (None,)
    return loc[1] if isinstance(loc[1], tuple) else (loc[1],)


class Rewriter(NodeTransformer):
    """See the module docstring."""

    def __init__(self, name: str | None) -> None:
        self.name = name
        self.loops = 0  # loops around the statement being visited, in its own function

    def _signal(self, node: nodes.Break | nodes.Continue, what: str) -> nodes.Node:
        """A ``break``/``continue`` outside any loop of its function: upstream's loop signal escapes
        every statement unlocated; Python would refuse to compile it."""
        if self.loops:
            return node
        call = self._filter(nodes.Const(None, lineno=node.lineno), "__llamact_signal", [nodes.Const(what)])
        return nodes.ExprStmt(call, lineno=node.lineno)

    def visit_Break(self, node: nodes.Break) -> nodes.Node:
        return self._signal(node, "Break statement executed")

    def visit_Continue(self, node: nodes.Continue) -> nodes.Node:
        return self._signal(node, "Continue statement executed")

    def _function(self, node: nodes.Macro | nodes.CallBlock) -> nodes.Node:
        loops, self.loops = self.loops, 0
        self.generic_visit(node)
        self.loops = loops
        return node

    visit_Macro = _function
    visit_CallBlock = _function

    def _filter(self, node: Any, fname: str, args: list[Any], loc: Any = None,
                lineno: int | None = None) -> nodes.Filter:
        out = nodes.Filter(node, fname, args, [], None, None)
        out.set_lineno(lineno if lineno is not None else node.lineno)
        if loc is not None:
            setattr(out, LOC, loc)
        return out

    def generic_visit(self, node: nodes.Node, *args: Any, **kwargs: Any) -> Any:
        if isinstance(node, _FORBIDDEN):
            raise TemplateSyntaxError(f"Unknown statement: {type(node).__name__.lower()}", node.lineno, self.name)
        return super().generic_visit(node, *args, **kwargs)

    def visit_Compare(self, node: nodes.Compare) -> nodes.Node:
        self.generic_visit(node)
        left: Any = node.expr
        for operand in node.ops:
            left = self._filter(left, "__llamact_cmp", [nodes.Const(_CMP[operand.op]), operand.expr], _loc(operand))
        return left

    def visit_Concat(self, node: nodes.Concat) -> nodes.Node:
        self.generic_visit(node)
        return self._filter(node.nodes[0], "__llamact_concat", node.nodes[1:], _loc(node))

    def visit_Add(self, node: nodes.Add) -> nodes.Node:
        # a chain ``a + b + c`` (left-nested) becomes one call: its string result is built once
        operands: list[Any] = []
        ops: list[Any] = []
        current: Any = node
        while isinstance(current, nodes.Add):
            operands.append(current.right)
            ops.extend(reversed(_positions(_loc(current))))
            current = current.left
        operands.append(current)
        operands = [self.visit(x) for x in reversed(operands)]
        if len(operands) == 2:
            node.left, node.right = operands
            return node
        chain = tuple(reversed(ops))
        loc = ("BinaryExpression", chain) if all(p is not None for p in chain) else None
        return self._filter(operands[0], "__llamact_add", operands[1:], loc)

    def visit_Getitem(self, node: nodes.Getitem) -> nodes.Node:
        # jinja2 compiles slices to Python slicing, bypassing getitem: route them to upstream's slice
        self.generic_visit(node)
        if isinstance(node.arg, nodes.Slice):
            bounds = [part if part is not None else nodes.Const(None)
                      for part in (node.arg.start, node.arg.stop, node.arg.step)]
            return self._filter(node.node, "__llamact_slice", bounds, _loc(node))
        return node

    def visit_For(self, node: nodes.For) -> nodes.Node:
        body, node.body = node.body, []
        self.generic_visit(node)
        self.loops += 1
        node.body = [out for stmt in body for out in self.visit_list(stmt)]
        self.loops -= 1
        target = node.target
        width = len(target.items) if isinstance(target, nodes.Tuple) else 0
        node.iter = self._filter(node.iter, "__llamact_iter", [nodes.Const(width)], _loc(node))
        if node.test is not None:
            node.test = self._truth(node.test, _loc(node))
        return node

    def _truth(self, test: Any, loc: Any) -> Any:
        """``bool(test)`` as a call placed at ``loc``, where the value may be a function."""
        return self._filter(test, TRUTH_FILTER, [], loc) if _maybe_function(test) else test

    def visit_If(self, node: nodes.If) -> nodes.Node:
        self.generic_visit(node)
        node.test = self._truth(node.test, _loc(node))
        return node

    def visit_CondExpr(self, node: nodes.CondExpr) -> nodes.Node:
        self.generic_visit(node)
        node.test = self._truth(node.test, _loc(node))
        return node

    def visit_Dict(self, node: nodes.Dict) -> nodes.Node:
        self.generic_visit(node)
        if all(isinstance(item.key, nodes.Const) for item in node.items):
            return node  # a Python dict literal: constant keys hash
        obj: Any = nodes.Dict([], lineno=node.lineno)
        for item in node.items:
            obj = self._filter(obj, "__llamact_item", [item.key, item.value], _loc(node))
        return obj

    def visit_AssignBlock(self, node: nodes.AssignBlock) -> nodes.Node:
        self.generic_visit(node)
        if node.filter is not None:
            node.filter = self._filter(None, "__llamact_invalid_target", [nodes.Const("FilterExpression")], _loc(node),
                                       node.lineno)
        return node

    def visit_Assign(self, node: nodes.Assign) -> nodes.Node:
        self.generic_visit(node)
        if isinstance(node.target, nodes.NSRef):
            ref = nodes.Name(node.target.name, "load", lineno=node.lineno)
            call = self._filter(ref, "__llamact_setattr", [nodes.Const(node.target.attr), node.node], _loc(node))
            stmt = nodes.ExprStmt(call)
            stmt.set_lineno(node.lineno)
            return stmt
        if isinstance(node.target, nodes.Tuple):
            # upstream checks the value before it assigns (Python's unpacking would say it its way)
            node.node = self._filter(node.node, "__llamact_unpack", [nodes.Const(len(node.target.items))],
                                     _loc(node))
        return node
