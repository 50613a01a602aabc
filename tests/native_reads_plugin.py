"""A mypy plugin holding the house rule that only types can state: outside ``llamact/engine`` and
``llamact/native``, no code reads a native object, whatever name holds it.

A native object is an instance of a class defined in ``llamact.native`` (Model, Vocab, Context,
Batch, the samplers, the projector, ...), except the plain values the package exports as its public
API (``PUBLIC_VALUES``: ``llamact.Device``). The import rule (tests/test_architecture.py) keeps
native modules out of reach; this rule closes the other door, reaching native objects through an
engine. mypy resolves every attribute chain to the classes involved, so the rule reads types, not
names: ``engine.context.n_threads``, ``self.backend.context`` and ``x.model.vocab`` are one read.
Refused in ``llamact`` modules outside engine/ and native/:

1. an attribute, or a method's or function's result, whose type is a native class (``X.context``
   where X is an engine, ``X.model``, ``model.vocab``; ``Context | None`` included);
2. any attribute or method of a native object;
3. a ``_``-prefixed attribute or method of an object whose class is defined in engine/ or native/
   (their private state; a NamedTuple's ``_replace`` and kin are its public API);
4. an attribute of an engine-side object typed ``Any``: a value typed ``Any`` hides what is read
   through it (``scheduler.context.n_threads`` read a native Context while the scheduler's
   ``context`` was untyped), so what the engine hands out is typed.

Registered in pyproject.toml ([tool.mypy] plugins), so ``mypy llamact`` (tests/test_code_quality.py)
checks the package; tests/test_architecture.py shows that the rule refuses what it should.
"""

from __future__ import annotations

from collections.abc import Callable

from mypy.nodes import Context
from mypy.plugin import AttributeContext, CheckerPluginInterface, FunctionContext, MethodContext, Plugin
from mypy.types import AnyType, Instance, Type, UnionType, get_proper_type

NATIVE = "llamact.native."
ENGINE = "llamact.engine."
#: where native objects may be read
INSIDE = ("/llamact/engine/", "/llamact/native/")
#: native classes that are plain values of the public API (exported by llamact/__init__.py;
#: test_architecture.py checks the two lists agree)
PUBLIC_VALUES = frozenset({"llamact.native.devices.Device"})
#: the public methods a NamedTuple's class has under ``_`` names
NAMEDTUPLE_API = frozenset({"_replace", "_asdict", "_make", "_fields", "_field_defaults"})
#: engine attributes still typed Any, each with the change that types it (rule 4 waits for it)
UNTYPED_FOR_NOW: dict[str, str] = {}
MESSAGE = "native object read outside engine/native: {} (the rule: tests/native_reads_plugin.py)"

CallContext = MethodContext | FunctionContext


def _checked(path: str) -> bool:
    """Whether the module at ``path`` is one the rule holds for: the package's, outside engine/native."""
    path = "/" + path.replace("\\", "/").lstrip("/")
    return "/llamact/" in path and not any(part in path for part in INSIDE)


def _native_class(typ: Type | None) -> str | None:
    """The native class ``typ`` is (or one member of a union is), by full name, else None."""
    proper = get_proper_type(typ)
    for member in proper.items if isinstance(proper, UnionType) else [proper]:
        member = get_proper_type(member)
        if isinstance(member, Instance):
            name = member.type.fullname
            if name.startswith(NATIVE) and name not in PUBLIC_VALUES:
                return name
    return None


def _short(fullname: str) -> str:
    return ".".join(fullname.split(".")[-2:])


def problem(fullname: str, owner: Type | None, result: Type | None, attribute: bool) -> str | None:
    """What is wrong with reading ``fullname`` (``module.Class.name``) on ``owner``, giving ``result``
    (outside engine/native), or None."""
    name = fullname.rsplit(".", 1)[-1]
    owner_native = _native_class(owner)
    if owner_native is not None:
        return f"{name!r} of a native {owner_native.rsplit('.', 1)[-1]}"
    result_native = _native_class(result)
    if result_native is not None:
        return f"a native {result_native.rsplit('.', 1)[-1]} through {_short(fullname)}"
    if not fullname.startswith((ENGINE, NATIVE)):
        return None
    if name.startswith("_") and not name.startswith("__") and name not in NAMEDTUPLE_API:
        return f"the private {_short(fullname)}"
    if attribute and isinstance(get_proper_type(result), AnyType) and fullname not in UNTYPED_FOR_NOW:
        return f"{_short(fullname)}, typed Any (type it, so what is read through it can be checked)"
    return None


def _report(api: CheckerPluginInterface, message: str, context: Context) -> None:
    api.fail(MESSAGE.format(message), context)


def _attribute_hook(fullname: str) -> Callable[[AttributeContext], Type]:
    def hook(ctx: AttributeContext) -> Type:
        if _checked(getattr(ctx.api, "path", "")):
            found = problem(fullname, ctx.type, ctx.default_attr_type, attribute=True)
            if found:
                _report(ctx.api, found, ctx.context)
        return ctx.default_attr_type
    return hook


def _call_hook(fullname: str) -> Callable[[CallContext], Type]:
    def hook(ctx: CallContext) -> Type:
        if _checked(getattr(ctx.api, "path", "")):
            owner = ctx.type if isinstance(ctx, MethodContext) else None
            found = problem(fullname, owner, ctx.default_return_type, attribute=False)
            if found:
                _report(ctx.api, found, ctx.context)
        return ctx.default_return_type
    return hook


class NativeReads(Plugin):
    def get_attribute_hook(self, fullname: str) -> Callable[[AttributeContext], Type] | None:
        return _attribute_hook(fullname) if fullname.startswith("llamact.") else None

    def get_method_hook(self, fullname: str) -> Callable[[MethodContext], Type] | None:
        return _call_hook(fullname) if fullname.startswith("llamact.") else None

    def get_function_hook(self, fullname: str) -> Callable[[FunctionContext], Type] | None:
        return _call_hook(fullname) if fullname.startswith("llamact.") else None


def plugin(version: str) -> type[Plugin]:
    return NativeReads
