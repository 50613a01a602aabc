"""The jinja2 environment with llama.cpp v0.5.0's semantics, sandboxed always.

Enters: template source. Leaves: a compiled jinja2 ``Template`` whose render follows upstream's
engine: source normalised (CRLF/CR -> LF, one trailing newline dropped), trim/lstrip blocks and
loop controls on, upstream's string escapes (plus ``\\xHH``, docs/design.md deviation 1), upstream's
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
from typing import Any, NoReturn

from jinja2 import nodes
from jinja2.exceptions import TemplateSyntaxError
from jinja2.ext import Extension, LoopControlExtension
from jinja2.lexer import Lexer, TokenStream
from jinja2.parser import Parser
from jinja2.runtime import ChainableUndefined, Context, LoopContext
from jinja2.sandbox import SandboxedEnvironment
from jinja2.utils import missing, pass_context

from .budget import OBJECT_BYTES, SLOT_BYTES, container_cost, current_budget
from .codegen import LlamaCodeGenerator
from .errors import TemplateError
from .filters import apply_filter
from .isolation import before_write
from .lexer import LlamaLexer, normalise_source
from .methods import bind, builtins_for, call_builtin
from .operators import binop, chain, unop
from .positions import LlamaParser, locate
from .rewrite import TRUTH_FILTER, Rewriter
from .scoping import DYNAMIC_VALUE_FILTER, dynamic_lookup, upstream_scopes
from .syntax import refusal
from .tests import run_test
from .values import FunctionMacro, as_string, is_int, is_undefined, printed, type_name, utf8_index, utf8_len

# -- values -------------------------------------------------------------------------------------


class LlamaUndefined(ChainableUndefined):
    """Upstream's undefined: chainable, iterates as empty, prints nothing, has length 0. Its name
    (jinja2's ``_undefined_name``) is upstream's hint: what was looked up (values.type_name)."""

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
        raise TemplateError("Callee is not a function: got " + type_name(self))


UNDEF = LlamaUndefined()
_NO_PROPERTY = LlamaUndefined(name="object_property")  # upstream's member access default


_NAMED: dict[str, LlamaUndefined] = {}  # undefineds are immutable: one per name (bounded)


def _missing(name: Any) -> LlamaUndefined:
    """The undefined upstream's member access returns for a name that is neither key nor builtin."""
    key = name if isinstance(name, str) else as_string(name)
    found = _NAMED.get(key)
    if found is None:
        found = LlamaUndefined(name=key)
        if len(_NAMED) < 4096:
            _NAMED[key] = found
    return found

_LOOP_FIELDS = frozenset({"index", "index0", "revindex", "revindex0", "first", "last", "length", "previtem",
                          "nextitem"})


def _builtin_or_missing(obj: Any, name: str) -> Any:
    method = bind(obj, name)  # a function: no boolean (values.Function), hence no ``or``
    return _missing(name) if method is None else method


def _loop_field(loop: LoopContext, name: Any) -> Any:
    if is_undefined(name):
        return _NO_PROPERTY
    if isinstance(name, str) and name in _LOOP_FIELDS:
        value = getattr(loop, name)
        return _missing(name) if is_undefined(value) else value  # previtem / nextitem at the ends
    return _missing(name)


def member(obj: Any, prop: Any, computed: bool) -> Any:
    """Upstream's member access: ``obj.name`` (computed=False) or ``obj[expr]``. An undefined
    result is named as upstream names it: the name looked up, or ``object_property``."""
    if isinstance(obj, dict):  # the common case first; the same steps as below
        if not computed:
            method = bind(obj, prop)
            if method is not None:
                return method
        if type(prop) is not str:
            _check_key(prop)
            if is_undefined(prop):
                return _NO_PROPERTY
        try:
            if prop in obj:
                return obj[prop]
        except TypeError:
            raise TemplateError(f"Object key of unhashable type: {type_name(prop)}") from None
        return _builtin_or_missing(obj, prop if isinstance(prop, str) else as_string(prop))
    if isinstance(obj, LoopContext):
        return _loop_field(obj, prop)
    function = callable(obj) and not is_undefined(obj)
    if not computed:
        if function:
            raise TemplateError("Function has no builtins")
        method = bind(obj, prop)
        if method is not None:
            return method
    if is_undefined(prop) or is_undefined(obj):
        return _NO_PROPERTY
    _check_key(prop)
    if isinstance(obj, (list, tuple, str)):
        if is_int(prop):
            if isinstance(obj, str):
                ch = utf8_index(obj, prop)
                return _NO_PROPERTY if ch is None else ch
            index = prop + len(obj) if prop < 0 else prop
            return obj[index] if 0 <= index < len(obj) else _NO_PROPERTY
        if isinstance(prop, str):
            return _builtin_or_missing(obj, prop)
        raise TemplateError(f"Cannot access property with non-string/non-number: got {type_name(prop)}")
    if not isinstance(prop, str):
        raise TemplateError(f"Cannot access property with non-string: got {type_name(prop)}")
    if function:
        raise TemplateError("Function has no builtins")
    return _builtin_or_missing(obj, prop)


def _check_key(prop: Any) -> None:
    """Upstream refuses a function as a key (an undefined one reads as undefined)."""
    if callable(prop) and not is_undefined(prop):
        raise TemplateError(f"Type: {type_name(prop)} is not allowed as object key")


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


def _for_iterable(value: Any, width: int) -> _Iterable:
    """A loop's items; ``width`` > 0: the loop unpacks each into that many names, checked up front
    as upstream does before the first iteration."""
    if is_undefined(value):
        return _Iterable([])
    if isinstance(value, dict):
        current_budget().charge(container_cost(len(value)) * (2 if width else 1))
        items = [(k, v) for k, v in value.items()] if width else list(value.keys())
    elif isinstance(value, (list, tuple)):
        current_budget().charge(container_cost(len(value)))
        items = list(value)
    else:
        raise TemplateError("Expected iterable or object type in for loop: got " + type_name(value))
    if width and not (isinstance(value, dict) and width == 2):  # an object's items are pairs
        for item in items:
            _unpacked(item, width, "Cannot unpack non-iterable type: ", "")
    return _Iterable(items)


def _unpacked(value: Any, width: int, non_array: str, suffix: str) -> Any:
    if not isinstance(value, (list, tuple)):
        raise TemplateError(non_array + type_name(value))
    if len(value) != width:
        raise TemplateError(f"Too {'few' if width > len(value) else 'many'} items to unpack{suffix}")
    return value


def _object_item(obj: dict[Any, Any], key: Any, value: Any) -> dict[Any, Any]:
    """One key of an object literal whose keys are not all constants (upstream inserts each pair
    after evaluating it, refusing keys it cannot hash)."""
    if is_undefined(key) or callable(key) or isinstance(key, (list, dict)):
        raise TemplateError(f"Object key of unhashable type: {type_name(key)}")
    obj[key] = value
    return obj


def _invalid_target(_value: Any, kind: str) -> Any:
    """``{% set x | f %}...``: upstream parses ``x | f`` as the target, and refuses it once the body ran."""
    raise TemplateError(f"Invalid LHS inside assignment expression: {kind}")


def _signal(_value: Any, what: str) -> Any:
    raise TemplateError(what)


def _set_unpack(value: Any, width: int) -> Any:
    """``{% set a, b = value %}``: upstream's checks before the assignment."""
    return _unpacked(value, width, "Cannot unpack non-iterable type in set: ", " in set")


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
            "__llamact_unpack": _set_unpack, "__llamact_item": _object_item,
            "__llamact_invalid_target": _invalid_target, "__llamact_signal": _signal, TRUTH_FILTER: bool,
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


class GenerationExtension(Extension):
    """``{% generation %}...{% endgeneration %}``: renders its body unchanged (upstream's no-op)."""

    tags = {"generation"}

    def parse(self, parser: Parser) -> list[nodes.Node]:
        next(parser.stream)
        return parser.parse_statements(("name:endgeneration",), drop_needle=True)


class LlamaEnvironment(SandboxedEnvironment):
    """jinja2's sandbox with upstream's semantics (see the module docstring)."""

    code_generator_class = LlamaCodeGenerator
    llamact_macro = FunctionMacro  # what the generated code makes a macro into (codegen.py)
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
        self._llama_lexer = LlamaLexer(self)

    @property
    def lexer(self) -> Lexer:
        return self._llama_lexer

    def preprocess(self, source: str, name: str | None = None, filename: str | None = None) -> str:
        return super().preprocess(normalise_source(source), name, filename)

    def _tokenize(self, source: str, name: str | None, filename: str | None = None,
                  state: str | None = None) -> TokenStream:
        return self._llama_lexer.tokenize(self.preprocess(source, name, filename), name, filename, state)

    def handle_exception(self, source: str | None = None) -> NoReturn:
        if source is None and not isinstance(sys.exc_info()[1], TemplateSyntaxError):
            raise  # noqa: PLE0704 - a render's failure keeps its real frames: locations.py reads them
        super().handle_exception(source)

    def _parse(self, source: str, name: str | None, filename: str | None) -> nodes.Template:
        refused = refusal(source, name)  # upstream's lexer and parser first: their messages
        if refused is not None:
            raise refused
        parser = LlamaParser(self, source, name, filename)
        tree = parser.parse()
        locate(tree, parser.tokens)
        out = Rewriter(name).visit(tree)
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
