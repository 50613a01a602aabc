"""The jinja2 environment with llama.cpp v0.5.0's semantics, sandboxed always.

Enters: template source. Leaves: a compiled jinja2 ``Template`` whose render follows upstream's
engine: source normalised (CRLF/CR -> LF, one trailing newline dropped), trim/lstrip blocks and
loop controls on, upstream's string escapes (plus ``\\xHH``, DESIGN.md deviation 1), upstream's
printing (``finalize``), operators (``call_binop``/``call_unop`` and rewritten comparisons and
``~``), member access (``getattr``/``getitem``: builtin methods before keys for ``obj.name``, keys
first for ``obj['k']``), filters and tests dispatched by value type, chainable undefined, ``for``
over mappings, ``set obj.attr`` on any object and ``{% generation %}`` blocks.

The sandbox is structural: ``getattr``/``getitem`` never return a Python attribute, only
upstream's builtins and mapping keys, so no template reaches ``__class__``, globals or modules.
Raises jinja2's exceptions and ``TemplateError``; the façade (``__init__``) maps them onto
``JinjaException``. Bounds (time, sizes, allocation) are enforced through the per-render ``Budget``
(budget.py): here at every loop iteration, call, filter, ``set obj.attr``, and macro or block output.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

from jinja2 import nodes
from jinja2.exceptions import TemplateSyntaxError
from jinja2.ext import Extension, LoopControlExtension
from jinja2.lexer import (
    TOKEN_FLOAT,
    TOKEN_INTEGER,
    TOKEN_OPERATOR,
    TOKEN_RAW_BEGIN,
    TOKEN_STRING,
    Lexer,
    Token,
    TokenStream,
)
from jinja2.parser import Parser
from jinja2.runtime import ChainableUndefined, Context, LoopContext
from jinja2.sandbox import SandboxedEnvironment
from jinja2.utils import missing, pass_context
from jinja2.visitor import NodeTransformer

from .budget import OBJECT_BYTES, SLOT_BYTES, container_cost, current_budget
from .errors import TemplateError
from .filters import apply_filter
from .isolation import before_write
from .methods import bind, builtins_for, call_builtin
from .operators import binop, chain, unop
from .scoping import DYNAMIC_VALUE_FILTER, LlamaCodeGenerator, dynamic_lookup, upstream_scopes
from .tests import run_test
from .values import is_int, is_undefined, printed, type_name, utf8_index, utf8_len

# -- values -------------------------------------------------------------------------------------


class LlamaUndefined(ChainableUndefined):
    """Upstream's undefined: chainable, iterates as empty, prints nothing, has length 0."""

    __slots__ = ()

    def __str__(self) -> str:
        return ""

    def __iter__(self) -> Iterator[Any]:
        return iter(())

    def __len__(self) -> int:
        return 0

    def __bool__(self) -> bool:
        return False

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LlamaUndefined)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TemplateError("Callee is not a function: got Undefined")


UNDEF = LlamaUndefined()

_LOOP_FIELDS = frozenset({"index", "index0", "revindex", "revindex0", "first", "last", "length", "previtem",
                          "nextitem"})


def _loop_field(loop: LoopContext, name: Any) -> Any:
    if isinstance(name, str) and name in _LOOP_FIELDS:
        return getattr(loop, name)
    return UNDEF


def member(obj: Any, prop: Any, computed: bool) -> Any:
    """Upstream's member access: ``obj.name`` (computed=False) or ``obj[expr]``."""
    if isinstance(obj, LoopContext):
        return _loop_field(obj, prop)
    if callable(obj) and not is_undefined(obj):
        raise TemplateError("Function has no builtins")
    if not computed:
        method = bind(obj, prop)
        if method is not None:
            return method
    if is_undefined(prop) or is_undefined(obj):
        return UNDEF
    if isinstance(obj, dict):
        try:
            if prop in obj:
                return obj[prop]
        except TypeError:
            raise TemplateError(f"Cannot access property with type {type_name(prop)}") from None
        return (bind(obj, prop) if isinstance(prop, str) else None) or UNDEF
    if isinstance(obj, (list, tuple, str)):
        if is_int(prop):
            if isinstance(obj, str):
                ch = utf8_index(obj, prop)
                return UNDEF if ch is None else ch
            index = prop + len(obj) if prop < 0 else prop
            return obj[index] if 0 <= index < len(obj) else UNDEF
        if isinstance(prop, str):
            return bind(obj, prop) or UNDEF
        raise TemplateError(f"Cannot access property with non-string/non-number: got {type_name(prop)}")
    if not isinstance(prop, str):
        raise TemplateError(f"Cannot access property with non-string: got {type_name(prop)}")
    return bind(obj, prop) or UNDEF


def _slice(obj: Any, key: slice) -> Any:
    fn = builtins_for(obj).get("slice")
    if fn is None:
        raise TemplateError(f"Unknown (built-in) filter 'slice' for type {type_name(obj)}")
    size = utf8_len(obj) if isinstance(obj, str) else len(obj) if isinstance(obj, (list, tuple)) else 0
    step = 1 if key.step is None else key.step
    back = is_int(step) and step < 0
    start = (size - 1 if back else 0) if key.start is None else key.start
    stop = (-1 if back else size) if key.stop is None else key.stop
    return call_builtin(fn, "slice", obj, (start, stop, step), {})


class _Iterable:
    """A for-loop's items, checking the render's time bound at every step."""

    def __init__(self, items: list[Any]) -> None:
        self.items = items

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self) -> Iterator[Any]:
        budget = current_budget()
        for item in self.items:
            budget.check_time()
            yield item


def _for_iterable(value: Any, unpack: bool) -> _Iterable:
    if is_undefined(value):
        return _Iterable([])
    if isinstance(value, dict):
        current_budget().charge(container_cost(len(value)) * (2 if unpack else 1))
        return _Iterable([(k, v) for k, v in value.items()] if unpack else list(value.keys()))
    if isinstance(value, (list, tuple)):
        current_budget().charge(container_cost(len(value)))
        return _Iterable(list(value))
    raise TemplateError("Expected iterable or object type in for loop: got " + type_name(value))


def _set_member(obj: Any, name: str, value: Any) -> str:
    if not isinstance(obj, dict):
        raise TemplateError("Cannot assign to member of non-object")
    budget = before_write(obj)
    if isinstance(value, (list, tuple, dict)):
        budget.charge(container_cost(len(value)))  # it may be a literal (those are not charged) kept alive here
    elif name not in obj:
        budget.charge(SLOT_BYTES + OBJECT_BYTES)  # the object grows
    old = obj.get(name)
    obj[name] = value
    if type(old) is str and _refcount(old) <= _UNSHARED_REFS:
        # the slot held the old string's only reference: it is freed now. Crediting it keeps
        # ``ns.out = ns.out ~ piece`` (templates that build their whole output this way) linear.
        budget.credit(len(old))
    return ""


def _unshared_refs() -> int:
    """What ``sys.getrefcount`` reports, in ``_set_member``, for a string only its local ``old`` holds
    (CPython versions count borrowed references differently); 0 (never credit) where it cannot tell."""
    if not hasattr(sys, "getrefcount"):
        return 0
    holder: dict[str, Any] = {"k": "".join(("un", "shared"))}
    old = holder.get("k")
    holder["k"] = None
    alone = _refcount(old)
    holder["k"] = old  # one more reference must show, or the count says nothing
    return alone if _refcount(old) == alone + 1 else 0


_refcount = getattr(sys, "getrefcount", lambda _v: 1 << 30)
_UNSHARED_REFS = _unshared_refs()


def _join_output(parts: Any) -> str:
    """The environment's ``concat``: a macro's, ``set`` block's or ``filter`` block's output, charged
    before it is joined (a macro printing its own result twice doubles it per level)."""
    if type(parts) is not list:
        parts = list(parts)
    current_budget().charge_string(sum(map(len, parts)))
    return "".join(parts)


_CMP = {"eq": "==", "ne": "!=", "gt": ">", "gteq": ">=", "lt": "<", "lteq": "<=", "in": "in", "notin": "notin"}


def _internal_filters() -> dict[str, Any]:
    def compare(left: Any, op: str, right: Any) -> Any:
        return binop(op, left, right)

    def concat(first: Any, *rest: Any) -> Any:
        if len(rest) == 1:
            return binop("~", first, rest[0])  # the common case; binop's fast path
        return chain("~", first, *rest)

    def add(first: Any, *rest: Any) -> Any:
        return chain("+", first, *rest)

    def slice_of(obj: Any, start: Any, stop: Any, step: Any) -> Any:
        return _slice(obj, slice(start, stop, step))

    @pass_context  # the lookup depends on the render: jinja2 must not fold it into a constant
    def dyn_value(context: Context, name: str) -> Any:
        value = dynamic_lookup((name,), sys._getframe(1), context)[0]  # called by the macro's own code
        return LlamaUndefined(name=name) if value is missing else value

    return {"__llamact_iter": _for_iterable, "__llamact_slice": slice_of, "__llamact_cmp": compare,
            "__llamact_concat": concat, "__llamact_add": add, "__llamact_setattr": _set_member,
            DYNAMIC_VALUE_FILTER: dyn_value}


class _Filters(dict[str, Any]):
    """Every filter name resolves; dispatch happens at run time by the input's type, as upstream."""

    def __init__(self) -> None:
        super().__init__(_internal_filters())

    def __missing__(self, name: str) -> Any:
        def dispatch(value: Any, *args: Any, **kwargs: Any) -> Any:
            current_budget().check_time()
            return apply_filter(name, value, *args, **kwargs)

        return dispatch

    def get(self, name: str, default: Any = None) -> Any:
        return self[name]

    def __contains__(self, name: object) -> bool:
        return True


class _Tests(dict[str, Any]):
    def __missing__(self, name: str) -> Any:
        return lambda value, *args: run_test(name, value, *args)

    def get(self, name: str, default: Any = None) -> Any:
        return self[name]

    def __contains__(self, name: object) -> bool:
        return True


# -- source ---------------------------------------------------------------------------------


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "v": "\v", "\\": "\\", "'": "'", '"': '"'}
_HEX = frozenset("0123456789abcdefABCDEF")


def unescape(body: str, lineno: int, name: str | None) -> str:
    """A string literal's text: upstream's escapes plus ``\\xHH`` (exactly two hex digits)."""
    out: list[str] = []
    i = 0
    while i < len(body):
        ch = body[i]
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        nxt = body[i + 1] if i + 1 < len(body) else ""
        if nxt in _ESCAPES and nxt:
            out.append(_ESCAPES[nxt])
            i += 2
        elif nxt == "x" and len(body) >= i + 4 and body[i + 2] in _HEX and body[i + 3] in _HEX:
            out.append(chr(int(body[i + 2:i + 4], 16)))
            i += 4
        elif nxt == "x":
            raise TemplateSyntaxError("malformed escape \\x (expected exactly two hex digits)", lineno, name)
        else:
            raise TemplateSyntaxError(f"unknown escape character \\{nxt}", lineno, name)
    return "".join(out)


class _LlamaLexer(Lexer):
    def wrap(self, stream: Any, name: str | None = None, filename: str | None = None) -> Iterator[Token]:
        for lineno, token, value_str in stream:
            if token == TOKEN_RAW_BEGIN:
                raise TemplateSyntaxError("Unknown statement: raw", lineno, name, filename)
            if token in (TOKEN_INTEGER, TOKEN_FLOAT) and any(c in value_str for c in "eE_"):
                raise TemplateSyntaxError(f"unexpected character in number: {value_str}", lineno, name, filename)
            if token == TOKEN_OPERATOR and value_str in ("//", "**"):
                raise TemplateSyntaxError(f"Unexpected token: {value_str}", lineno, name, filename)
            if token == TOKEN_STRING:
                yield Token(lineno, TOKEN_STRING, unescape(value_str[1:-1], lineno, name))
                continue
            yield from super().wrap(iter([(lineno, token, value_str)]), name, filename)


def normalise_source(source: str) -> str:
    """CRLF/CR -> LF, and upstream's lstrip quirk at the very start of a template."""
    src = source.replace("\r\n", "\n").replace("\r", "\n")
    # Upstream trims the leading text before a first {% or {# when everything after its first
    # character is blank (its backward scan stops at index 1 and cuts from the start).
    for i in range(len(src) - 1):
        if src[i] == "{" and src[i + 1] in "{%#":
            if i >= 1 and src[i + 1] in "%#" and all(c in " \t\v\f" for c in src[1:i]):
                src = src[i:]
            break
    return src


class GenerationExtension(Extension):
    """``{% generation %}...{% endgeneration %}``: renders its body unchanged (upstream's no-op)."""

    tags = {"generation"}

    def parse(self, parser: Parser) -> list[nodes.Node]:
        next(parser.stream)
        return parser.parse_statements(("name:endgeneration",), drop_needle=True)


_FORBIDDEN = (nodes.Extends, nodes.Include, nodes.Import, nodes.FromImport, nodes.Block, nodes.With,
              nodes.ScopedEvalContextModifier, nodes.EvalContextModifier)


class _Rewriter(NodeTransformer):
    """Turns jinja2's Python-semantics nodes into calls of upstream's operators."""

    def __init__(self, name: str | None) -> None:
        self.name = name

    def _filter(self, node: Any, fname: str, args: list[Any]) -> nodes.Filter:
        out = nodes.Filter(node, fname, args, [], None, None)
        out.set_lineno(node.lineno)
        return out

    def generic_visit(self, node: nodes.Node, *args: Any, **kwargs: Any) -> Any:
        if isinstance(node, _FORBIDDEN):
            raise TemplateSyntaxError(f"Unknown statement: {type(node).__name__.lower()}", node.lineno, self.name)
        return super().generic_visit(node, *args, **kwargs)

    def visit_Compare(self, node: nodes.Compare) -> nodes.Node:
        self.generic_visit(node)
        left: Any = node.expr
        for operand in node.ops:
            left = self._filter(left, "__llamact_cmp", [nodes.Const(_CMP[operand.op]), operand.expr])
        return left

    def visit_Concat(self, node: nodes.Concat) -> nodes.Node:
        self.generic_visit(node)
        return self._filter(node.nodes[0], "__llamact_concat", node.nodes[1:])

    def visit_Add(self, node: nodes.Add) -> nodes.Node:
        # a chain ``a + b + c`` (left-nested) becomes one call: its string result is built once
        operands: list[Any] = []
        current: Any = node
        while isinstance(current, nodes.Add):
            operands.append(current.right)
            current = current.left
        operands.append(current)
        operands = [self.visit(x) for x in reversed(operands)]
        if len(operands) == 2:
            node.left, node.right = operands
            return node
        return self._filter(operands[0], "__llamact_add", operands[1:])

    def visit_Getitem(self, node: nodes.Getitem) -> nodes.Node:
        # jinja2 compiles slices to Python slicing, bypassing getitem: route them to upstream's slice
        self.generic_visit(node)
        if isinstance(node.arg, nodes.Slice):
            bounds = [part if part is not None else nodes.Const(None)
                      for part in (node.arg.start, node.arg.stop, node.arg.step)]
            return self._filter(node.node, "__llamact_slice", bounds)
        return node

    def visit_For(self, node: nodes.For) -> nodes.Node:
        self.generic_visit(node)
        node.iter = self._filter(node.iter, "__llamact_iter", [nodes.Const(isinstance(node.target, nodes.Tuple))])
        return node

    def visit_Assign(self, node: nodes.Assign) -> nodes.Node:
        self.generic_visit(node)
        if isinstance(node.target, nodes.NSRef):
            ref = nodes.Name(node.target.name, "load", lineno=node.lineno)
            call = self._filter(ref, "__llamact_setattr", [nodes.Const(node.target.attr), node.node])
            stmt = nodes.ExprStmt(call)
            stmt.set_lineno(node.lineno)
            return stmt
        return node


class LlamaEnvironment(SandboxedEnvironment):
    """jinja2's sandbox with upstream's semantics (see the module docstring)."""

    code_generator_class = LlamaCodeGenerator
    intercepted_binops = frozenset({"+", "-", "*", "/", "//", "%", "**"})
    intercepted_unops = frozenset({"+", "-"})

    def __init__(self) -> None:
        super().__init__(
            trim_blocks=True,
            lstrip_blocks=True,
            keep_trailing_newline=False,
            newline_sequence="\n",
            extensions=[LoopControlExtension, GenerationExtension],
            undefined=LlamaUndefined,
            finalize=printed,
            autoescape=False,
            optimized=False,
            cache_size=0,
            auto_reload=False,
        )
        self.filters = _Filters()
        self.tests = _Tests()
        self.globals = {}
        self.concat = _join_output  # type: ignore[method-assign]
        self._llama_lexer = _LlamaLexer(self)

    @property
    def lexer(self) -> Lexer:
        return self._llama_lexer

    def preprocess(self, source: str, name: str | None = None, filename: str | None = None) -> str:
        return super().preprocess(normalise_source(source), name, filename)

    def _tokenize(self, source: str, name: str | None, filename: str | None = None,
                  state: str | None = None) -> TokenStream:
        return self._llama_lexer.tokenize(self.preprocess(source, name, filename), name, filename, state)

    def _parse(self, source: str, name: str | None, filename: str | None) -> nodes.Template:
        tree = Parser(self, source, name, filename).parse()
        out = _Rewriter(name).visit(tree)
        assert isinstance(out, nodes.Template)
        return upstream_scopes(out)

    # -- the sandbox's hooks: every attribute, item, call and operator passes here ----------

    def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
        return False

    def getattr(self, obj: Any, attribute: str) -> Any:
        return member(obj, attribute, computed=False)

    def getitem(self, obj: Any, argument: Any) -> Any:
        if isinstance(argument, slice):
            return _slice(obj, argument)
        return member(obj, argument, computed=True)

    def call(__self, __context: Context, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
        if is_undefined(__obj) or not callable(__obj) or isinstance(__obj, (str, list, tuple, dict)):
            raise TemplateError("Callee is not a function: got " + type_name(__obj))
        current_budget().check_time()
        return super().call(__context, __obj, *args, **kwargs)

    def llamact_dynamic(self, context: Context, names: tuple[str, ...]) -> list[Any]:
        """A macro's start: the caller's values of ``names`` (scoping.py; called by the macro's code)."""
        return dynamic_lookup(names, sys._getframe(1), context)

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        if operator in ("//", "**"):
            raise TemplateError(f"Unknown operator \"{operator}\"")
        return binop(operator, left, right)

    def call_unop(self, context: Context, operator: str, arg: Any) -> Any:
        return unop(operator, arg)
