"""PEG parse tree -> chat message: upstream's three mappers (common/chat-peg-parser.cpp).

* :func:`map_generic` -- ``common_chat_peg_mapper``: every node in pre-order, acting on its tag
  (reasoning, content, tool-open/-id/-name/-args/-close, tool-arg-open/-name/-value/
  -string-value/-close); tool arguments are assembled as JSON text, pythonic values converted
  by :func:`normalize_quotes_to_json`; a call seen before its name buffers its arguments.
* :func:`map_gemma4` -- ``common_chat_peg_gemma4_mapper``: tool arguments from the
  ``gemma4-*`` value rules.
* :func:`map_minimax_m3` -- ``common_chat_peg_minimax_m3_mapper``: tool arguments from the
  tool-arg / -object / -array / -item tags.
* :func:`mapper_for_format` picks one by chat format name as ``common_chat_peg_parse`` does;
  :func:`map_tags` is ``tag_based_peg_mapper`` (last text per tag).

Each takes the parse result's nodes and returns a fresh :class:`ChatMessage` with role
``"assistant"``. Partial input yields partial JSON arguments, exactly as upstream's.

Upstream works on bytes, here texts are ``str``: a node's text decodes its bytes. The two agree
for valid UTF-8, which is all a ``str`` input can give (node spans then fall on code point
boundaries). Only invalid UTF-8 input differs: upstream copies raw bytes into tool names and
arguments (and its JSON ``dump()`` throws on them in argument names and string values), here
they are U+FFFD. ``isspace`` / ``isalnum`` are C-locale ASCII, as upstream's with bytes.

Mappers run on every streamed token, so subtrees without tags (``AstNode.has_tags``) are skipped
where upstream would visit them to no effect, and texts are built from lists of parts.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator

from ..grammar.json_value import dump_string
from ..peg.ast import AstNode, find_by_tag
from .messages import ChatMessage, ToolCall
from .peg_builder import (
    CONTENT,
    REASONING,
    TOOL,
    TOOL_ARG,
    TOOL_ARG_CLOSE,
    TOOL_ARG_NAME,
    TOOL_ARG_OPEN,
    TOOL_ARG_STRING_VALUE,
    TOOL_ARG_VALUE,
    TOOL_ARGS,
    TOOL_CLOSE,
    TOOL_ID,
    TOOL_NAME,
    TOOL_OPEN,
)

__all__ = [
    "map_gemma4",
    "map_generic",
    "map_minimax_m3",
    "map_tags",
    "mapper_for_format",
    "normalize_quotes_to_json",
]

# common_chat_peg_minimax_m3_mapper's
TOOL_ARG_OBJECT = "tool-arg-object"
TOOL_ARG_ARRAY = "tool-arg-array"
TOOL_ARG_ITEM = "tool-arg-item"

#: C-locale isspace
_SPACE = " \t\n\v\f\r"


def _trim_trailing_space(s: str) -> str:
    return s.rstrip(_SPACE)


def _trim(s: str) -> str:
    """Upstream's ``trim``: at most one leading space character, every trailing one."""
    if s and s[0] in _SPACE:
        s = s[1:]
    return s.rstrip(_SPACE)


# A JSON string as json_brace_depth scans it: a backslash escapes the next character (or ends
# the text); an unterminated string runs to the end.
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\[\s\S]?)*"?')


def _json_brace_depth(s: str) -> int:
    """Unclosed ``{`` count outside strings (upstream's ``json_brace_depth``, without a Python
    loop over characters)."""
    if '"' in s:
        s = _JSON_STRING.sub("", s)
    return s.count("{") - s.count("}")


def _escape_json_string_inner(s: str) -> str:
    """The JSON string literal of ``s`` without its quotes (nlohmann's escaping)."""
    return dump_string(s)[1:-1]


_WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_PY_LITERALS = (("True", "true"), ("False", "false"), ("None", "null"))
# characters normalize_quotes_to_json may rewrite; without any, the text passes through unchanged
_MAY_REWRITE = re.compile(r"['TFN]")
_WORD_RUN = re.compile(r"[A-Za-z0-9_]*")
_SPECIAL = re.compile(r"""[\\"'TFN]""")


def normalize_quotes_to_json(text: str) -> str:
    """Python-style single-quoted strings to JSON double-quoted ones, and the literals ``True``/
    ``False``/``None`` (or a prefix of one, so streamed partials stay monotonic) to JSON, outside
    strings; everything else passes through (upstream's ``normalize_quotes_to_json``)."""
    if _MAY_REWRITE.search(text) is None:
        return text
    out: list[str] = []
    in_single = False
    in_double = False
    n = len(text)
    i = 0
    while i < n:
        m = _SPECIAL.search(text, i)
        if m is None:
            out.append(text[i:])
            break
        j = m.start()
        if j > i:  # every other character passes through in every state
            out.append(text[i:j])
        i = j
        c = text[i]
        if c == "\\":
            if i + 1 == n:
                out.append(c)
            elif in_single:
                # \' needs no escape inside "..."; \" and every other escape stay as they are
                nxt = text[i + 1]
                out.append("'" if nxt == "'" else c + nxt)
                i += 1
            elif in_double:
                out.append(text[i:i + 2])
                i += 1
            else:
                out.append(c)  # outside strings the backslash alone passes through
        elif c == '"':
            if in_single:
                out.append('\\"')
            else:
                in_double = not in_double
                out.append(c)
        elif c == "'":
            if in_double:
                out.append(c)
            else:
                in_single = not in_single
                out.append('"')
        elif not in_single and not in_double and (i == 0 or text[i - 1] not in _WORD_CHARS):
            # T, F or N starting a word: a Python literal, or a prefix of one
            m = _WORD_RUN.match(text, i)
            token = m.group() if m is not None else c
            for py, js in _PY_LITERALS:
                if len(token) <= len(py) and py.startswith(token):
                    out.append(js[:len(token)])
                    i += len(token) - 1
                    break
            else:
                out.append(c)
        else:
            out.append(c)
        i += 1
    return "".join(out)


# --- common_chat_peg_mapper ---------------------------------------------------------------------


class _Call:
    """A tool call being assembled; ``args`` holds the argument text as non-empty parts (appending
    to one growing str would be quadratic)."""

    __slots__ = ("name", "args", "id")

    def __init__(self, name: str = "", args: list[str] | None = None, id: str = "") -> None:
        self.name = name
        self.args: list[str] = [] if args is None else args
        self.id = id

    def copy(self) -> _Call:
        return _Call(self.name, list(self.args), self.id)


def _append(parts: list[str], text: str) -> None:
    if text:
        parts.append(text)


def _assign(parts: list[str], text: str) -> None:
    parts.clear()
    if text:
        parts.append(text)


class _GenericMapper:
    """``common_chat_peg_mapper``'s state machine, one node at a time (:meth:`map`)."""

    def __init__(self) -> None:
        self.content: list[str] = []
        self.reasoning: list[str] = []
        self.calls: list[_Call] = []
        self.pending: _Call | None = None  # a call waiting for its name
        # where arguments go; upstream's pointer to either ``pending`` or ``calls[-1]``. After a
        # tool-close drops ``pending`` it keeps pointing at that (detached) call, as upstream's
        # dangling pointer does at the destroyed one.
        self.current: _Call | None = None
        self.arg_count = 0
        self.closing_quote_pending = False
        self.args_buffer: list[str] = []  # arguments seen before the tool's name

    def args_target(self) -> list[str]:
        current = self.current
        return current.args if current is not None and current.name else self.args_buffer

    def map(self, node: AstNode) -> None:
        tag = node.tag
        # every branch keys on one non-empty tag, and a node has one tag
        if tag == CONTENT:
            self.content.append(node.sanitized_text())
        elif tag == REASONING:  # GPT-OSS has several reasoning blocks: they concatenate
            self.reasoning.append(node.sanitized_text())
        elif tag == TOOL_OPEN:
            self.pending = self.current = _Call()
            self.arg_count = 0
            self.args_buffer = []
            self.closing_quote_pending = False
        elif tag == TOOL_ARG_OPEN:
            self.closing_quote_pending = False
        elif self.current is None:
            return  # the remaining tags need a call
        elif tag == TOOL_ID:
            text = _trim_trailing_space(node.text)
            if len(text) >= 2 and text[0] == '"' and text[-1] == '"':
                text = text[1:-1]
            self.current.id = text
        elif tag == TOOL_NAME:
            self._tool_name(self.current, node)
        elif tag == TOOL_ARGS:
            # JSON arguments come whole; tagged ones are built from the arg tags instead
            text = _trim_trailing_space(node.text)
            if text.startswith("{"):
                _assign(self.args_target(), text)
        elif tag == TOOL_ARG_NAME:
            entry = dump_string(_trim(node.text)) + ":"
            if self.arg_count > 0:
                entry = "," + entry
            self.arg_count += 1
            target = self.args_target()
            if not target:
                target.append("{")
            target.append(entry)
        elif tag == TOOL_ARG_VALUE or tag == TOOL_ARG_STRING_VALUE:
            self._arg_value(node.text, tag == TOOL_ARG_STRING_VALUE)
        elif tag == TOOL_ARG_CLOSE:
            if self.closing_quote_pending:
                self.args_target().append('"')
                self.closing_quote_pending = False
        elif tag == TOOL_CLOSE:
            self._tool_close(self.current)

    def _tool_name(self, current: _Call, node: AstNode) -> None:
        current.name = _trim_trailing_space(node.text)
        if self.args_buffer:
            current.args = self.args_buffer
            self.args_buffer = []
        elif not current.args:
            current.args = ["{"]
        if self.pending is not None:
            # published now so that streaming sees the call; ``pending`` is ``current`` here
            self.calls.append(self.pending)
            self.pending = None
            self.current = self.calls[-1]

    def _arg_value(self, value: str, is_string: bool) -> None:
        if is_string:
            add = ""
            if not value or not self.closing_quote_pending:
                add = '"'  # an empty string's closing quote comes from the arg close
                self.closing_quote_pending = True
            if value:
                add += _escape_json_string_inner(value)
        else:
            add = normalize_quotes_to_json(value)  # pythonic scalars/containers -> JSON
        _append(self.args_target(), add)

    def _tool_close(self, current: _Call) -> None:
        if not current.name and self.args_buffer:
            current.args = self.args_buffer
            self.args_buffer = []
        if self.closing_quote_pending:
            current.args.append('"')
            self.closing_quote_pending = False
        depth = _json_brace_depth("".join(current.args))
        if depth > 0:  # close unclosed (possibly nested) objects
            current.args.append("}" * depth)
        if self.pending is not None:
            if current.name:  # an unnamed call is dropped
                self.calls.append(self.pending.copy())
            self.pending = None

    def finish(self) -> ChatMessage:
        pending = self.pending
        # flush a named call still pending (upstream's guard for partial parses)
        if pending is not None and pending.name:
            if self.args_buffer:
                pending.args = list(self.args_buffer)
            if self.closing_quote_pending and pending.args:
                pending.args.append('"')
            self.calls.append(pending)
            self.pending = None
        reasoning = "".join(self.reasoning)
        if not reasoning.strip(" \n\r\t"):  # whitespace-only reasoning, e.g. a <think></think> prefill
            reasoning = ""
        return ChatMessage(role="assistant", content="".join(self.content), reasoning_content=reasoning,
                           tool_calls=[ToolCall(c.name, "".join(c.args), c.id) for c in self.calls])


def _tagged_preorder(nodes: Iterable[AstNode]) -> Iterator[AstNode]:
    """Upstream's visit order (pre-order), skipping subtrees without a tag: both mappers below act
    on tagged nodes only."""
    stack = list(nodes)
    stack.reverse()
    while stack:
        node = stack.pop()
        if not node.has_tags:
            continue
        yield node
        children = node.children
        if children:
            stack.extend(reversed(children))


def map_generic(nodes: Iterable[AstNode]) -> ChatMessage:
    """``common_chat_peg_mapper::from_ast`` over a parse result's nodes."""
    mapper = _GenericMapper()
    for node in _tagged_preorder(nodes):
        mapper.map(node)
    return mapper.finish()


def map_tags(nodes: Iterable[AstNode]) -> dict[str, str]:
    """``tag_based_peg_mapper``: each tag's text, the last in pre-order winning; keys sorted as
    upstream's ``std::map``."""
    tags = {node.tag: node.text for node in _tagged_preorder(nodes) if node.tag}
    return dict(sorted(tags.items()))


# --- the gemma4 and minimax-m3 mappers: reasoning / content / tool tags, found top-down ----------


def visit_top_tags(nodes: Iterable[AstNode], content: list[str], reasoning: list[str],
                    on_tool: Callable[[AstNode], None]) -> None:
    """Both mappers' ``visit``, and deviation 4's streamed view: a reasoning, content or tool node
    is handled and not descended; any other node's children are visited (untagged subtrees hold
    none of those)."""
    stack = list(nodes)
    stack.reverse()
    while stack:
        node = stack.pop()
        if not node.has_tags:
            continue
        tag = node.tag
        if tag == REASONING:
            reasoning.append(node.sanitized_text())
        elif tag == CONTENT:
            content.append(node.sanitized_text())
        elif tag == TOOL:
            on_tool(node)
        else:
            stack.extend(reversed(node.children))


def _map_top_tags(nodes: Iterable[AstNode], tool_call: Callable[[AstNode], ToolCall | None]) -> ChatMessage:
    content: list[str] = []
    reasoning: list[str] = []
    calls: list[ToolCall] = []

    def on_tool(node: AstNode) -> None:
        call = tool_call(node)
        if call is not None:
            calls.append(call)

    visit_top_tags(nodes, content, reasoning, on_tool)
    # no whitespace-only reasoning discard here: these mappers replace the base from_ast
    return ChatMessage(role="assistant", content="".join(content), reasoning_content="".join(reasoning),
                       tool_calls=calls)


def _gemma4_to_json(node: AstNode) -> str:
    """A ``gemma4-*`` value as JSON text, left open where the node is partial (``gemma4_to_json``)."""
    if node.end <= node.start:  # empty text (cheaper than slicing node.raw)
        return ""
    rule = node.rule
    children = node.children
    if rule == "gemma4-number" or rule == "gemma4-bool" or rule == "gemma4-null" or rule == "gemma4-dict-key-name":
        return node.text
    if rule == "gemma4-string-content":
        return _escape_json_string_inner(node.text)
    if rule == "gemma4-string":
        if not children:
            return '"'
        return '"' + _gemma4_to_json(children[0]) + ("" if node.is_partial else '"')
    if rule == "gemma4-array":
        return "[" + ",".join(_gemma4_to_json(c) for c in children) + ("" if node.is_partial else "]")
    if rule == "gemma4-dict":
        return "{" + ",".join(_gemma4_to_json(c) for c in children) + ("" if node.is_partial else "}")
    if rule == "gemma4-dict-key":
        key = _escape_json_string_inner(_gemma4_to_json(children[0])) if children else ""
        return '"' + key + ("" if node.is_partial else '":')
    if rule == "gemma4-dict-kv":
        return "".join(_gemma4_to_json(c) for c in children)
    if rule == "gemma4-value":
        return _gemma4_to_json(children[0]) if children else ""
    return ""


def _gemma4_tool_call(node: AstNode) -> ToolCall | None:
    name = find_by_tag(node, TOOL_NAME)
    args = find_by_tag(node, TOOL_ARGS)
    if name is None or args is None or name.is_partial:
        return None
    return ToolCall(name.text, _gemma4_to_json(args.children[0]) if args.children else "")


def map_gemma4(nodes: Iterable[AstNode]) -> ChatMessage:
    """``common_chat_peg_gemma4_mapper::from_ast`` over a parse result's nodes."""
    return _map_top_tags(nodes, _gemma4_tool_call)


_MINIMAX_VALUE_TAGS = frozenset((TOOL_ARG_VALUE, TOOL_ARG_STRING_VALUE, TOOL_ARG_OBJECT, TOOL_ARG_ARRAY))


def _minimax_collect(node: AstNode, tag: str, out: list[AstNode]) -> None:
    """Every descendant tagged ``tag`` that is not inside another one, in order."""
    for child in node.children:
        if child.tag == tag:
            out.append(child)
        elif child.has_tags:
            _minimax_collect(child, tag, out)


def _minimax_value_of(node: AstNode) -> AstNode | None:
    for child in node.children:
        if child.tag in _MINIMAX_VALUE_TAGS:
            return child
    return None


def _minimax_member_to_json(node: AstNode) -> str:
    name = find_by_tag(node, TOOL_ARG_NAME)
    if name is None:
        return ""
    return dump_string(name.text) + ":" + _minimax_value_to_json(_minimax_value_of(node), not node.is_partial)


def _minimax_container_to_json(node: AstNode, is_object: bool, closed: bool) -> str:
    entries: list[AstNode] = []
    _minimax_collect(node, TOOL_ARG if is_object else TOOL_ARG_ITEM, entries)
    texts = []
    for entry in entries:
        if is_object:
            text = _minimax_member_to_json(entry)
        else:
            text = _minimax_value_to_json(_minimax_value_of(entry), not entry.is_partial)
        if text:  # an entry with nothing to show yet is left out, comma included
            texts.append(text)
    body = ",".join(texts)
    if is_object:
        return "{" + body + ("}" if closed else "")
    return "[" + body + ("]" if closed else "")


def _minimax_value_to_json(node: AstNode | None, closed: bool) -> str:
    if node is None:
        return ""
    tag = node.tag
    if tag == TOOL_ARG_OBJECT:
        return _minimax_container_to_json(node, True, closed)
    if tag == TOOL_ARG_ARRAY:
        return _minimax_container_to_json(node, False, closed)
    if tag == TOOL_ARG_STRING_VALUE:
        return '"' + _escape_json_string_inner(node.text) + ('"' if closed else "")
    return node.text  # numbers and booleans are written verbatim by the template


def _minimax_tool_call(node: AstNode) -> ToolCall | None:
    name = find_by_tag(node, TOOL_NAME)
    if name is None:
        return None
    return ToolCall(name.text, _minimax_container_to_json(node, True, not node.is_partial))


def map_minimax_m3(nodes: Iterable[AstNode]) -> ChatMessage:
    """``common_chat_peg_minimax_m3_mapper::from_ast`` over a parse result's nodes."""
    return _map_top_tags(nodes, _minimax_tool_call)


Mapper = Callable[[Iterable[AstNode]], ChatMessage]

_MAPPERS: dict[str, Mapper] = {"peg-gemma4": map_gemma4, "peg-minimax-m3": map_minimax_m3}


def mapper_for_format(format_name: str) -> Mapper:
    """The mapper ``common_chat_peg_parse`` uses for a chat format (by upstream's format name):
    gemma4's, minimax-m3's, else the generic one."""
    return _MAPPERS.get(format_name, map_generic)
