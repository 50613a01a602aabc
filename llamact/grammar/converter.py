"""The schema model turned into a GBNF grammar, byte for byte as upstream's converter writes it.

Mirrors ``common_chat_schema_converter`` (common/json-schema-to-grammar.cpp): fixed primitive
rules, ``add_rule`` deduplication with numeric suffixes (``name``, ``name0``, ``name1``, ...), a
trie-based key rule for ``additionalProperties`` next to named properties, digit-by-digit integer
ranges, regex patterns, string formats, and the grammar printed as ``name ::= body\\n`` lines
sorted by name.

What enters: :class:`SchemaNode` trees (from :func:`.schema.schema_from_json`) through
:meth:`SchemaConverter.visit`, and raw rules through :meth:`SchemaConverter.add_rule`. What
leaves: :meth:`SchemaConverter.format_grammar`. What is raised by :meth:`check_errors`:
:class:`GrammarConversionError` (a ``LlamaUnsupportedException``) with upstream's message
``JSON schema conversion failed:\\n...`` for an invalid regex pattern or an unresolved ``$ref``;
the message ends with where in the schema the offender sits. A valid but unsupported pattern is a
warning (logged on ``llamact.grammar``) and accepts any string, as upstream.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from ..errors import LlamaUnsupportedException
from .int_ranges import INT64_MAX, INT64_MIN, INT_MAX, build_min_max_int, build_repetition
from .json_value import dump, dump_string
from .regex_pattern import InvalidPattern, UnsupportedPattern, pattern_to_rule
from .schema import (
    FORMAT_NONE,
    FORMAT_UUID,
    AllOfSchema,
    AnyOfSchema,
    AnySchema,
    ArraySchema,
    ConstSchema,
    EnumSchema,
    IntegerSchema,
    ObjectSchema,
    RefSchema,
    SchemaNode,
    StringSchema,
    TupleSchema,
)

__all__ = ["ConverterRuntimeError", "GrammarConversionError", "SchemaConverter", "format_literal"]

logger = logging.getLogger("llamact.grammar")

SPACE_RULE = '| " " | "\\n"{1,2} [ \\t]{0,20}'

# name -> (body, dependencies)
PRIMITIVE_RULES: dict[str, tuple[str, tuple[str, ...]]] = {
    "boolean": ('("true" | "false")', ()),
    "decimal-part": ("[0-9]{1,16}", ()),
    "integral-part": ("[0] | [1-9] [0-9]{0,15}", ()),
    "number": ('("-"? integral-part) ("." decimal-part)? ([eE] [-+]? integral-part)?',
               ("integral-part", "decimal-part")),
    "integer": ('("-"? integral-part)', ("integral-part",)),
    "value": ("object | array | string | number | boolean | null",
              ("object", "array", "string", "number", "boolean", "null")),
    "object": ('"{" space ( string ":" space value ("," space string ":" space value)* )? space "}"',
               ("string", "value")),
    "array": ('"[" space ( value ("," space value)* )? space "]"', ("value",)),
    "uuid": ('"\\"" [0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" '
             '[0-9a-fA-F]{12} "\\""', ()),
    "char": ('[^"\\\\\\x7F\\x00-\\x1F] | [\\\\] (["\\\\bfnrt] | "u" [0-9a-fA-F]{4})', ()),
    "string": ('"\\"" char* "\\""', ("char",)),
    "null": ('"null"', ()),
}

STRING_FORMAT_RULES: dict[str, tuple[str, tuple[str, ...]]] = {
    "date": ('[0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [1-2] [0-9] | "3" [0-1] )', ()),
    "time": ('([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{3} )? ( "Z" | ( "+" | "-" ) '
             '( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] )', ()),
    "date-time": ('date "T" time', ("date", "time")),
    "date-string": ('"\\"" date "\\""', ("date",)),
    "time-string": ('"\\"" time "\\""', ("time",)),
    "date-time-string": ('"\\"" date-time "\\""', ("date-time",)),
}

RESERVED_NAMES = frozenset({"root", *PRIMITIVE_RULES, *STRING_FORMAT_RULES})

_INVALID_RULE_CHARS = re.compile(r"[^a-zA-Z0-9-]+")
_LITERAL_ESCAPES = {"\r": "\\r", "\n": "\\n", '"': '\\"', "\\": "\\\\"}
_LITERAL_ESCAPE_RE = re.compile(r'[\r\n"\\]')
_STRAY_BYTE = re.compile("[\udc80-\udcff]")


class GrammarConversionError(LlamaUnsupportedException):
    """The converter found an invalid pattern or an unresolved ``$ref``."""


class ConverterRuntimeError(GrammarConversionError):
    """Raised while visiting (upstream's ``std::runtime_error`` from the converter itself)."""


def format_literal(literal: str) -> str:
    """A GBNF string literal for ``literal`` (upstream's ``gbnf_format_literal``)."""
    return '"' + _LITERAL_ESCAPE_RE.sub(lambda m: _LITERAL_ESCAPES[m.group(0)], literal) + '"'


def _constant_rule(value: Any) -> str:
    return format_literal(dump(value))


def _utf8_key(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


class SchemaConverter:
    """One grammar under construction (see the module docstring)."""

    def __init__(self, dotall: bool = False) -> None:
        self._dotall = dotall
        self._rules: dict[str, str] = {"space": SPACE_RULE}
        self._refs_being_resolved: set[str] = set()
        self._errors: list[tuple[str, str]] = []  # (message, schema path)
        self._warnings: list[str] = []

    # -- rules ---------------------------------------------------------------------------------

    def add_rule(self, name: str, rule: str) -> str:
        """Add ``name ::= rule``; the name actually used (a numeric suffix when taken) is returned."""
        esc_name = _INVALID_RULE_CHARS.sub("-", name)
        rules = self._rules
        if esc_name not in rules or rules[esc_name] == rule:
            rules[esc_name] = rule
            return esc_name
        i = 0
        while f"{esc_name}{i}" in rules and rules[f"{esc_name}{i}"] != rule:
            i += 1
        key = f"{esc_name}{i}"
        rules[key] = rule
        return key

    def _add_primitive(self, name: str, rule: tuple[str, tuple[str, ...]]) -> str:
        n = self.add_rule(name, rule[0])
        for dep in rule[1]:
            dep_rule = PRIMITIVE_RULES.get(dep) or STRING_FORMAT_RULES.get(dep)
            if dep_rule is None:
                self._errors.append((f"Rule {dep} not known", ""))
                continue
            if dep not in self._rules:
                self._add_primitive(dep, dep_rule)
        return n

    def _visit_primitive(self, rule_name: str, type_name: str) -> str:
        return self._add_primitive("root" if rule_name == "root" else type_name, PRIMITIVE_RULES[type_name])

    # -- schema nodes --------------------------------------------------------------------------

    def add_schema(self, name: str, schema: SchemaNode) -> str:
        return self.visit(schema, name)

    def visit(self, schema: SchemaNode, name: str) -> str:
        rule_name = name + "-" if name in RESERVED_NAMES else (name or "root")
        sub_name = name + ("-" if name else "")

        if isinstance(schema, RefSchema):
            return self.add_rule(rule_name, self._resolve_ref(schema))
        if isinstance(schema, AnyOfSchema):
            alts = [self.visit(alt, name + ("-" if name else "alternative-") + str(i))
                    for i, alt in enumerate(schema.children)]
            return self.add_rule(rule_name, " | ".join(alts))
        if isinstance(schema, AllOfSchema):
            return self._visit_all_of(schema, name, rule_name)
        if isinstance(schema, ConstSchema):
            return self.add_rule(rule_name, _constant_rule(schema.value))
        if isinstance(schema, EnumSchema):
            return self.add_rule(rule_name, "(" + " | ".join(_constant_rule(v) for v in schema.values) + ")")
        if isinstance(schema, ObjectSchema):
            if not schema.properties and isinstance(schema.additional_properties, AnySchema):
                return self.add_rule(rule_name, self._add_primitive("object", PRIMITIVE_RULES["object"]))
            properties = [(p.name, p.schema) for p in schema.properties]
            required = {p.name for p in schema.properties if p.required}
            return self.add_rule(rule_name,
                                 self._object_rule(properties, required, name, schema.additional_properties))
        if isinstance(schema, TupleSchema):
            parts = [self.visit(item, f"{sub_name}tuple-{i}") for i, item in enumerate(schema.items)]
            return self.add_rule(rule_name, '"[" space ' + ' "," space '.join(parts) + ' space "]"')
        if isinstance(schema, ArraySchema):
            if isinstance(schema.items, AnySchema) and schema.min_items == 0 and schema.max_items < 0:
                return self._visit_primitive(rule_name, "array")
            item_rule = self.visit(schema.items, sub_name + "item")
            max_items = INT_MAX if schema.max_items < 0 else schema.max_items
            return self.add_rule(
                rule_name,
                '"[" space ' + build_repetition(item_rule, schema.min_items, max_items, '"," space') + ' space "]"')
        if isinstance(schema, StringSchema):
            return self._visit_string(schema, rule_name)
        if isinstance(schema, IntegerSchema):
            if schema.minimum == INT64_MIN and schema.maximum == INT64_MAX:
                return self._visit_primitive(rule_name, "integer")
            try:
                body = build_min_max_int(schema.minimum, schema.maximum)
            except ValueError as exc:  # upstream's runtime_error, both bounds at their "unset" values
                raise ConverterRuntimeError(f"{exc}\n(at {schema.path})", {"path": schema.path}) from None
            return self.add_rule(rule_name, "(" + body + ")")
        if isinstance(schema, AnySchema):
            return self.add_rule(rule_name, self._add_primitive("value", PRIMITIVE_RULES["value"]))
        # null, boolean, number
        return self._visit_primitive(rule_name, schema.kind)

    def _visit_string(self, schema: StringSchema, rule_name: str) -> str:
        if schema.pattern:
            return self._visit_pattern(schema, rule_name)
        if schema.format == FORMAT_UUID:
            return self._visit_primitive(rule_name, "uuid")
        if schema.format != FORMAT_NONE:
            prim_name = schema.format + "-string"
            return self.add_rule(rule_name, self._add_primitive(prim_name, STRING_FORMAT_RULES[prim_name]))
        if schema.min_length > 0 or schema.max_length >= 0:
            char_rule = self._add_primitive("char", PRIMITIVE_RULES["char"])
            max_len = INT_MAX if schema.max_length < 0 else schema.max_length
            return self.add_rule(rule_name, '"\\"" ' + build_repetition(char_rule, schema.min_length, max_len)
                                 + ' "\\""')
        return self._visit_primitive(rule_name, "string")

    def _visit_pattern(self, schema: StringSchema, name: str) -> str:
        pattern = schema.pattern
        snapshot = dict(self._rules)
        try:
            return pattern_to_rule(pattern, name, self.add_rule, self._dotall)
        except UnsupportedPattern as err:
            self._rules = snapshot
            self._warnings.append(f"pattern {pattern} is not supported ({err}), accepting any string")
            return self.add_rule(name, self._add_primitive("string", PRIMITIVE_RULES["string"]))
        except InvalidPattern as err:
            self._rules = snapshot
            self._errors.append((f"Invalid pattern {pattern}: {err}", schema.path + "/pattern"))
            return ""

    def _resolve_ref(self, schema: RefSchema) -> str:
        ref = schema.ref
        fragment = ref[ref.index("#") + 1:] if "#" in ref else ref
        ref_name = "ref" + _INVALID_RULE_CHARS.sub("-", fragment)
        if ref_name not in self._rules and ref not in self._refs_being_resolved:
            if schema.target is None:
                self._errors.append((f"Unresolved $ref {ref}", schema.path + "/$ref"))
                return ""
            self._refs_being_resolved.add(ref)
            ref_name = self.visit(schema.target, ref_name)
            self._refs_being_resolved.discard(ref)
        return ref_name

    def _visit_all_of(self, schema: AllOfSchema, name: str, rule_name: str) -> str:
        required: set[str] = set()
        properties: list[tuple[str, SchemaNode]] = []
        enum_values: dict[str, int] = {}

        def add_component(comp: SchemaNode, is_required: bool) -> None:
            if isinstance(comp, RefSchema):
                if comp.target is not None:
                    add_component(comp.target, is_required)
            elif isinstance(comp, ObjectSchema):
                for prop in comp.properties:
                    properties.append((prop.name, prop.schema))
                    if is_required:
                        required.add(prop.name)
            elif isinstance(comp, EnumSchema):
                for v in comp.values:
                    key = _constant_rule(v)
                    enum_values[key] = enum_values.get(key, 0) + 1

        for child in schema.children:
            if isinstance(child, AnyOfSchema):
                for alt in child.children:
                    add_component(alt, False)
            else:
                add_component(child, True)
        if enum_values:
            intersection = [k for k in sorted(enum_values, key=_utf8_key) if enum_values[k] == len(schema.children)]
            if intersection:
                return self.add_rule(rule_name, "(" + " | ".join(intersection) + ")")
        return self.add_rule(rule_name, self._object_rule(properties, required, name, None))

    def _not_strings(self, strings: list[str]) -> str:
        """A rule matching a JSON string that is none of ``strings`` (a trie over their code points)."""
        root: dict[str, Any] = {}
        terminal = "\0end"
        for word in strings:
            node = root
            for ch in word:
                node = node.setdefault(ch, {})
            node[terminal] = True
        char_rule = self._add_primitive("char", PRIMITIVE_RULES["char"])
        out = ['["] ( ']

        def visit(node: dict[str, Any]) -> None:
            children = sorted(k for k in node if k != terminal)
            for n, ch in enumerate(children):
                if n:
                    out.append(" | ")
                out.append("[" + ch + "]")
                child = node[ch]
                if any(k != terminal for k in child):
                    out.append(" (")
                    visit(child)
                    out.append(")")
                else:
                    out.append(" " + char_rule + "+")
            if children:
                out.append(' | [^"' + "".join(children) + "] " + char_rule + "*")

        visit(root)
        out.append(" )")
        if terminal not in root:
            out.append("?")
        out.append(' ["]')
        return "".join(out)

    def _object_rule(self, properties: list[tuple[str, SchemaNode]], required: set[str], name: str,
                     additional: SchemaNode | None) -> str:
        prefix = name + ("-" if name else "")
        required_props: list[str] = []
        optional_props: list[str] = []
        kv_rules: dict[str, str] = {}
        prop_names: list[str] = []
        for prop_name, prop_schema in properties:
            prop_rule = self.visit(prop_schema, prefix + prop_name)
            kv_rules[prop_name] = self.add_rule(
                prefix + prop_name + "-kv", format_literal(dump_string(prop_name)) + ' space ":" space ' + prop_rule)
            (required_props if prop_name in required else optional_props).append(prop_name)
            prop_names.append(prop_name)
        if additional is not None:
            sub_name = prefix + "additional"
            value_rule = (self.visit(additional, sub_name + "-value") if not isinstance(additional, AnySchema)
                          else self._add_primitive("value", PRIMITIVE_RULES["value"]))
            key_rule = (self._add_primitive("string", PRIMITIVE_RULES["string"]) if not prop_names
                        else self.add_rule(sub_name + "-k", self._not_strings(prop_names)))
            kv_rules["*"] = self.add_rule(sub_name + "-kv", key_rule + ' ":" space ' + value_rule)
            optional_props.append("*")

        if not required_props and not optional_props:
            return '"{" space "}"'

        rule = '"{" space ' + ' "," space '.join(kv_rules[k] for k in required_props)
        if optional_props:
            rule += " ("
            if required_props:
                rule += ' "," space ( '

            def recursive_refs(ks: list[str], first_is_optional: bool) -> str:
                if not ks:
                    return ""
                k = ks[0]
                kv_rule = kv_rules[k]
                comma_ref = '( "," space ' + kv_rule + " )"
                if first_is_optional:
                    res = comma_ref + ("*" if k == "*" else "?")
                else:
                    res = kv_rule + (" " + comma_ref + "*" if k == "*" else "")
                if len(ks) > 1:
                    res += " " + self.add_rule(prefix + k + "-rest", recursive_refs(ks[1:], True))
                return res

            rule += " | ".join(recursive_refs(optional_props[i:], False) for i in range(len(optional_props)))
            if required_props:
                rule += " )"
            rule += " )?"
        return rule + ' space "}"'

    # -- output --------------------------------------------------------------------------------

    def check_errors(self) -> None:
        """Raise the collected errors; log the collected warnings."""
        if self._errors:
            message = "JSON schema conversion failed:\n" + "\n".join(m for m, _ in self._errors)
            paths = [p for _, p in self._errors if p]
            if paths:
                message += "\n(at " + ", ".join(paths) + ")"
            raise GrammarConversionError(message, {"path": paths[0] if paths else "#", "paths": paths})
        if self._warnings:
            logger.warning("JSON schema conversion was incomplete: %s", "; ".join(self._warnings))

    def format_grammar(self) -> str:
        """Every rule as ``name ::= body\\n``, sorted by name (bytewise, as std::map)."""
        text = "".join(f"{k} ::= {self._rules[k]}\n" for k in sorted(self._rules, key=_utf8_key))
        if _STRAY_BYTE.search(text):
            # a quantifier after a multi-byte character left stray bytes: upstream's answer carries
            # them as U+FFFD replacements (its JSON output cannot hold invalid UTF-8)
            text = text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
        return text
