"""The rows of ``llamact serve``'s one settings table, and the command line made from them.

    port: int = option(8080, "--port", help="...", scope=SERVER)          # a row of ServerSettings
    add_flags(parser, ServerSettings); flags = flag_values(args, ServerSettings)

Each ``ServerSettings`` field is declared with ``option()``: its type, default and bounds (pydantic's
``Field``), its flags (llama-server's spellings), its help, its scope and where it goes. From that one
declaration come the flag (``add_flags``), the ``LLAMACT_<FIELD>`` variable and the config-file key
``<field>`` (pydantic-settings reads both by the field's name), and, for a row with ``model=`` or
``sampling=``, the ``ModelParams`` field it sets or the ``GenerationParams`` default a request gets.

Scopes: a ``MODEL`` row may differ per model in router mode (a preset section, a config file's
``models`` entry); a ``SERVER`` row is the process's (the network edge, the limits, the router).

Lists (``--api-key``, ``--rpc``, ``--device``, ``--lora``, ...) take comma-separated values and may be
repeated; their variable takes the same text (``LLAMACT_API_KEY=a,b``) and a config file a JSON list.
What enters: argparse's namespace; what leaves: a dict of the given values (None left out) for
``settings.load_settings``; nothing raises here (pydantic validates the values).
"""

from __future__ import annotations

import argparse
import json
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field
from pydantic.fields import FieldInfo

__all__ = ["MODEL", "SERVER", "Row", "add_flags", "flag_values", "option", "row_of", "rows", "split_list"]

MODEL, SERVER = "model", "server"


@dataclass(frozen=True)
class Row:
    """What the table says of a setting beyond its type and default."""

    flags: tuple[str, ...]                 # "-ngl", "--n-gpu-layers": the first long one names it in errors
    help: str
    scope: str = MODEL
    model: str | None = None               # the ModelParams field it sets as is
    convert: Callable[[Any], Any] | None = None   # the value ModelParams gets (default: the setting's)
    sampling: str | None = None            # the GenerationParams field whose default it sets (None: unset)
    negative: tuple[str, ...] = ()         # flags that set a boolean False ("--no-slots")
    metavar: str | None = None

    @property
    def long_flag(self) -> str:
        return next((f for f in self.flags if f.startswith("--")), self.flags[0])


def option(default: Any, *flags: str, help: str, scope: str = MODEL, model: str | None = None,
           convert: Callable[[Any], Any] | None = None, sampling: str | None = None, negative: tuple[str, ...] = (),
           metavar: str | None = None, **bounds: Any) -> Any:
    """A ``ServerSettings`` field that is a row of the table (``bounds``: pydantic's ``ge``, ``le``, ...)."""
    row = Row(flags, help, scope, model, convert, sampling, negative, metavar)
    return Field(default, json_schema_extra={"llamact": row}, **bounds)   # type: ignore[dict-item]


def row_of(info: FieldInfo) -> Row | None:
    extra = info.json_schema_extra
    row = extra.get("llamact") if isinstance(extra, dict) else None
    return row if isinstance(row, Row) else None


def rows(settings_cls: Any) -> dict[str, Row]:
    """Every field of ``settings_cls`` that is a row, by field name, in declaration order."""
    out = {}
    for name, info in settings_cls.model_fields.items():
        row = row_of(info)
        if row is not None:
            out[name] = row
    return out


def _kind(annotation: Any) -> tuple[str, tuple[str, ...]]:
    """("bool" | "list" | "value", choices) of a field's annotation (``X | None`` read as X)."""
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        annotation = inner[0] if len(inner) == 1 else annotation
        args = typing.get_args(annotation)
    origin = typing.get_origin(annotation)
    if annotation is bool:
        return "bool", ()
    if origin in (tuple, list) or (origin is typing.Annotated and typing.get_origin(args[0]) in (tuple, list)):
        return "list", ()
    if origin is Literal:
        return "value", tuple(str(a) for a in args)
    return "value", ()


def add_flags(parser: argparse.ArgumentParser, settings_cls: Any) -> None:
    """One argparse option per row (its ``dest`` the field's name, its default None: not given)."""
    for name, info in settings_cls.model_fields.items():
        row = row_of(info)
        if row is None:
            continue
        kind, choices = _kind(info.annotation)
        shown = "" if info.default in (None, (), {}) or "(default" in row.help else f" (default {info.default})"
        if kind == "bool":
            parser.add_argument(*row.flags, dest=name, action="store_true", default=None, help=row.help + shown)
            if row.negative:
                parser.add_argument(*row.negative, dest=name, action="store_false", default=None,
                                    help=f"the opposite of {row.long_flag}")
        elif kind == "list":
            parser.add_argument(*row.flags, dest=name, action="append", default=None, metavar=row.metavar,
                                help=row.help + " (comma-separated, or repeated)")
        else:
            parser.add_argument(*row.flags, dest=name, default=None, metavar=row.metavar,
                                choices=choices or None, help=row.help + shown)


def flag_values(args: argparse.Namespace, settings_cls: Any) -> dict[str, Any]:
    """The rows' values given on the command line (lists joined over repeats, commas split)."""
    out: dict[str, Any] = {}
    for name in rows(settings_cls):
        value = getattr(args, name, None)
        if value is None:
            continue
        out[name] = [item for part in value for item in split_list(part)] if isinstance(value, list) else value
    return out


def split_list(value: Any) -> list[Any]:
    """A list setting from any source: a list as it is, a text split at commas (a JSON list in a
    variable read as one)."""
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                loaded = json.loads(text)
            except ValueError:
                loaded = None
            if isinstance(loaded, list):
                return loaded
        return [part.strip() for part in text.split(",") if part.strip()]
    return [value]
