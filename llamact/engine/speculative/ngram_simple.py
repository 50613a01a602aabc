"""``ngram-simple``: upstream's ``common_ngram_simple_draft`` (common/ngram-map.cpp).

The last ``size_n`` tokens (the history's last ``size_n - 1`` and the pending token) are looked up in
the history, latest occurrence first (the current one left out); the ``size_m`` tokens that followed
it are the draft, when at least ``size_n`` of them exist. Stateless.
"""

from __future__ import annotations

from .history import TokenHistory

__all__ = ["ngram_simple_draft"]


def ngram_simple_draft(history: TokenHistory, sampled: int, size_n: int, size_m: int) -> list[int]:
    """The draft after ``history`` + ``sampled`` (empty when there is no match)."""
    cur_len = len(history)
    if cur_len <= size_n + size_m + 1:
        return []
    ids = history.ids
    pattern = [*ids[cur_len - size_n + 1:cur_len], sampled]
    # upstream scans j = cur_len - n - 1 down to 1: a window at j ends by j + n <= cur_len - 1
    match = history.rfind(pattern, 1, cur_len - 1)
    if match <= 0:
        return []
    copy_max = min(size_m, cur_len - (match + size_n))
    if copy_max < size_n:
        return []
    return ids[match + size_n:match + size_n + copy_max]
