"""Random GBNF text: well-formed grammars over llama.cpp's whole syntax, and damaged ones.

:func:`grammar` writes rules with literals (escapes included), character classes (ranges,
negation, escapes), ``.``, rule references (now and then to an undefined rule), token id references
``<[id]>`` / ``!<[id]>``, groups, every repetition form, comments and the newline rules (a newline
ends a rule except after ``::=`` / ``|`` and inside parentheses). With some probability the text is
then damaged: a character deleted, a syntax character inserted, a line duplicated. Text token
references (``<think>``) are left out: they need a vocabulary llamact's front end does not consult.
"""

from __future__ import annotations

import random

__all__ = ["grammar"]

_LITERAL_CHARS = ["a", "b", "z", " ", "0", "é", "世", "🎉", "\\n", "\\t", "\\r", "\\\\", '\\"', "\\x41", "\\u00e9",
                  "\\U0001F600", "{", "}", "[", "]", "|", "(", ")", "#", "-", "'"]
_CLASS_ITEMS = ["a-z", "A-Z", "0-9", "_", "-", " ", "\\n", "\\t", "\\]", "\\[", "\\\\", "\\x20-\\x7E", "é", "^",
                "\\u0100-\\uFFFF", "."]
_DAMAGE_CHARS = ["(", ")", "[", "]", '"', "|", "*", "+", "?", "{", "}", ",", "::=", "\n", "\\", "<", ">", "!",
                 "#", ":", "=", " ", "x", "1"]


def _name(rng: random.Random) -> str:
    return rng.choice(["a", "b", "item", "ws", "value", "x-y", "r1", "root2", "Rule", "n0"])


def _element(rng: random.Random, names: list[str], depth: int) -> str:
    roll = rng.random()
    if roll < 0.3:
        text = "".join(rng.choice(_LITERAL_CHARS) for _ in range(rng.randint(0 if rng.random() < 0.1 else 1, 4)))
        atom = f'"{text}"'
    elif roll < 0.5:
        items = "".join(rng.choice(_CLASS_ITEMS) for _ in range(rng.randint(0 if rng.random() < 0.1 else 1, 3)))
        atom = f"[{'^' if rng.random() < 0.25 else ''}{items}]"
    elif roll < 0.6:
        atom = "."
    elif roll < 0.78:
        atom = rng.choice(names) if rng.random() < 0.99 else "undefined-rule"
    elif roll < 0.83:
        atom = f"{'!' if rng.random() < 0.3 else ''}<[{rng.randint(0, 49151)}]>"
    elif depth < 3:
        atom = "(" + _alternatives(rng, names, depth + 1, nested=True) + ")"
    else:
        atom = '"x"'
    empty = atom in ('""', "[]", "[^]", "()")
    if rng.random() < (0.02 if empty else 0.35):  # a repetition of nothing is an error: now and then
        m = rng.randint(0, 3)
        atom += rng.choice(["*", "+", "?", f"{{{m}}}", f"{{{m},}}", f"{{{m},{m + rng.randint(0, 3)}}}"])
    return atom


def _alternatives(rng: random.Random, names: list[str], depth: int, nested: bool = False) -> str:
    alternatives = []
    for _ in range(rng.randint(1, 3)):
        count = rng.randint(0 if nested and rng.random() < 0.1 else 1, 4)
        sequence = " ".join(_element(rng, names, depth) for _ in range(count))
        alternatives.append(sequence)
    # outside parentheses a newline ends the rule, so "\n  | ..." is an error there (now and then)
    separator = rng.choices([" | ", " |\n  ", "\n  | "], [6, 3, 0.2])[0] if not nested else \
        rng.choice([" | ", "\n | "])
    return separator.join(alternatives)


def grammar(rng: random.Random) -> str:
    names = ["root"] + sorted({_name(rng) for _ in range(rng.randint(0, 4))})
    if rng.random() < 0.05:
        names = names[1:] or ["other"]  # no root
    lines = []
    if rng.random() < 0.2:
        lines.append("# a comment")
    for name in names:
        body = _alternatives(rng, names, 0)
        head = f"{name} ::= " if rng.random() < 0.9 else f"{name} ::=\n    "
        comment = "  # trailing" if rng.random() < 0.1 else ""
        lines.append(head + body + comment)
    text = "\n".join(lines) + rng.choice(["\n", "", "\n\n"])
    if rng.random() < 0.25:
        for _ in range(rng.randint(1, 2)):
            i = rng.randint(0, len(text))
            roll = rng.random()
            if roll < 0.4 and text:
                text = text[:i] + text[i + 1:]
            elif roll < 0.8:
                text = text[:i] + rng.choice(_DAMAGE_CHARS) + text[i:]
            else:
                rows = text.split("\n")
                k = rng.randrange(len(rows))
                rows.insert(k, rows[k])
                text = "\n".join(rows)
    return text
