"""Python text -> the bytes native code takes, refusing what would be silently wrong there.

A C string ends at its first NUL: text holding one would reach llama.cpp cut short, with no error.
A lone surrogate (``"\\ud800"``, e.g. from ``bytes.decode(errors="surrogateescape")``) is not
Unicode and has no UTF-8 form. Both raise a typed LlamaException naming the value and the place.
"""

from __future__ import annotations

from ..errors import LlamaArgumentException, LlamaException


def utf8(text: str, what: str, error: type[LlamaException] = LlamaArgumentException) -> bytes:
    """``text`` as UTF-8, for a length-delimited buffer; ``what`` names it in the error."""
    if not isinstance(text, str):
        raise error(f"{what} must be a string, got {type(text).__name__}", {"what": what})
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise error(
            f"{what} cannot be passed to llama.cpp: it holds {text[exc.start:exc.end]!r} at position "
            f"{exc.start}, a lone surrogate that is not Unicode text (decode input bytes with "
            "errors='replace')",
            {"what": what, "position": exc.start},
        ) from exc


def c_string(text: str, what: str, error: type[LlamaException] = LlamaArgumentException) -> bytes:
    """``text`` as a NUL-terminated UTF-8 C string; ``what`` names it in the error."""
    raw = utf8(text, what, error)
    at = raw.find(b"\0")
    if at != -1:
        raise error(
            f"{what} holds a NUL character (at byte {at}); llama.cpp reads it as a C string, which "
            "would end there: remove the NUL",
            {"what": what, "position": at},
        )
    return raw
