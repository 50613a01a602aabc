"""Upstream's variable scopes on jinja2's compiled templates.

Upstream's engine (runtime.cpp) keeps variables in a flat ``context`` that is copied when a scope
starts, and only two statements start one:

* ``for`` copies it once for the whole loop: the body runs in that one copy, so a variable set in
  one iteration is still set in the next; the copy is dropped when the loop ends. The ``else``
  block runs in the enclosing context, and only when no iteration ran to its end (an iteration
  left by ``continue`` or ``break`` does not count).
* a macro call copies the *caller's* context (``context macro_ctx(args.ctx)``): a macro body sees
  the variables of whoever calls it (dynamic scope), ``loop`` included, not those where it was
  defined; its parameters' defaults are evaluated in the caller's context too.

Everything else (``if``, ``{% set x %}...{% endset %}``, ``{% filter %}``) runs in the context it
is in, so what it sets stays set after it.

jinja2 scopes lexically, gives each loop iteration a fresh scope and set and filter blocks scopes of
their own. ``upstream_scopes`` (a tree pass) and codegen.LlamaCodeGenerator give upstream's rules:

* ``visit_For`` initialises a loop's variables once, before the loop, not at every iteration
  (jinja2 still resets them when the loop ends);
* a ``for ... else`` becomes the loop, then ``if <no iteration ran to its end>: <else body>`` at
  the enclosing level (a Python local, set before the loop and cleared at the end of its body);
* set and filter blocks run in a soft copy of the enclosing frame; the names they set are declared
  in that frame by an ``{% if false %}`` the tree pass puts before them (Python drops it);
* each macro starts by looking up, in its caller's variables (``dynamic_lookup`` through the
  internal filter ``__llamact_dyn``), every free name of its body that an inner scope may bind (a
  loop variable, a variable set in a loop or a macro, a parameter: names bound nowhere but at the
  top level read the same either way); names in parameter defaults are looked up there directly.
  When a macro reads ``loop``, loops that call something make jinja2's loop object so that it can
  be found. The lookup reads the locals of the calling template function from its Python frame:
  it costs per macro call and free name, not per variable read.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable
from types import FrameType
from typing import Any, cast

from jinja2 import nodes
from jinja2.runtime import Context
from jinja2.utils import missing
from jinja2.visitor import NodeTransformer

__all__ = ["DYNAMIC_METHOD", "DYNAMIC_NAMES", "DYNAMIC_VALUE_FILTER", "dynamic_lookup", "upstream_scopes"]

DYNAMIC_METHOD = "llamact_dynamic"            # environment.<it>(context, names): the caller's values
DYNAMIC_VALUE_FILTER = "__llamact_dyn_value"  # the caller's value, or an undefined named after it
DYNAMIC_NAMES = "llamact_dynamic_names"       # on a Macro node: the names its start looks up

_TEMPLATE_FILE = "<template>"  # jinja2's file name for code compiled from a string
_SPECIAL = frozenset({"caller", "varargs", "kwargs"})  # names jinja2's macros bind themselves
_SCOPES = (nodes.For, nodes.Macro, nodes.CallBlock)    # statements that start a scope upstream


def _internal(name: str, lineno: int) -> nodes.InternalName:
    """A Python local no template can name (jinja2 makes these only through its parser)."""
    out = object.__new__(nodes.InternalName)
    nodes.Node.__init__(out, name, lineno=lineno)
    return out


# -- the tree pass ----------------------------------------------------------------------------------


def _stores(body: Iterable[nodes.Node]) -> list[str]:
    """Names a block sets in its own scope (not inside a loop or macro it holds)."""
    out: dict[str, None] = {}

    def visit(node: nodes.Node) -> None:
        if isinstance(node, nodes.Name) and node.ctx == "store":
            out.setdefault(node.name, None)
        if not isinstance(node, _SCOPES):
            for child in node.iter_child_nodes():
                visit(child)

    for node in body:
        visit(node)
    return list(out)


class _Blocks(NodeTransformer):
    """for-else, set blocks and filter blocks in the enclosing scope (see the module docstring)."""

    def __init__(self) -> None:
        self.counter = itertools.count()

    def visit_For(self, node: nodes.For) -> Any:
        self.generic_visit(node)
        if not node.else_:
            return node
        flag, line = f"f_llamact_else_{next(self.counter)}", node.lineno
        else_ = node.else_
        node.else_ = []
        node.body.append(nodes.Assign(_internal(flag, line), nodes.Const(False), lineno=line))
        return [nodes.Assign(_internal(flag, line), nodes.Const(True), lineno=line), node,
                nodes.If(_internal(flag, line), else_, [], [], lineno=line)]

    def _declared(self, node: nodes.AssignBlock | nodes.FilterBlock) -> Any:
        self.generic_visit(node)
        names = _stores(node.body)
        if not names:
            return node
        stores: list[nodes.Node] = [nodes.Assign(nodes.Name(n, "store"), nodes.Const(None), lineno=node.lineno)
                                    for n in names]
        return [nodes.If(nodes.Const(False), stores, [], [], lineno=node.lineno), node]

    visit_AssignBlock = _declared
    visit_FilterBlock = _declared


def _names(node: nodes.Node, ctx: tuple[str, ...]) -> Iterable[str]:
    if isinstance(node, nodes.Name) and node.ctx in ctx:
        yield node.name
    yield from (n.name for n in node.find_all(nodes.Name) if n.ctx in ctx)


def _scoped_names(tree: nodes.Template) -> frozenset[str]:
    """Every name some scope other than the template's top level may bind (``loop`` with any loop)."""
    out: set[str] = set()
    for node in tree.find_all(_SCOPES):
        if isinstance(node, nodes.For):
            out.add("loop")
            out.update(_names(node.target, ("store", "param")))
        elif isinstance(node, (nodes.Macro, nodes.CallBlock)):
            out.update(a.name for a in node.args)
        for stmt in getattr(node, "body", ()):
            out.update(_names(stmt, ("store", "param")))
    return frozenset(out)


def _lookup(name: str, filter_name: str, lineno: int) -> nodes.Filter:
    return nodes.Filter(nodes.Const(name), filter_name, [], [], None, None, lineno=lineno)


def _in_caller(node: nodes.Node) -> nodes.Node:
    """A parameter default whose names are the caller's (upstream evaluates it in ``args.ctx``)."""
    if isinstance(node, nodes.Name) and node.ctx == "load":
        return _lookup(node.name, DYNAMIC_VALUE_FILTER, node.lineno)
    for field, value in node.iter_fields():
        if isinstance(value, nodes.Node):
            setattr(node, field, _in_caller(value))
        elif isinstance(value, list):
            setattr(node, field, [_in_caller(v) if isinstance(v, nodes.Node) else v for v in value])
    return node


class _CallersLoop(NodeTransformer):
    """``loop`` in a macro body outside its own loops: the caller's loop object."""

    def __init__(self) -> None:
        self.found = False

    def visit_Name(self, node: nodes.Name) -> nodes.Node:
        if node.name == "loop" and node.ctx == "load":
            self.found = True
            return _lookup("loop", DYNAMIC_VALUE_FILTER, node.lineno)
        return node

    def visit_For(self, node: nodes.For) -> nodes.Node:
        node.iter = self.visit(node.iter)  # evaluated before the loop's own ``loop`` exists
        return node

    def visit_Macro(self, node: nodes.Macro) -> nodes.Node:
        return node  # rewritten on its own

    def visit_CallBlock(self, node: nodes.CallBlock) -> nodes.Node:
        node.call = self.visit(node.call)
        return node


def _free_loads(node: nodes.Node, bound: frozenset[str]) -> Iterable[str]:
    """Names ``node`` reads that no loop or call block inside it binds (nested macros excluded:
    they look their names up when they are called)."""
    if isinstance(node, nodes.Name):
        if node.ctx == "load" and node.name not in bound:
            yield node.name
    elif isinstance(node, nodes.For):
        yield from _free_loads(node.iter, bound)
        inner = bound | {"loop"} | set(_names(node.target, ("store",)))
        for child in (*node.body, *([node.test] if node.test is not None else [])):
            yield from _free_loads(child, inner)
    elif isinstance(node, nodes.CallBlock):
        yield from _free_loads(node.call, bound)
        inner = bound | {a.name for a in node.args}
        for child in node.body:
            yield from _free_loads(child, inner)
    elif not isinstance(node, nodes.Macro):
        for child in node.iter_child_nodes():
            yield from _free_loads(child, bound)


def _read_before_set(body: list[nodes.Node]) -> list[str]:
    """Names a macro body may read before it sets them in its own scope (what it reads of the
    caller's): statement by statement, a name ``set`` on every path so far is not the caller's."""
    out: dict[str, None] = {}

    def reads(node: nodes.Node, assigned: set[str]) -> None:
        for name in _free_loads(node, frozenset(assigned)):
            out.setdefault(name, None)

    def block(stmts: list[nodes.Node], assigned: set[str]) -> set[str]:
        for stmt in stmts:
            if isinstance(stmt, nodes.If):
                reads(stmt.test, assigned)
                paths = [block(stmt.body, set(assigned))]
                for elif_ in stmt.elif_:
                    reads(elif_.test, assigned)
                    paths.append(block(elif_.body, set(assigned)))
                paths.append(block(stmt.else_, set(assigned)))
                assigned = set.intersection(*paths)
            elif isinstance(stmt, nodes.For):
                reads(stmt.iter, assigned)
                inner = assigned | {"loop"} | set(_names(stmt.target, ("store",)))
                if stmt.test is not None:
                    reads(stmt.test, inner)
                block(stmt.body, inner)  # what the loop sets is gone after it
            elif isinstance(stmt, nodes.Assign):
                reads(stmt.node, assigned)
                assigned = assigned | set(_names(stmt.target, ("store",)))
            elif isinstance(stmt, nodes.AssignBlock):
                assigned = block(stmt.body, assigned)
                if stmt.filter is not None:
                    reads(stmt.filter, assigned)
                assigned = assigned | set(_names(stmt.target, ("store",)))
            elif isinstance(stmt, nodes.FilterBlock):
                assigned = block(stmt.body, assigned)
                reads(stmt.filter, assigned)
            else:
                reads(stmt, assigned)
        return assigned

    block(body, set())
    return list(out)


def upstream_scopes(tree: nodes.Template) -> nodes.Template:
    """Rewrite ``tree`` for upstream's scopes (see the module docstring)."""
    _Blocks().visit(tree)
    scoped = _scoped_names(tree)
    if not scoped:
        return tree
    reads_loop = False
    for macro in tree.find_all(nodes.Macro):
        params = {a.name for a in macro.args}
        read = _read_before_set(macro.body)
        names = [n for n in read if n in scoped and n not in params and n not in _SPECIAL and n != "loop"]
        setattr(macro, DYNAMIC_NAMES, names)
        if "loop" in read and "loop" not in params:
            callers_loop = _CallersLoop()
            macro.body = [callers_loop.visit(stmt) for stmt in macro.body]
            reads_loop = reads_loop or callers_loop.found
        macro.defaults = [cast(nodes.Expr, _in_caller(d)) for d in macro.defaults]
    if reads_loop:
        # jinja2 makes a loop object only for loops that mention ``loop``: mention it where a
        # call may reach a macro that reads it
        for loop in tree.find_all(nodes.For):
            if any(True for _ in loop.find_all(nodes.Call)):
                loop.body.insert(0, nodes.ExprStmt(nodes.Name("loop", "load", lineno=loop.lineno), lineno=loop.lineno))
    return tree


# -- the lookup ---------------------------------------------------------------------------------------

_IDENT = re.compile(r"l_(\d+)_(.+)\Z")
_CACHE = "__llamact_idents__"  # kept in the template module's globals: it lives as long as its code


def _idents(frame: FrameType) -> dict[str, tuple[str, ...]]:
    """Template variable name -> the frame's function's identifiers for it, innermost scope first."""
    code = frame.f_code
    cache = frame.f_globals.get(_CACHE)
    if cache is None:
        cache = frame.f_globals[_CACHE] = {}
    found = cache.get(id(code))  # by id: a code object's own hash digests all of its constants
    if found is None:
        levels: dict[str, list[tuple[int, str]]] = {}
        for ident in (*code.co_varnames, *code.co_cellvars, *code.co_freevars):
            m = _IDENT.match(ident)
            if m:
                levels.setdefault(m.group(2), []).append((int(m.group(1)), ident))
        found = cache[id(code)] = {name: tuple(i for _, i in sorted(pairs, reverse=True))
                                   for name, pairs in levels.items()}
    return found


def dynamic_lookup(names: tuple[str, ...], frame: FrameType | None, context: Context) -> list[Any]:
    """Each of ``names``' value for a macro running in ``frame``: the innermost binding in its
    caller's template function, else in that caller's caller, ..., else in the render's
    ``context``; ``missing`` when there is none. jinja2 resets a scope's identifiers to
    ``missing`` when it leaves it, so the first identifier that is not ``missing`` is the binding
    live where the call happened."""
    values: list[Any] = [missing] * len(names)
    todo = list(range(len(names)))
    frame = frame.f_back if frame is not None else None
    while frame is not None and todo:
        code = frame.f_code
        if code.co_filename == _TEMPLATE_FILE and "environment" in frame.f_globals:
            idents = _idents(frame)
            local: dict[str, Any] | None = None
            left = []
            for i in todo:
                for ident in idents.get(names[i], ()):
                    if local is None:
                        local = frame.f_locals
                    value = local.get(ident, missing)
                    if value is not missing:
                        values[i] = value
                        break
                else:
                    left.append(i)
            todo = left
            if code.co_name == "root":
                break
        frame = frame.f_back
    for i in todo:
        values[i] = context.resolve_or_missing(names[i])
    return values
