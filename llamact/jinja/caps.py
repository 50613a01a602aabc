"""Template capabilities, probed as llama.cpp v0.5.0 does (``common/jinja/caps.cpp``).

    template_caps(source, *, limits=None) -> TemplateCaps    (cached by source, bounded)
    TemplateCaps.to_map() -> dict[str, bool]        (upstream's ``caps::to_map``: the nine ``supports_*`` keys)

Enters: Jinja template source. Leaves: a frozen ``TemplateCaps``. Upstream's conclusions come from
rendering its seven probe conversations (context: the messages, ``tools`` (``[]`` when none),
``bos_token``/``eos_token`` ``""``, ``add_generation_prompt`` true, plus the probe's extra variables)
with usage tracking on: every input value records whether the template used it and how (``ops``):
identifier lookups, member access (``array_access``/``object_access``, the builtin names tried on
it), filters and methods applied, ``test_is_<name>`` tests, for-loop iteration, and the deep use of
``tojson``/``string``. A probe that fails to render counts as upstream's failed execution.
Whether a template supports thinking is not a probe's answer upstream: the apply pipeline decides
(``llamact.chat.supports_enable_thinking``), so ``TemplateCaps.supports_thinking`` is None here and
``llamact.chat.template_capabilities`` fills it in; ``to_map`` keeps upstream's nine keys.
Raises ``JinjaSyntaxError`` when the source does not compile (upstream's template constructor
throws before probing), ``JinjaLimitExceeded`` when the probes together run past ``limits`` (one
budget for all of them: a hostile template costs one time limit, not one per probe), and
``JinjaRuntimeError`` where upstream's analysis throws reading what a template changed (it read
``messages[0]`` after the template popped it).
The probes render their own fresh values (``track`` copies the conversations), so probing never
changes its inputs.

The tracking lives only here: probes render with a separate environment (``ProbeEnvironment``)
whose compiled templates route identifier loads, member access, filters, tests and loops through
marking hooks, over input values wrapped in identity-preserving ``str``/``dict``/``list``
subclasses. The normal environment and render path are untouched.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.runtime import LoopContext
from jinja2.visitor import NodeTransformer

from . import DEFAULT_LIMITS, CompiledTemplate, JinjaException, JinjaLimitExceeded, JinjaRuntimeError, compile_template
from .budget import Budget, RenderLimits, current_budget
from .codecache import compile_cached
from .environment import LlamaEnvironment, _Filters, _Tests, member
from .filters import _COERCED, ALIASES
from .methods import builtins_for, tojson
from .tests import TESTS
from .values import as_string, is_int, is_undefined, type_name

_DEEP = frozenset({"tojson", "string"})


@dataclass(frozen=True)
class TemplateCaps:
    """What a template supports; defaults are upstream's (``caps.h``). ``supports_thinking`` (thinking
    channels) is no probe's answer: None until ``llamact.chat.template_capabilities`` asks the apply
    pipeline, as upstream's ``common_chat_templates_support_enable_thinking`` does."""

    supports_tools: bool = True
    supports_tool_calls: bool = True
    supports_system_role: bool = True
    supports_parallel_tool_calls: bool = True
    supports_preserve_reasoning: bool = False
    supports_reasoning_effort: bool = False
    supports_string_content: bool = True
    supports_typed_content: bool = False
    supports_object_arguments: bool = False
    supports_thinking: bool | None = None

    def to_map(self) -> dict[str, bool]:
        """Upstream's ``caps::to_map`` (a ``std::map``: keys sorted; thinking is not among them)."""
        return {name: getattr(self, name) for name in PROBED_CAPS}


#: upstream's caps, the probes' answers (sorted, as ``caps::to_map`` lists them)
PROBED_CAPS: tuple[str, ...] = tuple(sorted(f.name for f in fields(TemplateCaps) if f.name != "supports_thinking"))


# -- tracked input values -------------------------------------------------------------------------


class _Tracked:
    """Upstream's ``value_t::stats``: ``used`` and the set of ``ops`` applied to this value."""

    used: bool
    ops: set[str]


class _TStr(str, _Tracked):
    pass


class _TDict(dict[str, Any], _Tracked):
    pass


class _TList(list[Any], _Tracked):
    pass


def track(v: Any) -> Any:
    """A JSON-shaped value with every string, object and array wrapped (fresh, unmarked)."""
    out: Any
    if isinstance(v, str):
        out = _TStr(v)
    elif isinstance(v, dict):
        out = _TDict((k, track(x)) for k, x in v.items())
    elif isinstance(v, list):
        out = _TList(track(x) for x in v)
    else:
        return v
    out.used = False
    out.ops = set()
    return out


def _mark(v: Any) -> None:
    if isinstance(v, _Tracked):
        v.used = True


def _op(v: Any, name: str) -> None:
    if isinstance(v, _Tracked):
        v.used = True
        v.ops.add(name)


def _mark_deep(v: Any, seen: set[int] | None = None) -> None:
    # each container once: a template may nest shared containers exponentially deep, or in a cycle
    _mark(v)
    if isinstance(v, (list, tuple, dict)):
        seen = set() if seen is None else seen
        if id(v) in seen:
            return
        seen.add(id(v))
        current_budget().check_time()
        for x in (v.values() if isinstance(v, dict) else v):
            _mark_deep(x, seen)


def _deep_on_call(fn: Callable[..., Any], target: Any) -> Callable[..., Any]:
    """A bound ``tojson``/``string`` that marks its input deeply when invoked, as upstream's do."""

    def call(*args: Any, **kwargs: Any) -> Any:
        _mark_deep(target)
        return fn(*args, **kwargs)

    return call


def _global_tojson(*args: Any, **kwargs: Any) -> Any:
    if args:
        _mark_deep(args[0])
    return tojson(*args, **kwargs)


# -- the probe environment ------------------------------------------------------------------------


def _probe_member(obj: Any, prop: Any, computed: bool) -> Any:
    """``member`` plus upstream's stats marking (runtime.cpp member_expression)."""
    if isinstance(obj, LoopContext) or (callable(obj) and not is_undefined(obj)):
        return member(obj, prop, computed)
    if not computed and isinstance(prop, str):
        _op(obj, prop)  # try_builtin_func(ctx, prop, object, true)
        if builtins_for(obj).get(prop) is not None:
            val = member(obj, prop, computed)
            return _deep_on_call(val, obj) if prop in _DEEP else val
    val = member(obj, prop, computed)
    if is_undefined(prop) or is_undefined(obj):
        return val
    builtin_tried = False
    if isinstance(obj, dict):
        try:
            builtin_tried = prop not in obj
        except TypeError:
            builtin_tried = False
        if builtin_tried:
            _op(obj, prop if isinstance(prop, str) else as_string(prop))
    elif isinstance(obj, (list, tuple, str)):
        if isinstance(prop, str):
            builtin_tried = True
            _op(obj, prop)
    elif isinstance(prop, str):
        builtin_tried = True
        _op(obj, prop)
    _mark(val)
    _mark(obj)
    _mark(prop)
    if is_int(prop):
        _op(obj, "array_access")
    elif isinstance(prop, str):
        _op(obj, "object_access")
    if builtin_tried and prop in _DEEP and callable(val) and not is_undefined(val):
        return _deep_on_call(val, obj)
    return val


class _ProbeFilters(_Filters):
    def __init__(self) -> None:
        super().__init__()
        base_iter = self["__llamact_iter"]
        base_slice = self["__llamact_slice"]

        def iterate(value: Any, unpack: bool) -> Any:
            _op(value, "array_access")
            if isinstance(value, dict):
                _op(value, "object_access")
            elif isinstance(value, (list, tuple)):
                _op(value, "array_access")
            return base_iter(value, unpack)

        def slice_of(obj: Any, start: Any, stop: Any, step: Any) -> Any:
            _op(obj, "slice")
            return base_slice(obj, start, stop, step)

        def use(value: Any) -> Any:
            _mark(value)
            return value

        base_setattr = self["__llamact_setattr"]

        def set_member(obj: Any, name: str, value: Any) -> Any:
            # a string the template makes gets fresh stats, as upstream's values all have: the
            # probes read them where the template put it (``{% set m.content = 'x' %}{{ m.content }}``)
            return base_setattr(obj, name, track(value) if type(value) is str else value)

        self["__llamact_iter"] = iterate
        self["__llamact_slice"] = slice_of
        self["__llamact_use"] = use
        self["__llamact_setattr"] = set_member

    def __missing__(self, name: str) -> Any:
        base = super().__missing__(name)
        target_name = ALIASES.get(name, name)

        def dispatch(value: Any, *args: Any, **kwargs: Any) -> Any:
            coerced = target_name in _COERCED and not is_undefined(value) and not isinstance(value, str)
            if not coerced:
                _op(value, target_name)
                if target_name in _DEEP and builtins_for(value).get(target_name) is not None:
                    _mark_deep(value)
            return base(value, *args, **kwargs)

        return dispatch


class _ProbeTests(_Tests):
    def __missing__(self, name: str) -> Any:
        base = super().__missing__(name)

        def test(value: Any, *args: Any) -> Any:
            if name in TESTS:
                _op(value, "test_is_" + name)
            return base(value, *args)

        return test


class _UseTracker(NodeTransformer):
    """Routes every identifier load through ``__llamact_use`` (upstream marks found identifiers used)."""

    def visit_Name(self, node: nodes.Name) -> nodes.Node:
        if node.ctx != "load":
            return node
        out = nodes.Filter(node, "__llamact_use", [], [], None, None)
        out.set_lineno(node.lineno)
        return out


class ProbeEnvironment(LlamaEnvironment):
    """``LlamaEnvironment`` whose templates record upstream's usage stats on tracked inputs."""

    def __init__(self) -> None:
        super().__init__()
        self.filters = _ProbeFilters()
        self.tests = _ProbeTests()

    def _parse(self, source: str, name: str | None, filename: str | None) -> nodes.Template:
        out = _UseTracker().visit(super()._parse(source, name, filename))
        assert isinstance(out, nodes.Template)
        return out

    def getattr(self, obj: Any, attribute: str) -> Any:
        return _probe_member(obj, attribute, computed=False)

    def getitem(self, obj: Any, argument: Any) -> Any:
        if isinstance(argument, slice):
            _op(obj, "slice")
            return super().getitem(obj, argument)
        return _probe_member(obj, argument, computed=True)


@functools.lru_cache(maxsize=1)
def _probe_environment() -> ProbeEnvironment:
    return ProbeEnvironment()


# -- the probes (caps.cpp caps_get) ---------------------------------------------------------------

_CONTENT_MARKER = "STRING_MARKER"
_REASONING_PLACEHOLDER = "<REASONING_CONTENT_PLACEHOLDER>"
_TOOLS = [{
    "name": "tool",
    "type": "function",
    "function": {
        "name": "tool1",
        "description": "Tool description",
        "parameters": {
            "type": "object",
            "properties": {"arg": {"type": "string", "description": "Arg description"}},
            "required": ["arg"],
        },
    },
}]


def _call(call_id: str, arguments: Any) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "tool1", "arguments": arguments}}


def _tool_conversation(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "User message"},
        {"role": "assistant", "content": "", "tool_calls": calls},
        {"role": "tool", "content": "Tool response", "tool_call_id": "call00001"},
        {"role": "assistant", "content": "The tool response was 'tool response'"},
        {"role": "user", "content": "User message"},
    ]


@dataclass
class _Run:
    success: bool
    output: str
    messages: Any
    tools: Any
    context: dict[str, Any]


def _execute(template: CompiledTemplate, budget: Budget, messages: list[Any], tools: list[Any] | None = None,
             extra: Callable[[dict[str, Any]], None] | None = None) -> _Run:
    context: dict[str, Any] = {
        "messages": track(messages),
        "tools": track(tools if tools is not None else []),
        "bos_token": track(""),
        "eos_token": track(""),
        "add_generation_prompt": True,
    }
    if extra is not None:
        extra(context)
    variables = dict(context)
    variables["tojson"] = _global_tojson
    try:
        # the tracked values are the probe's own (and must stay the very objects the template marks)
        output, success = template.render_owned(variables, budget=budget), True
    except JinjaLimitExceeded:
        raise
    except JinjaException:
        output, success = "", False
    return _Run(success, output, context["messages"], context["tools"], context)


def _at(v: Any, key: int | str) -> Any:
    """Upstream's ``value->at(key)`` on a probe's values after the render (the template may have
    changed them): raises JinjaRuntimeError ("caps probing failed: " and upstream's message) where
    ``at`` throws, which fails the template's loading upstream."""
    if isinstance(key, int):
        if not isinstance(v, (list, tuple)):
            raise _probing_failed(f"{type_name(v)} is not an array value")
        if key >= len(v):
            raise _probing_failed(f"Index {key} out of bounds for array of size {len(v)}")
        return v[key]
    if not isinstance(v, dict):
        raise _probing_failed(f"{type_name(v)} is not an object value")
    if key not in v:
        raise _probing_failed(f"Key '{key}' not found in value of type Object")
    return v[key]


def _probing_failed(message: str) -> JinjaRuntimeError:
    return JinjaRuntimeError("caps probing failed: " + message, "caps")


def _path(v: Any, *keys: int | str) -> Any:
    for key in keys:
        v = _at(v, key)
    return v


def _used(v: Any) -> bool:
    return isinstance(v, _Tracked) and v.used


def _has_op(v: Any, *names: str) -> bool:
    return isinstance(v, _Tracked) and any(name in v.ops for name in names)


def _preserve_reasoning(ctx: dict[str, Any]) -> None:
    ctx["enable_thinking"] = True
    for key, enabled in (("preserve_thinking", True), ("clear_thinking", False),
                         ("truncate_history_thinking", False), ("drop_thinking", False)):
        ctx[key] = enabled


def _reasoning_effort(ctx: dict[str, Any]) -> None:
    ctx["enable_thinking"] = True
    effort = track("low")  # one value bound to both names, as upstream does for its stats
    ctx["reasoning_effort"] = effort
    ctx["reasoning_strength"] = effort


def _probe(template: CompiledTemplate, budget: Budget) -> dict[str, bool]:
    defaults = TemplateCaps()
    caps: dict[str, bool] = {name: getattr(defaults, name) for name in PROBED_CAPS}

    run = _execute(template, budget, [{"role": "user", "content": _CONTENT_MARKER}])
    content = _path(run.messages, 0, "content")
    checks_for_string = _has_op(content, "test_is_string")
    used_as_array = _has_op(content, "selectattr", "array_access")
    if used_as_array:
        caps["supports_typed_content"] = True
    if not run.success or (used_as_array and _CONTENT_MARKER not in run.output):
        caps["supports_string_content"] = False
    if checks_for_string:
        run = _execute(template, budget, [{"role": "user", "content": []}])
        content = _path(run.messages, 0, "content")
        if run.success and _has_op(content, "selectattr", "array_access"):
            caps["supports_typed_content"] = True

    run = _execute(template, budget, [{"role": "system", "content": "System message"},
                              {"role": "user", "content": "User message"}])
    if not _used(_path(run.messages, 0, "content")):
        caps["supports_system_role"] = False

    run = _execute(template, budget, _tool_conversation([_call("call00001", {"arg": "value"})]), _TOOLS)
    if run.success:
        if not _used(_path(run.tools, 0, "function", "name")):
            caps["supports_tools"] = False
        tool_calls = _path(run.messages, 1, "tool_calls")
        if not _used(tool_calls):
            caps["supports_tool_calls"] = False
        elif _used(_path(tool_calls, 0, "function", "arguments", "arg")):
            caps["supports_object_arguments"] = True

    if not caps["supports_object_arguments"]:
        run = _execute(template, budget, _tool_conversation([_call("call00001", '{"arg": "value"}')]), _TOOLS)
        if not run.success:
            caps["supports_tool_calls"] = False
            caps["supports_tools"] = False
        else:
            if not _used(_path(run.tools, 0, "function", "name")):
                caps["supports_tools"] = False
            if not _used(_path(run.messages, 1, "tool_calls")):
                caps["supports_tool_calls"] = False

    args: Any = {"arg": "value"} if caps["supports_object_arguments"] else '{"arg": "value"}'
    run = _execute(template, budget, _tool_conversation([_call("call00001", args), _call("call00002", args)]), _TOOLS)
    if not run.success or not _used(_path(run.messages, 1, "tool_calls", 1, "function")):
        caps["supports_parallel_tool_calls"] = False

    run = _execute(template, budget, [
        {"role": "user", "content": "User message"},
        {"role": "assistant", "content": "Assistant message", "reasoning_content": _REASONING_PLACEHOLDER},
        {"role": "user", "content": "User message"},
        {"role": "assistant", "content": "Assistant message", "reasoning_content": "Reasoning content"},
        {"role": "user", "content": "User message"},
    ], extra=_preserve_reasoning)
    if _REASONING_PLACEHOLDER in run.output:
        caps["supports_preserve_reasoning"] = True

    run = _execute(template, budget, [{"role": "user", "content": "User message"}], extra=_reasoning_effort)
    caps["supports_reasoning_effort"] = _used(run.context["reasoning_effort"])
    return caps


@functools.lru_cache(maxsize=128)
def template_caps(source: str, *, limits: RenderLimits | None = None) -> TemplateCaps:
    """The capabilities of ``source`` (cached by content). Raises JinjaSyntaxError for bad source,
    JinjaLimitExceeded when the probes together exceed ``limits`` (default: a render's)."""
    compile_template(source, "caps")  # upstream's constructor parses (and throws) before probing
    try:
        probe_template = compile_cached(_probe_environment(), "caps-probe", source)
    except jinja2.TemplateError as exc:  # pragma: no cover - compile_template refused it first
        raise JinjaException(str(exc), "caps") from None
    template = CompiledTemplate(source, "caps", probe_template)
    caps = _probe(template, Budget(limits or DEFAULT_LIMITS))
    return TemplateCaps(**caps)


__all__ = ["PROBED_CAPS", "TemplateCaps", "template_caps", "ProbeEnvironment", "track"]
