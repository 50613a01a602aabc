"""``llama_batch``: the tokens of one decode, for one sequence or several (see ``Context.decode``)."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any, Protocol, SupportsIndex

from ..errors import LlamaInferenceException
from ._handle import NativeHandle

__all__ = ["Batch"]


class _ForContext(Protocol):
    """What a batch needs of the ``Context`` it is made for: the library the context was loaded with
    (a protocol, so this module need not import context.py, which imports it)."""

    _lib: Any


class Batch(NativeHandle):
    """A reusable ``llama_batch`` of up to ``capacity`` tokens for one sequence or several."""

    _kind = "batch"

    def __init__(self, context: _ForContext, capacity: int, n_seq_max: int = 1) -> None:
        if capacity < 1:
            raise LlamaInferenceException("batch capacity must be at least 1", {"capacity": capacity})
        lib = context._lib
        struct = lib.llama_batch_init(capacity, 0, n_seq_max)
        if not struct.token:
            raise LlamaInferenceException("could not allocate a batch", {"capacity": capacity})
        self.struct = struct
        # llama_batch_free takes the struct by value: free from the struct, not from self (a
        # closure over self would be a reference cycle, freeing the batch only at a cyclic collection).
        super().__init__(1, lambda _p: lib.llama_batch_free(struct))
        self.capacity = capacity
        self.n_seq_max = n_seq_max

    @property
    def n_tokens(self) -> int:
        with self.pinned():
            return int(self.struct.n_tokens)

    def clear(self) -> None:
        with self.pinned():
            self.struct.n_tokens = 0

    def add(self, token: int, pos: int, seq_ids: Sequence[int] = (0,), logits: bool = False) -> None:
        """Append one token (llama.cpp checks its id against the vocabulary when it decodes the batch)."""
        token = _integer(token, "token id")
        pos = _integer(pos, "position")
        seqs = [_integer(seq, "sequence id") for seq in seq_ids]
        with self.pinned():
            i = self.struct.n_tokens
            if i >= self.capacity:
                raise LlamaInferenceException(f"batch is full ({self.capacity} tokens)", {"capacity": self.capacity})
            if not 1 <= len(seqs) <= self.n_seq_max:
                raise LlamaInferenceException(f"a token belongs to 1..{self.n_seq_max} sequences")
            s = self.struct
            s.token[i] = token
            s.pos[i] = pos
            s.n_seq_id[i] = len(seqs)
            for j, seq in enumerate(seqs):
                s.seq_id[i][j] = seq
            s.logits[i] = bool(logits)
            s.n_tokens = i + 1

    def set_sequence(self, tokens: Sequence[int], start_pos: int, seq_id: int = 0, logits_last: bool = True) -> None:
        """Fill with consecutive tokens of one sequence; only the last one outputs logits by default."""
        ids = [_integer(tok, "token id") for tok in tokens]   # checked before the batch is emptied
        if len(ids) > self.capacity:
            raise LlamaInferenceException(f"{len(ids)} tokens exceed the batch capacity {self.capacity}")
        self.clear()
        self.extend(ids, start_pos, seq_id, logits_last)

    def extend(self, tokens: Sequence[int], start_pos: int, seq_id: int = 0, logits_last: bool = False,
               logits_all: bool = False) -> int:
        """Append consecutive tokens of one sequence (only the last one outputs logits, when
        ``logits_last``; every one with ``logits_all``); returns the batch index of the last token
        appended."""
        ids = [_integer(tok, "token id") for tok in tokens]
        start_pos, seq_id = _integer(start_pos, "position"), _integer(seq_id, "sequence id")
        with self.pinned():
            s = self.struct
            first = s.n_tokens
            end = first + len(ids)
            if end > self.capacity:
                raise LlamaInferenceException(f"{end} tokens exceed the batch capacity {self.capacity}",
                                              {"capacity": self.capacity})
            for i, tok in enumerate(ids, first):
                s.token[i] = tok
                s.pos[i] = start_pos + i - first
                s.n_seq_id[i] = 1
                s.seq_id[i][0] = seq_id
                s.logits[i] = int(logits_all)
            if ids and logits_last:
                s.logits[end - 1] = 1
            s.n_tokens = end
        return end - 1


def _integer(value: object, what: str) -> int:
    """An int32 for a batch field: not a bool, a float or a string (ctypes would raise TypeError,
    or wrap around silently for an int out of range)."""
    if type(value) is int and -(2**31) <= value < 2**31:   # the per-token case: isinstance on a Protocol costs ~5 µs
        return value
    if isinstance(value, bool) or not isinstance(value, SupportsIndex):
        raise LlamaInferenceException(f"a {what} must be an integer, got {value!r}", {what: repr(value)})
    number = operator.index(value)
    if not -(2**31) <= number < 2**31:
        raise LlamaInferenceException(f"a {what} must fit 32 bits, got {number}", {what: number})
    return number

