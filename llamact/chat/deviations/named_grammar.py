"""The grammar of a forced tool call, derived from a family's own parser (docs/design.md, deviations 9
and 19).

    call_only_arena(arena, one_call=True) -> Arena | None      the parser with no room left for content
    call_only_grammar(arena, one_call=True) -> str | None      its GBNF (not lazy; begins where the family's does)

Enters: the parser arena a family builds for ``tool_choice="required"`` with only the named tool
(its root: the generation prompt, an optional or forced thought, content, then the call). Leaves:
the same arena where content can only be whitespace, so that its grammar admits the generation
prompt, the family's own thought (where it has one) and then the call, nothing else. None when no
path of the arena produces a tool call (a template without a tool-call format).

How: content is what the ``content`` tags match (the chat mappers read the message's content from
them and from nothing else), so each ``content`` tag becomes the ``space`` rule (a little whitespace:
templates put newlines between a thought and a call, and upstream's grammars read them as content).
What only carried content goes too, so that no empty wrapper stays admissible: an alternative of a
choice that reaches content but no tool call is dropped (GPT-OSS's preamble channel, "content or
calls"), and an optional or repeated part in the same case becomes whitespace (Command R7B's
``<|START_RESPONSE|>...<|END_RESPONSE|>``). Where a choice offers a call alone, its alternatives
where a literal introduces content before the call go first (Functionary v3.2's ``all\\nTEXT``
then a call: what would stay of them, ``all\\n``, makes its own parser read the call as content).
Node ids are kept (replaced nodes keep their id), so rules and references stay valid. Calls are
made one: a repetition of calls (parallel calls, "one or more") admits exactly one, the optional
calls after a first one go. The whitespace the root ends with goes too: the grammar ends where the
call ends, so generation does (llama.cpp allows only an end token once a grammar is complete).
With ``one_call=False`` (``tool_choice: "required"``, deviation 19) the calls keep the family's
count, and a repetition of "a call, then whitespace" that ends the root becomes "a call, then any
number of (whitespace, a call)": whitespace after a call is admitted only before another call, so
the grammar is complete where a call ends.
GBNF generation is upstream's (``peg.gbnf``) on the rewritten arena.
Reading the output stays the family's own parser's job (built for all the tools, see named_tool.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace

from ...peg.arena import Arena
from ...peg.gbnf import arena_to_gbnf
from ...peg.nodes import (
    Ac,
    And,
    Atomic,
    Choice,
    End,
    Epsilon,
    Gbnf,
    Literal,
    Not,
    Parser,
    Ref,
    Repetition,
    Rule,
    Schema,
    Sequence,
    Space,
    Tag,
)
from ..peg_builder import CONTENT, TOOL, TOOL_NAME

__all__ = ["call_only_arena", "call_only_grammar"]

_TOOL_TAGS = frozenset({TOOL, TOOL_NAME})


def _successors(arena: Arena, node: Parser) -> Iterator[int]:
    if isinstance(node, (Sequence, Choice)):
        yield from node.children
    elif isinstance(node, (Repetition, And, Not, Tag, Atomic, Gbnf, Ac, Schema, Rule)):
        yield node.child
    elif isinstance(node, Ref) and node.name in arena.rules:
        yield arena.rules[node.name]


def _reaching(arena: Arena, is_target: Callable[[int, Parser], bool]) -> set[int]:
    """Ids of the nodes from which a target node is reachable (targets included); a fixpoint,
    since rules refer to each other (and to themselves) by name."""
    found = {i for i, node in enumerate(arena.parsers) if is_target(i, node)}
    changed = True
    while changed:
        changed = False
        for i, node in enumerate(arena.parsers):
            if i not in found and any(s in found for s in _successors(arena, node)):
                found.add(i)
                changed = True
    return found


def _is_tool(_i: int, node: Parser) -> bool:
    return isinstance(node, Tag) and node.tag in _TOOL_TAGS


def _filter_choices(parsers: list[Parser], content_only: set[int]) -> bool:
    """Drop the content-only alternatives of every choice that has others; whether any was dropped."""
    changed = False
    for i, node in enumerate(parsers):
        if isinstance(node, Choice):
            kept = tuple(c for c in node.children if c not in content_only)
            if kept and len(kept) < len(node.children):
                parsers[i] = replace(node, children=kept)
                changed = True
    return changed


def _is_content(_i: int, node: Parser) -> bool:
    return isinstance(node, Tag) and node.tag == CONTENT


def _content_channels(arena: Arena) -> set[int]:
    """Sequences where a literal introduces content (Functionary v3.2's ``all\\n`` + text): with the
    text taken out, the literal alone would stay admissible."""
    parsers = arena.parsers

    def introduces(a: int) -> bool:
        node = parsers[a]
        return isinstance(node, Literal) and bool(node.literal)

    return {i for i, node in enumerate(parsers) if isinstance(node, Sequence)
            and any(introduces(a) and _is_content(b, parsers[b])
                    for a, b in zip(node.children, node.children[1:], strict=False))}


def _prefer_calls_alone(arena: Arena, parsers: list[Parser], tool: set[int]) -> None:
    """In a choice that has a call without any content (Functionary's bare ``NAME\\n{...}``), drop
    the alternatives where a content channel comes before the call (``all\\nTEXT`` then a call):
    the family's parser reads what follows a bare ``all\\n`` as content, not as the call."""
    with_content = _reaching(arena, _is_content)
    channels = _content_channels(arena)
    through_channel = _reaching(arena, lambda i, _node: i in channels)
    for i, node in enumerate(parsers):
        if isinstance(node, Choice):
            if any(c in tool and c not in with_content for c in node.children):
                kept = tuple(c for c in node.children if not (c in tool and c in through_channel))
                if len(kept) < len(node.children):
                    parsers[i] = replace(node, children=kept)


def _drop_optional_parts(parsers: list[Parser], content_only: set[int], removed: set[int]) -> bool:
    """Make every optional (or zero-or-more) content-only part whitespace; whether any was."""
    changed = False
    for i, node in enumerate(parsers):
        if isinstance(node, Repetition) and node.min_count == 0 and node.child in content_only:
            parsers[i] = Space()
            removed.add(i)
            changed = True
    return changed


def _one_call(parsers: list[Parser], tool: set[int]) -> None:
    """Repetitions of calls (parallel calls, "one or more") admit one: a mandatory repetition is made
    exactly one, an optional one (the calls after the first) goes."""
    for i, node in enumerate(parsers):
        if isinstance(node, Repetition) and node.child in tool and node.max_count != 1:
            parsers[i] = replace(node, min_count=1, max_count=1) if node.min_count > 0 else Epsilon()


def _separator_first(parsers: list[Parser], i: int, node: Repetition) -> int | None:
    """``(CALL SPACE){n,m}`` as ``CALL (SPACE CALL){n-1,m-1}`` (new nodes appended, ``i`` rewritten):
    the whitespace is kept between calls and goes after the last one. The id where the last call's
    part begins (to end it too), or None when the repetition's body does not end with whitespace."""
    body = parsers[node.child]
    if not isinstance(body, Sequence) or node.min_count < 1:
        return None
    children = list(body.children)
    spaces: list[int] = []
    while children and isinstance(parsers[children[-1]], Space):
        spaces.insert(0, children.pop())
    if not spaces or not children:
        return None
    parsers.append(Sequence(tuple(spaces + children)))
    more = Repetition(len(parsers) - 1, node.min_count - 1, -1 if node.max_count == -1 else node.max_count - 1)
    parsers.append(more)
    parsers[i] = Sequence(tuple(children) + (len(parsers) - 1,))
    return children[-1]


def _end_with_the_call(arena: Arena, parsers: list[Parser]) -> None:
    """Whitespace the root ends with (after the call) goes: the grammar then admits nothing after the
    call, so llama.cpp's sampler allows only an end-of-generation token there and the reply ends
    with the call (a model that prefers whitespace to its end token would otherwise write up to
    ``"\\n\\n"`` and 20 blanks first, and run out of ``max_tokens`` on a call already complete).
    A repetition of calls ending the root keeps its whitespace between calls only."""
    seen: set[int] = set()
    pending = [arena.root]
    while pending:
        i = pending.pop()
        if i in seen:
            continue
        seen.add(i)
        node = parsers[i]
        if isinstance(node, Sequence):
            children = list(node.children)
            at = len(children) - 1
            while at >= 0:
                last = parsers[children[at]]
                if isinstance(last, Space):
                    del children[at]
                elif not (isinstance(last, (End, Epsilon)) or (isinstance(last, Literal) and not last.literal)):
                    pending.append(children[at])   # (the end of input, or an empty literal, matches no text)
                    break
                at -= 1
            if len(children) < len(node.children):
                parsers[i] = replace(node, children=tuple(children)) if children else Epsilon()
        elif isinstance(node, Choice):
            pending.extend(node.children)
        elif isinstance(node, Repetition):
            if node.max_count == 1:
                pending.append(node.child)
            elif (separator := _separator_first(parsers, i, node)) is not None:
                pending.append(separator)
        elif isinstance(node, (Tag, Atomic, Rule)):
            pending.append(node.child)
        elif isinstance(node, Ref) and node.name in arena.rules:
            pending.append(arena.rules[node.name])


def call_only_arena(arena: Arena, one_call: bool = True) -> Arena | None:
    """``arena`` with its content taken out (see the module docstring); None when no path of it
    produces a tool call. ``one_call=False`` keeps the family's number of calls."""
    tool = _reaching(arena, _is_tool)
    if arena.root not in tool:
        return None
    parsers = list(arena.parsers)
    if one_call:
        _one_call(parsers, tool)
    _prefer_calls_alone(arena, parsers, tool)
    removed = {i for i, node in enumerate(parsers) if _is_content(i, node)}
    for i in removed:
        parsers[i] = Space()
    # dropping a content-only alternative can make an enclosing part content-only: repeat until
    # stable, choices first (an optional part holding a choice is judged after the choice is filtered)
    while True:
        current = Arena(tuple(parsers), arena.rules, arena.root)
        content_only = _reaching(current, lambda i, _node: i in removed) - _reaching(current, _is_tool)
        if _filter_choices(parsers, content_only):
            continue
        if not _drop_optional_parts(parsers, content_only, removed):
            break
    _end_with_the_call(arena, parsers)
    return Arena(tuple(parsers), dict(arena.rules), arena.root)


def call_only_grammar(arena: Arena, one_call: bool = True) -> str | None:
    """The GBNF of :func:`call_only_arena` (the whole root, not lazy); None when there is no call."""
    rewritten = call_only_arena(arena, one_call)
    return None if rewritten is None else arena_to_gbnf(rewritten, lazy=False)
