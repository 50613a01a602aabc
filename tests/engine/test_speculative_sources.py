"""The draft sources without a model: each fast version (bytes search, numpy, rolling hash) against a
line-by-line transcription of upstream's loops (common/ngram-map.cpp, common/ngram-mod.cpp) on random
histories; the settings' names and bounds as llama-server's; the grammar's forced text.

The drafts themselves are compared with llama-server at the pin in test_speculative_parity.py (the
same tokens and the same draft_n / draft_n_accepted); these pin the optimisations to the loops."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from llamact import LlamaModelException, LlamaUnsupportedException, ModelParams, SpeculativeParams
from llamact.engine.speculative.history import TokenHistory
from llamact.engine.speculative.ngram_map import LCG_FACTOR, NgramMap
from llamact.engine.speculative.ngram_mod import MULT, NgramMod
from llamact.engine.speculative.ngram_simple import ngram_simple_draft
from llamact.engine.speculative.params import speculative_params
from llamact.engine.speculative.setup import make_speculator
from llamact.engine.speculative.speculator import accepted_count
from llamact.grammar import GbnfAcceptor, parse_gbnf


def upstream_simple(tokens: list[int], sampled: int, n: int, m: int) -> list[int]:
    """common_ngram_simple_draft, loop for loop."""
    cur_len = len(tokens)
    if cur_len <= n + m + 1:
        return []
    pattern = tokens[cur_len - n + 1:] + [sampled]
    match_pos = 0
    for j in range(cur_len - n - 1, 0, -1):
        if all(tokens[j + k] == pattern[k] for k in range(len(pattern))):
            match_pos = j
            break
    if match_pos == 0:
        return []
    copy_max = min(m, cur_len - (match_pos + n))
    if copy_max < n:
        return []
    return [tokens[match_pos + n + j] for j in range(copy_max)]


def histories(seed: int, count: int, vocab: int = 6, length: int = 120) -> list[list[int]]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        motif = [rng.randrange(vocab) for _ in range(rng.randrange(3, 12))]
        tokens: list[int] = []
        while len(tokens) < length:   # repeats with noise: matches are found, and missed
            tokens += motif if rng.random() < 0.7 else [rng.randrange(vocab)]
        out.append(tokens[:length])
    return out


@pytest.mark.parametrize("n,m", [(2, 4), (3, 8), (12, 48)])
def test_ngram_simple_equals_upstreams_loop(n: int, m: int) -> None:
    drafted = 0
    for tokens in histories(1, 60):
        for cut in range(10, len(tokens), 7):
            history, sampled = TokenHistory(tokens[:cut]), tokens[cut]
            expected = upstream_simple(tokens[:cut], sampled, n, m)
            assert ngram_simple_draft(history, sampled, n, m) == expected
            drafted += bool(expected)
    assert drafted > 20 or n == 12   # the histories do make drafts


def test_history_search_keeps_to_token_boundaries() -> None:
    """A byte match that straddles two tokens is not a match (ids packed as int32)."""
    history = TokenHistory([0x01000000, 0x02, 5, 0x0100, 7])
    assert history.rfind([0x01000000, 0x02], 0, 5) == 0
    assert history.rfind([0x02, 5], 0, 5) == 1
    assert history.rfind([1 << 16], 0, 5) == -1     # its bytes occur inside other tokens only
    assert history.find_all([5], 0, 5) == [2]


class UpstreamMap:
    """common_ngram_map (begin / draft / accept), the hash map included, loop for loop."""

    def __init__(self, n: int, m: int, key_only: bool, min_hits: int) -> None:
        self.n, self.m, self.key_only, self.min_hits = n, m, key_only, min_hits
        self.keys: list[dict] = []
        self.size_last_begin = self.idx_last_check = self.key_map_last_idx = 0
        self.key_map = [0] * 262144
        self.last = None

    def hash(self, tokens: list[int], start: int) -> int:
        h = 0
        for i in range(self.n):
            h = (h * LCG_FACTOR + tokens[start + i]) % (1 << 32)
        return h % len(self.key_map)

    def begin(self, tokens: list[int]) -> None:
        size_begin, n, m = len(tokens), self.n, self.m
        cleanup = self.size_last_begin
        if cleanup > size_begin:
            cleanup = size_begin - n - m if size_begin > n + m else 0
        if size_begin < self.idx_last_check:
            for i, v in enumerate(self.key_map):
                if v != 0 and v >= cleanup:
                    self.key_map[i] = 0
            self.key_map_last_idx = cleanup - 1 if cleanup > 0 else 0
            for i in range(len(self.keys) - 1, -1, -1):
                key = self.keys[i]
                if key["idx"] >= cleanup:
                    del self.keys[i]
                    continue
                if self.key_only:
                    continue
                vals = key["values"]
                for j in range(3, -1, -1):
                    if vals[j][0] != 0 and vals[j][0] >= cleanup:
                        for k in range(j, 3):
                            vals[k] = list(vals[k + 1])
                        vals[3] = [0, 0, vals[3][2]]
                if vals[0][0] == 0:
                    del self.keys[i]
        self.idx_last_check = self.size_last_begin = size_begin

    def draft(self, inp: list[int], sampled: int) -> list[int]:
        self.last = None
        cur_len, n, m = len(inp), self.n, self.m
        if cur_len < 2 * n + m:
            return []
        self.idx_last_check = cur_len
        key = inp[cur_len - n + 1:] + [sampled]
        match_pos = 0
        idx_key = self.key_map[self.hash(key, 0)]
        if idx_key != 0 and idx_key < cur_len - n - m - 1 and inp[idx_key:idx_key + n] == key:
            match_pos = idx_key
        if match_pos == 0 and self.size_last_begin > n + m + 1:
            j = self.size_last_begin - n - m - 1
            while j > self.key_map_last_idx:
                if inp[j:j + n] == key:
                    match_pos = j
                    break
                j -= 1
        if match_pos == 0:
            j = cur_len - n - m - 1
            while j > self.size_last_begin and j > self.key_map_last_idx:
                if inp[j:j + n] == key:
                    match_pos = j
                    break
                j -= 1
        if self.size_last_begin > n + m + 1:
            j = self.size_last_begin - n - m - 1
            while j > self.key_map_last_idx:
                h = self.hash(inp, j)
                if self.key_map[h] == 0:
                    self.key_map[h] = j
                j -= 1
        j = cur_len - n - m - 1
        while j > self.size_last_begin and j > self.key_map_last_idx:
            h = self.hash(inp, j)
            if self.key_map[h] == 0:
                self.key_map[h] = j
            j -= 1
        self.key_map_last_idx = max(cur_len - n - m - 1, self.key_map_last_idx)
        if match_pos == 0:
            return []
        offset = next((i for i, k in enumerate(self.keys) if inp[k["idx"]:k["idx"] + n] == key), len(self.keys))
        if offset == len(self.keys):
            self.keys.append({"idx": match_pos, "stat": 0, "num": 0, "values": [[0, 0, m] for _ in range(4)]})
        cur = self.keys[offset]
        cur["num"] = min(cur["num"] + 1, 16380)
        if self.key_only:
            self.last = (offset, 0)
            return inp[match_pos + n:match_pos + n + min(m, cur["values"][0][2])]
        if cur["num"] < self.min_hits:
            return []
        vals = cur["values"]
        for i in range(cur["stat"], match_pos + 1):
            if inp[i:i + n] != key:
                continue
            found = -1
            for v in range(4):
                if vals[v][0] == 0:
                    vals[v] = [i + n, 0, m]
                    found = v
                    break
                if inp[i + n:i + n + m] == inp[vals[v][0]:vals[v][0] + m]:
                    found = v
                    break
            if found >= 0:
                vals[found][1] = min(vals[found][1] + 1, 16380)
        cur["stat"] = match_pos
        max_occur, slot = 0, 0
        for v in range(4):
            if vals[v][1] > max_occur:
                max_occur, slot = vals[v][1], v
        others = sum(vals[v][1] for v in range(4) if v != slot)
        if others > 0 and max_occur < 2 * others:
            return []
        self.last = (offset, slot)
        return inp[match_pos + n:match_pos + n + min(m, vals[slot][2])]

    def accept(self, n_accepted: int) -> None:
        if self.last is not None:
            self.keys[self.last[0]]["values"][self.last[1]][2] = n_accepted


@pytest.mark.parametrize("key_only", [True, False], ids=["map-k", "map-k4v"])
def test_ngram_map_equals_upstreams_loops(key_only: bool) -> None:
    """Two requests on one sequence (the second prompt shorter than the first history: the map is
    refreshed), drafts accepted in part: the same drafts at every step."""
    rng = random.Random(7)
    n, m = 3, 6
    for first, second in zip(histories(2, 6, length=160), histories(3, 6, length=90), strict=True):
        ours, ref = NgramMap(n, m, key_only, 2), UpstreamMap(n, m, key_only, 2)
        drafted = 0
        for tokens, prompt_len in ((first, 60), (second, 40)):
            ours.begin(TokenHistory(tokens[:prompt_len]))
            ref.begin(tokens[:prompt_len])
            cut = prompt_len
            while cut < len(tokens) - 1:
                history = TokenHistory(tokens[:cut])
                got, want = ours.draft(history, tokens[cut]), ref.draft(tokens[:cut], tokens[cut])
                assert got == want, (cut, got, want)
                accepted = rng.randrange(len(want) + 1)
                ours.accept(accepted)
                ref.accept(accepted)
                drafted += bool(want)
                cut += 1 + accepted
        assert drafted > 0


def test_ngram_mod_equals_upstreams_hash_table() -> None:
    """The vectorised table (last write wins, occupancy counted once per slot) and the rolling hash of a
    draft's walk against add / get one n-gram at a time."""
    n, size = 4, 4 * 1024 * 1024
    table: dict[int, int] = {}

    def slot(window: list[int]) -> int:
        h = 0
        for t in window:
            h = (h * MULT + t) % (1 << 64)
        return h % size

    def walk(window: list[int], n_min: int, n_max: int) -> list[int]:
        out: list[int] = []
        cur = list(window)
        for i in range(n_max):
            tok = table.get(slot(cur[i:i + n]), -1)
            if tok == -1:
                return [] if i < n_min else out
            out.append(tok)
            cur.append(tok)
        return out

    mod = NgramMod(n, 2, 8, 1)
    tokens = histories(4, 1, vocab=5, length=400)[0]
    prompt = tokens[:200]
    mod.begin(0, TokenHistory(prompt))
    for i in range(len(prompt) - n):
        table[slot(prompt[i:i + n])] = prompt[i + n]
    assert mod.table.used == len(table)
    assert all(mod.table.entries[k] == v for k, v in table.items())
    i_last = len(prompt) - n
    for cut in range(200, 390, 3):
        history = TokenHistory(tokens[:cut])
        if i_last + 32 < cut:
            for i in range(i_last, cut - n):
                table[slot(tokens[i:i + n])] = tokens[i + n]
            i_last = cut - n
        window = tokens[cut - n + 1:cut] + [tokens[cut]]
        assert mod.draft(0, history, tokens[cut]) == walk(window, 2, 8)
    assert mod.table.used == np.count_nonzero(mod.table.entries != -1)


def test_settings_take_llama_servers_names_and_bounds() -> None:
    assert SpeculativeParams.default().types == ("ngram-mod",)
    assert SpeculativeParams(types="ngram-simple,ngram-mod").types == ("ngram-simple", "ngram-mod")
    assert SpeculativeParams(types=("none", "ngram-mod")).types == ()   # upstream: none turns it off
    assert SpeculativeParams(types=("ngram-mod",)).types_name() == "none,ngram-mod"   # llama-server's report
    assert SpeculativeParams(draft_model="d.gguf").types == ("draft-simple",)
    with pytest.raises(LlamaModelException, match="unknown speculative type: ngram-bogus"):
        SpeculativeParams(types=("ngram-bogus",))
    with pytest.raises(LlamaModelException, match="draft-eagle3.*not supported"):
        SpeculativeParams(types=("draft-eagle3",))
    with pytest.raises(LlamaModelException, match="needs a draft model"):
        SpeculativeParams(types=("draft-simple",))
    with pytest.raises(LlamaModelException, match=r"ngram_simple_size_n must be an integer in \[1, 1024\]"):
        SpeculativeParams(types=("ngram-simple",), ngram_simple_size_n=0)
    with pytest.raises(LlamaModelException, match="draft_p_min"):
        SpeculativeParams(draft_model="d.gguf", draft_p_min=1.5)
    assert speculative_params({}) is None
    preset = speculative_params({"spec_default": True, "spec_ngram_mod_n_min": 8})
    assert preset is not None and (preset.ngram_mod_n_match, preset.ngram_mod_n_min, preset.ngram_mod_n_max) == (
        24, 8, 64)
    assert SpeculativeParams(types=("ngram-simple", "draft-simple"), draft_model="d.gguf", draft_n_max=5).n_max() == 48


def test_forced_text_follows_the_grammar_until_it_branches() -> None:
    grammar = parse_gbnf('root ::= "{" space "\\"name\\"" space ":" space ("\\"a\\"" | "\\"b\\"") "}"\n'
                         'space ::= | " " | "\\n"')
    acceptor = GbnfAcceptor(grammar)
    state = acceptor.initial_state()
    assert acceptor.forced_text(state, 100) == ("{", False)    # optional whitespace next: no guess asked
    assert acceptor.forced_text(state, 100, lambda prev: None) == ("{", False)   # or none given
    assert acceptor.forced_text(state, 100, lambda prev: "") == ('{"name":"', False)   # both values open with "
    assert acceptor.forced_text(state, 100, lambda prev: " " if prev == ":" else "") == ('{"name": "', False)
    assert acceptor.forced_text(state, 3, lambda prev: "") == ('{"n', False)
    after = acceptor.advance(state, '{"name": "b')
    assert acceptor.forced_text(after, 100, lambda prev: "") == ('"}', True)     # the grammar ends there
    assert acceptor.advance(state, "x") == ()


def test_an_end_token_equal_to_its_draft_token_is_accepted() -> None:
    """A run stops at an end token; when the draft had that token too, it counts as accepted (deviation
    15: llama-server samples on past it)."""
    assert accepted_count([5, 6, 7], [5, 6, 7, 9]) == 3     # the whole draft, then the target's own
    assert accepted_count([5, 6, 7], [5, 8]) == 1           # rejected at the second
    assert accepted_count([5, 2, 7], [5, 2]) == 2           # 2 ends generation and equals its draft token
    assert accepted_count([5, 2, 7], [5, 3]) == 1


def test_recurrent_models_are_refused() -> None:
    class Recurrent:
        keeps_recurrent_state = True
        path = Path("mamba.gguf")

    params = ModelParams(speculative=SpeculativeParams(types=("ngram-simple",)))
    with pytest.raises(LlamaUnsupportedException, match="recurrent or hybrid"):
        make_speculator(params, Recurrent(), None)  # type: ignore[arg-type]
