"""The Python code jinja2 generates for a template, with upstream's scopes and error positions.

``LlamaCodeGenerator`` is jinja2's code generator with three changes:

* upstream's scopes (scoping.py has the rules): a loop's variables are initialised once, before the
  loop; set and filter blocks run in the enclosing frame; a macro's start looks up the names it
  reads of its caller's variables (``environment.llamact_dynamic``);
* macros are ``environment.llamact_macro`` objects (values.Function's rule: a function is no
  boolean);
* every expression that carries upstream's node type and position (positions.LOC) has where its
  code is recorded -- first and last line and UTF-8 column, what Python's ``co_positions`` reports
  for an instruction -- in a module constant (``LOCATIONS``), so that a failure can be placed where
  upstream places it (locations.py) without any cost while nothing fails.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from jinja2 import nodes
from jinja2.compiler import CodeGenerator, Frame
from jinja2.idtracking import VAR_LOAD_ALIAS, VAR_LOAD_UNDEFINED

from .positions import LOC
from .scoping import DYNAMIC_METHOD, DYNAMIC_NAMES

__all__ = ["LOCATIONS", "LlamaCodeGenerator"]

LOCATIONS = "__llamact_locs__"  # (first line, column, last line, column, upstream type, position), ...


class LlamaCodeGenerator(CodeGenerator):
    """jinja2's code generator with upstream's scopes and a table of where located nodes' code is."""

    _hoisted = False
    _macro: nodes.Macro | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._col = 0  # UTF-8 bytes written on the current line (what co_positions counts)
        self._records: list[tuple[int, int, int, int, str, Any]] = []

    # -- where each located node's code is ----------------------------------------------------

    def write(self, x: str) -> None:
        fresh_line = bool(self._new_lines)
        super().write(x)
        width = len(x.encode("utf-8", "surrogatepass"))
        self._col = 4 * self._indentation + width if fresh_line else self._col + width

    def visit(self, node: nodes.Node, *args: Any, **kwargs: Any) -> None:
        loc = node.__dict__.get(LOC) if isinstance(node, nodes.Expr) else None
        if loc is None:
            super().visit(node, *args, **kwargs)
        else:
            self._recorded(loc, lambda: super(LlamaCodeGenerator, self).visit(node, *args, **kwargs))

    def _recorded(self, loc: tuple[str, Any], generate: Callable[[], None]) -> None:
        if self._new_lines:  # the code starts after the pending line break and indentation
            line = self.code_lineno + (0 if self._first_write else self._new_lines)
            col = 4 * self._indentation
        else:
            line, col = self.code_lineno, self._col
        generate()
        self._records.append((line, col, self.code_lineno, self._col, loc[0], loc[1]))

    def visit_Call(self, node: nodes.Call, frame: Frame, forward_caller: bool = False) -> None:
        loc = node.__dict__.get(LOC)
        if forward_caller and loc is not None:  # a call block's call: jinja2 visits it directly
            self._recorded(loc, lambda: super(LlamaCodeGenerator, self).visit_Call(node, frame, forward_caller=True))
        else:
            super().visit_Call(node, frame, forward_caller=forward_caller)

    def visit_Template(self, node: nodes.Template, frame: Frame | None = None) -> None:
        super().visit_Template(node, frame)
        self.writeline(f"{LOCATIONS} = {tuple(self._records)!r}")

    def macro_def(self, macro_ref: Any, frame: Frame) -> None:
        """The macro object: ``environment.llamact_macro`` (values.FunctionMacro: upstream's
        argument binding, and no boolean), told how many parameters have no default."""
        node = macro_ref.node
        args = ", ".join(repr(x.name) for x in node.args) + ("," if len(node.args) == 1 else "")
        name = getattr(node, "name", None)
        required = len(node.args) - len(node.defaults)
        self.write(f"environment.llamact_macro(environment, macro, {name!r}, ({args}), {macro_ref.accesses_kwargs!r},"
                   f" {macro_ref.accesses_varargs!r}, {macro_ref.accesses_caller!r}, context.eval_ctx.autoescape,"
                   f" {required})")

    # -- upstream's scopes (scoping.py) ----------------------------------------------------------

    def macro_body(self, node: nodes.Macro | nodes.CallBlock, frame: Frame) -> Any:
        if isinstance(node, nodes.Macro):  # a call block's body is the caller's: lexical, as jinja2 has it
            self._macro = node
        return super().macro_body(node, frame)

    def visit_For(self, node: nodes.For, frame: Frame) -> None:
        if node.recursive:  # not upstream syntax: the parser refuses it before code is generated
            super().visit_For(node, frame)
            return
        # The symbols jinja2 is about to give the loop body (identifiers depend only on the level
        # and the name), initialised here, once; enter_frame then skips the per-iteration copy.
        scope = frame.inner()
        scope.symbols.declare_parameter("loop")
        scope.symbols.analyze_node(node, for_branch="body")
        super().enter_frame(scope)
        self._hoisted = True
        super().visit_For(node, frame)

    def enter_frame(self, frame: Frame) -> None:
        if self._macro is not None:
            macro, self._macro = self._macro, None
            self._enter_macro(frame, getattr(macro, DYNAMIC_NAMES, ()))
            return
        if self._hoisted and frame.loop_frame:
            self._hoisted = False
            return
        super().enter_frame(frame)

    def _enter_macro(self, frame: Frame, names: Iterable[str]) -> None:
        """A macro's start: its dynamic names come from the caller, in one lookup; jinja2's own
        initialisation for the rest. A name the body reads from an enclosing function (a Python
        closure in jinja2's code) gets a local of the macro's own, so every read sees the caller's."""
        symbols = frame.symbols
        for name in names:
            if name not in symbols.refs:
                symbols.store(name)  # a local of its own (not a parameter: reads check for missing)
        idents = [symbols.refs[n] for n in names]
        loads = symbols.loads
        # A name the body sets before it reads it starts unset, not as jinja2's alias of an
        # enclosing function's variable: a macro it calls then looks further, in its caller.
        symbols.loads = {k: (VAR_LOAD_UNDEFINED, None) if v[0] == VAR_LOAD_ALIAS else v
                         for k, v in loads.items() if k not in idents}
        super().enter_frame(frame)
        symbols.loads = loads
        if idents:
            targets = ", ".join(idents) + ("," if len(idents) == 1 else "")
            self.writeline(f"{targets} = environment.{DYNAMIC_METHOD}(context, {tuple(names)!r})")

    def _block_frame(self, node: nodes.AssignBlock | nodes.FilterBlock, frame: Frame) -> Frame:
        """The frame a set or filter block's body runs in: the enclosing one (upstream runs the body
        in its context), less its buffer; names only the body reads are initialised here."""
        body = frame.soft()
        known = set(body.symbols.loads)
        body.symbols.analyze_node(node)
        loads = body.symbols.loads
        body.symbols.loads = {k: v for k, v in loads.items() if k not in known}
        CodeGenerator.enter_frame(self, body)
        body.symbols.loads = loads
        self.buffer(body)
        return body

    def visit_AssignBlock(self, node: nodes.AssignBlock, frame: Frame) -> None:
        self.push_assign_tracking()
        body = self._block_frame(node, frame)
        body.require_output_check = False
        self.blockvisit(node.body, body)
        self.newline(node)
        self.visit(node.target, frame)
        self.write(" = ")
        if node.filter is not None:
            self.visit(node.filter, body)
        else:
            self.write(f"concat({body.buffer})")
        self.pop_assign_tracking(frame)

    def visit_FilterBlock(self, node: nodes.FilterBlock, frame: Frame) -> None:
        body = self._block_frame(node, frame)
        self.blockvisit(node.body, body)
        self.start_write(frame, node)
        self.visit(node.filter, body)
        self.end_write(frame)
