"""The names of the recovery rules: what a reply's ``llamact.recovered`` lists (docs/design.md,
deviation 17). Each names one way a model wrote a call that its template's parser does not read;
a reply lists the rules its recovered calls needed, in the order first used."""

from __future__ import annotations

__all__ = ["ARGUMENTS_STRING", "BARE_JSON", "FENCED_BLOCK", "INLINE_JSON", "KEY_VARIANTS", "MISSING_CLOSE",
           "NAME_VARIANT", "PYTHON_CALL", "RULES", "SINGLE_QUOTES", "STRAY_TEXT", "TRAILING_COMMA"]

#: a call in a Markdown code fence (```json ... ```) instead of the template's envelope
FENCED_BLOCK = "fenced_block"
#: a call written as bare JSON on lines of its own, without the envelope
BARE_JSON = "bare_json"
#: with tool_choice "required" (or a named tool): a call's JSON inside other text
INLINE_JSON = "inline_json"
#: a call in Python syntax: ``f(a=1)``, ``[f(a=1), g(b=2)]``
PYTHON_CALL = "python_call"
#: JSON with single-quoted strings or Python's True / False / None
SINGLE_QUOTES = "single_quotes"
#: JSON with a comma before a closing brace or bracket
TRAILING_COMMA = "trailing_comma"
#: the arguments given as a JSON string instead of an object
ARGUMENTS_STRING = "arguments_string"
#: an envelope or a code fence that the output never closes
MISSING_CLOSE = "missing_close"
#: the call's keys spelt otherwise: ``function`` / ``tool`` for the name, ``parameters`` / ``args`` /
#: ``input`` for the arguments, OpenAI's ``{"type": "function", "function": {...}}``, ``{NAME: {...}}``
KEY_VARIANTS = "key_variants"
#: the tool's name written with other separators or case (``prob_dist.binomial`` for the tool
#: ``prob_dist_binomial``): only when it names exactly one tool once ``.``, ``-``, ``_``, blanks and case
#: are set aside
NAME_VARIANT = "name_variant"
#: text where the template's format admits none (after the calls): the calls stand, the text stays content
STRAY_TEXT = "stray_text"

RULES = (FENCED_BLOCK, BARE_JSON, INLINE_JSON, PYTHON_CALL, SINGLE_QUOTES, TRAILING_COMMA, ARGUMENTS_STRING,
         MISSING_CLOSE, KEY_VARIANTS, NAME_VARIANT, STRAY_TEXT)
