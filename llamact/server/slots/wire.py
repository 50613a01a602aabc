"""The slots family's wire format: ``GET /slots``' answer, and the names ``POST /slots/{id}`` takes,
checked as llama-server checks them.

    slots_json(tasks, states, n_ctx_slot)  each slot in llama-server's shape (``server_slot::to_json``)
    valid_filename(name) -> bool           common.cpp's fs_validate_filename (no subdirectories)
    slot_path(directory, name) -> Path     the file in --slot-save-path; ValueError for any other place
                                           or for a special file there
    parse_slot_id(text, n_slots)           the slot a path's id names (std::stoi, then the modulo), or None

``GET /slots``: a slot that never ran a request has only ``id``, ``n_ctx``, ``speculative`` and
``is_processing``; one that did also has its last task (``id_task``, ``params``, ``next_token``,
...: ``models.slot_tasks``). llama-server resets a slot's counters when the request leaves, so an
idle slot reports 0 processed / cached and no next token; ``n_prompt_tokens`` is what its KV cache
holds.

A file name is one path component of at most 255 bytes of valid, shortest-form UTF-8 without control
characters, separators, ``: * ? " < > |``, look-alikes of ``.`` ``/`` ``\\``, surrogates, U+FFFD or
a BOM; not ``.``, nothing holding ``..``, no leading or trailing space, no trailing dot. So a hostile
name never reaches the file system outside the save directory; ``slot_path`` checks again after
resolving, in case the directory holds a symbolic link of that name.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..models.slot_tasks import SlotTasks
from ..wire.request import slot_of

__all__ = ["parse_slot_id", "slot_path", "slots_json", "valid_filename"]

_FORBIDDEN = frozenset(':*?"<>|/\\')
_STOI = re.compile(r"[ \t\n\v\f\r]*([+-]?[0-9]+)")   # std::stoi: leading space, a sign, digits, then anything
INT_MAX = 2**31 - 1


def valid_filename(name: str) -> bool:
    """fs_validate_filename(name, allow_subdirs=false) at the pin."""
    try:
        raw = name.encode("utf-8")   # a lone surrogate cannot be UTF-8: refused
    except UnicodeEncodeError:
        return False
    if not raw or len(raw) > 255:
        return False
    for ch in name:
        c = ord(ch)
        if (c <= 0x1F or c == 0x7F or 0x80 <= c <= 0x9F or c in (0xFF0E, 0x2215, 0x2216, 0xFFFD, 0xFEFF)
                or 0xD800 <= c <= 0xDFFF or ch in _FORBIDDEN):
            return False
    if name[0] == " " or name[-1] in " .":
        return False
    return ".." not in name and name != "."


def slot_path(directory: Path, name: str) -> Path:
    """``directory / name`` for a valid name; ValueError when it would lie anywhere else, or when
    something other than a regular file is there (a FIFO blocks whoever opens it: restoring one froze
    the server, and llama-server's main loop, for as long as no writer came)."""
    if not valid_filename(name):
        raise ValueError("Invalid filename")
    base = directory.resolve()
    path = base / name
    if path.resolve().parent != base:
        raise ValueError("Invalid filename")
    if path.exists() and not path.is_file():
        raise ValueError(f"Invalid filename: {name} is not a regular file (a FIFO, a device or a directory)")
    return path


def parse_slot_id(text: str, n_slots: int) -> tuple[int, int] | None:
    """(the id as given, the slot it names) or None where llama-server answers "Invalid slot ID".
    ``std::stoi`` reads a leading integer and ignores the rest ("1abc" is 1); the slot is the id
    modulo the number of slots, taken as an unsigned size (so -1 names the last slot of an even
    count), as ``get_slot_by_id`` does."""
    match = _STOI.match(text)
    if match is None:
        return None
    given = int(match.group(1))
    if not -INT_MAX - 1 <= given <= INT_MAX:
        return None
    return given, slot_of(given, n_slots)


def slots_json(tasks: SlotTasks, states: Sequence[tuple[bool, int]], n_ctx_slot: int) -> list[dict[str, Any]]:
    """``GET /slots``' answer: ``states`` holds (is_processing, tokens in its KV cache) per slot."""
    out = []
    for slot_id, (processing, n_cached) in enumerate(states):
        entry: dict[str, Any] = {"id": slot_id, "n_ctx": n_ctx_slot, "speculative": tasks.speculative_types != "none",
                       "is_processing": processing}
        record = tasks.last(slot_id)
        if record is not None:
            # a running request's counts as they stand (server_slot::to_json); llama-server resets
            # them when it leaves
            n_decoded, n_evaluated, n_reused = record.progress() if processing else (0, 0, 0)
            n_predict = record.params.get("n_predict", -1)
            n_remain = n_predict - n_decoded if processing and isinstance(n_predict, int) and n_predict >= 0 else -1
            entry.update({
                "id_task": record.id_task, "n_prompt_tokens": n_cached,
                "n_prompt_tokens_processed": n_evaluated, "n_prompt_tokens_cache": n_reused,
                "params": record.params,
                "next_token": [{"has_next_token": processing, "has_new_line": False,
                                "n_remain": n_remain, "n_decoded": n_decoded}],
            })
        out.append(entry)
    return out
