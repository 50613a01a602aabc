// Guided sampling: a sampler chain with a grammar and a reasoning budget kept beside it, sampled
// the way llama-server samples (upstream's common/sampling.cpp: common_sampler_sample with
// grammar_first = false, common_sampler_accept).
//
// The grammar is not in the chain. Each token is chosen by the chain from the raw logits, then
// checked against the grammar alone; only when the grammar rejects it are the logits rebuilt, the
// grammar applied to every candidate and the chain run again. A model that already follows the
// grammar (most tokens of a tool call, all of a thought) pays one single-token grammar check per
// token instead of a grammar pass over the whole vocabulary. With a greedy-only chain the first
// choice is the argmax of the logits, without building the candidate array at all, and a refused
// argmax is replaced by the best runner-up the grammar admits when one is among the next few
// (exactly what the grammar pass + greedy would select; see `sample`).
//
// The reasoning budget (reasoning_budget.cpp) is applied before the chain, so that while it forces
// the end of a thought only the forced token survives. A lazy grammar is not applied inside a
// thought (budget state COUNTING, FORCING or WAITING_UTF8), and when a thought ends the end
// sequence is replayed into the grammar, which may be what triggers it.
//
// Preserved tokens (the template's special tokens that carry tool calls or thoughts) are rendered
// as their text, whatever the caller asked for other special tokens (the server's
// accept_special_token).

#include "reasoning_budget.h"
#include "shim_internal.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

using namespace llamact_shim;

namespace {

struct guide {
    llama_sampler * chain;    // owned
    llama_sampler * grammar;  // owned; may be null
    llama_sampler * budget;   // owned (a reasoning-budget sampler); may be null
    bool lazy;                // the grammar waits for a trigger
    bool greedy_only;         // the chain is exactly one greedy sampler
    bool grammar_first;       // upstream's other mode: the grammar over all candidates, every token
    int32_t n_vocab;
    std::vector<uint8_t> preserved;  // indexed by token id; empty when no token is preserved
    std::vector<llama_token_data> cur;
    std::vector<llama_token> best;   // greedy runners-up (see `sample`)
    int64_t stats[4];                // tokens sampled, first choices refused, runners-up taken, full passes

    ~guide() {  // llama_sampler_free ignores NULL
        llama_sampler_free(chain);
        llama_sampler_free(grammar);
        llama_sampler_free(budget);
    }
};

budget_state state_of(const guide * g) {
    return g->budget != nullptr ? reasoning_budget_state(g->budget) : BUDGET_IDLE;
}

// upstream's grammar_should_apply: a lazy grammar stays out of a thought
bool grammar_applies(const guide * g) {
    if (g->grammar == nullptr) {
        return false;
    }
    if (g->budget == nullptr || !g->lazy) {
        return true;
    }
    const budget_state s = state_of(g);
    return s == BUDGET_IDLE || s == BUDGET_DONE;
}

bool grammar_allows(const guide * g, llama_token token) {
    llama_token_data one = { token, 1.0f, 0.0f };
    llama_token_data_array single = { &one, 1, -1, false };
    llama_sampler_apply(g->grammar, &single);
    return one.logit != -INFINITY;
}

llama_token_data_array candidates(guide * g, const float * logits) {
    g->cur.resize(static_cast<size_t>(g->n_vocab));
    llama_token_data * data = g->cur.data();
    for (llama_token id = 0; id < g->n_vocab; ++id) {
        data[id] = llama_token_data{ id, logits[id], 0.0f };
    }
    return { data, g->cur.size(), -1, false };
}

// Run the chain over `cur` and return the selected candidate.
const llama_token_data & select(guide * g, llama_token_data_array & cur) {
    llama_sampler_apply(g->chain, &cur);
    if (cur.selected < 0 || cur.selected >= static_cast<int64_t>(cur.size)) {
        throw std::runtime_error(
            "the sampler chain selected no token: end it with a selecting sampler (Greedy, Dist, Mirostat)");
    }
    return cur.data[cur.selected];
}

// The `k` best candidates in greedy order (logit descending, then id ascending), into `out`;
// false when a NaN logit is met (upstream's greedy loop has its own order then).
bool best_by_logit(const float * logits, int32_t n, size_t k, std::vector<llama_token> & out) {
    out.clear();
    for (llama_token i = 0; i < n; ++i) {
        const float x = logits[i];
        if (x != x) {
            return false;
        }
        if (out.size() == k && !(x > logits[out.back()])) {
            continue;  // a tie keeps the earlier id
        }
        auto at = std::upper_bound(out.begin(), out.end(), x, [logits](float v, llama_token t) { return v > logits[t]; });
        out.insert(at, i);
        if (out.size() > k) {
            out.pop_back();
        }
    }
    return true;
}

constexpr size_t RUNNERS_UP = 16;

// The next token (not accepted yet), as common_sampler_sample chooses it.
//
// One addition for a greedy chain, with the same result: when the grammar refuses the argmax, the
// grammar pass + greedy would select the first candidate in greedy order that the grammar admits
// (the grammar judges each candidate on its own), so the best few are tried one by one before the
// whole vocabulary is filtered.
llama_token sample(guide * g, llama_context * ctx, int32_t idx) {
    const float * logits = llama_get_logits_ith(ctx, idx);
    if (logits == nullptr) {
        throw std::runtime_error("no logits to sample from: decode a batch that requests them first");
    }
    const bool apply_grammar = grammar_applies(g);
    const bool forcing = state_of(g) == BUDGET_FORCING;
    ++g->stats[0];
    llama_token id;
    if (g->greedy_only && !forcing && !(g->grammar_first && apply_grammar)) {
        id = first_argmax(logits, g->n_vocab);  // what the chain would select, without the array
    } else {
        llama_token_data_array cur = candidates(g, logits);
        if (g->budget != nullptr) {
            llama_sampler_apply(g->budget, &cur);
        }
        if (g->grammar_first && apply_grammar) {
            ++g->stats[3];
            llama_sampler_apply(g->grammar, &cur);
        }
        id = select(g, cur).id;
        if (g->grammar_first) {
            return id;
        }
    }
    if (!apply_grammar || grammar_allows(g, id)) {
        return id;
    }
    ++g->stats[1];
    if (g->greedy_only && !forcing && best_by_logit(logits, g->n_vocab, RUNNERS_UP, g->best)) {
        for (size_t i = 1; i < g->best.size(); ++i) {  // best[0] is the refused argmax
            const llama_token t = g->best[i];
            if (logits[t] != -INFINITY && grammar_allows(g, t)) {
                ++g->stats[2];
                return t;
            }
        }
    }
    // rejected: the grammar over every candidate, then the chain again (its state moves again, as upstream's)
    ++g->stats[3];
    llama_token_data_array cur = candidates(g, logits);
    if (g->budget != nullptr) {
        llama_sampler_apply(g->budget, &cur);
    }
    llama_sampler_apply(g->grammar, &cur);
    const llama_token_data & chosen = select(g, cur);
    if (chosen.logit == -INFINITY) {
        throw std::runtime_error("the grammar admits no token at this point of the output");
    }
    return chosen.id;
}

// common_sampler_accept. Returns false, changing nothing, when the grammar does not admit `token`
// here (llama.cpp would throw, or abort the process for an end-of-generation token).
bool accept(guide * g, llama_token token) {
    const bool accept_grammar = grammar_applies(g);
    if (accept_grammar && !grammar_allows(g, token)) {
        return false;
    }
    if (g->budget != nullptr) {
        llama_sampler_accept(g->budget, token);
        // a thought just ended while the lazy grammar looked away: the grammar reads its end tag
        // (which may be what triggers it)
        if (g->grammar != nullptr && !accept_grammar && state_of(g) == BUDGET_DONE) {
            if (const std::vector<llama_token> * end = reasoning_budget_end_match(g->budget)) {
                for (const llama_token t : *end) {
                    if (!grammar_allows(g, t)) {
                        throw std::runtime_error("the grammar does not admit the end of the thought");
                    }
                    llama_sampler_accept(g->grammar, t);
                }
            }
        }
    }
    if (accept_grammar) {
        llama_sampler_accept(g->grammar, token);
    }
    llama_sampler_accept(g->chain, token);
    return true;
}

guide * as_guide(void * p) {
    return static_cast<guide *>(p);
}

}  // namespace

// A guide over `chain` (required), `grammar` and `budget` (each may be NULL; `budget` must come
// from llamact_reasoning_budget_init). On success the guide owns all three (llamact_guide_free
// frees them); on failure (NULL, `err` set) it owns none. `preserved` lists the token ids rendered
// as text; `n_vocab` is the vocabulary size of the model the samplers were made for.
LLAMACT_SHIM_API void * llamact_guide_init(llama_sampler * chain, llama_sampler * grammar, int32_t grammar_lazy,
                                          llama_sampler * budget, const llama_token * preserved,
                                          int32_t n_preserved, int32_t n_vocab, int32_t greedy_only,
                                          int32_t grammar_first, char * err, size_t err_size) {
    if (chain == nullptr || n_vocab <= 0 || (budget != nullptr && !is_reasoning_budget(budget))) {
        report(err, err_size, "a guide needs a sampler chain, a vocabulary size, and a reasoning-budget sampler or none");
        return nullptr;
    }
    guide * g = nullptr;
    try {
        g = new guide{ nullptr, nullptr, nullptr, grammar_lazy != 0, greedy_only != 0, grammar_first != 0, n_vocab,
                       {}, {}, {}, { 0, 0, 0, 0 } };
        if (n_preserved > 0) {
            g->preserved.assign(static_cast<size_t>(n_vocab), 0);
            for (int32_t i = 0; i < n_preserved; ++i) {
                if (preserved[i] < 0 || preserved[i] >= n_vocab) {
                    throw std::invalid_argument("a preserved token id is outside the vocabulary");
                }
                g->preserved[static_cast<size_t>(preserved[i])] = 1;
            }
        }
        g->cur.reserve(static_cast<size_t>(n_vocab));
    } catch (const std::exception & e) {
        delete g;  // its samplers are still NULL: the caller keeps them
        report(err, err_size, e.what());
        return nullptr;
    }
    g->chain = chain;
    g->grammar = grammar;
    g->budget = budget;
    return g;
}

LLAMACT_SHIM_API void llamact_guide_free(void * g) {
    delete as_guide(g);
}

// Feed the generation prompt's tokens, as common_sampler_init does: to the grammar when
// `into_grammar` (a non-lazy grammar whose text starts with that prompt), then to the budget
// (which may see the thought open there). Returns 0, or -1 with `err` set (the guide's grammar
// state is then undefined).
LLAMACT_SHIM_API int32_t llamact_guide_prefill(void * p, const llama_token * tokens, int32_t n, int32_t into_grammar,
                                              char * err, size_t err_size) {
    LLAMACT_GUARD(err, err_size, -1,
        guide * g = as_guide(p);
        if (into_grammar != 0 && g->grammar != nullptr) {
            for (int32_t i = 0; i < n; ++i) {
                llama_sampler_accept(g->grammar, tokens[i]);
            }
        }
        if (g->budget != nullptr) {
            for (int32_t i = 0; i < n; ++i) {
                llama_sampler_accept(g->budget, tokens[i]);
            }
        }
        return 0;)
}

// Sample the next token from output `idx` of `ctx` and accept it. Returns the token, or
// LLAMA_TOKEN_NULL with `err` set.
LLAMACT_SHIM_API llama_token llamact_guide_sample(void * p, llama_context * ctx, int32_t idx, char * err,
                                                  size_t err_size) {
    LLAMACT_GUARD(err, err_size, LLAMA_TOKEN_NULL,
        guide * g = as_guide(p);
        const llama_token token = sample(g, ctx, idx);
        if (!accept(g, token)) {
            throw std::runtime_error("the sampled token is not admitted by the grammar");
        }
        return token;)
}

// Record `token` as generated. Returns 0; 1 when the grammar does not admit it here (nothing
// changed); -1 with `err` set when llama.cpp threw (the guide's state is then undefined).
LLAMACT_SHIM_API int32_t llamact_guide_accept(void * p, llama_token token, char * err, size_t err_size) {
    LLAMACT_GUARD(err, err_size, -1, return accept(as_guide(p), token) ? 0 : 1;)
}

// The reasoning budget's state (budget_state), or -1 when the guide has no budget.
LLAMACT_SHIM_API int32_t llamact_guide_budget_state(void * p) {
    const guide * g = as_guide(p);
    return g->budget != nullptr ? reasoning_budget_state(g->budget) : -1;
}

// End the thought now (server's reasoning control): 1 when the budget was counting and now forces
// the end sequence, 0 otherwise.
LLAMACT_SHIM_API int32_t llamact_guide_force_budget(void * p) {
    const guide * g = as_guide(p);
    return g->budget != nullptr && reasoning_budget_force(g->budget) ? 1 : 0;
}

// Counters since creation, into out[4]: tokens sampled; first choices the grammar refused; of those,
// how many a greedy runner-up replaced; and full grammar passes over the vocabulary.
LLAMACT_SHIM_API void llamact_guide_stats(void * p, int64_t * out) {
    const guide * g = as_guide(p);
    std::copy(g->stats, g->stats + 4, out);
}

// Whether `token` is rendered as text (preserved), whatever the render_special setting.
LLAMACT_SHIM_API int32_t llamact_guide_preserved(void * p, llama_token token) {
    const guide * g = as_guide(p);
    return !g->preserved.empty() && token >= 0 && token < g->n_vocab && g->preserved[static_cast<size_t>(token)] ? 1 : 0;
}

// llamact_step (llamact_shim.cpp) with a guide in place of a plain chain: decode `prev` (unless
// LLAMA_TOKEN_NULL), sample and accept the next token as above, say whether it ends generation,
// and write its piece (special tokens as text when `render_special`, preserved tokens always).
// Same returns and out-parameters as llamact_step, except that an end-of-generation token's piece
// is written as well (empty unless the token is rendered as text).
LLAMACT_SHIM_API llama_token llamact_guided_step(llama_context * ctx, void * p, const llama_vocab * vocab,
                                                 void * abort_flag, llama_token prev, int32_t render_special,
                                                 char * piece, int32_t piece_cap, int32_t * piece_len,
                                                 int32_t * is_eog, int32_t * decode_rc, char * err,
                                                 size_t err_size) {
    try {
        *decode_rc = 0;
        if (prev != LLAMA_TOKEN_NULL) {
            const int32_t rc = decode_with_abort(ctx, llama_batch_get_one(&prev, 1), abort_flag);
            if (rc != 0) {
                *decode_rc = rc;
                return LLAMA_TOKEN_NULL;
            }
        } else if (take_abort(abort_flag)) {
            *decode_rc = 2;
            return LLAMA_TOKEN_NULL;
        }
        guide * g = as_guide(p);
        const llama_token token = sample(g, ctx, -1);
        if (!accept(g, token)) {
            throw std::runtime_error("the sampled token is not admitted by the grammar");
        }
        *is_eog = llama_vocab_is_eog(vocab, token) ? 1 : 0;
        const bool special = render_special != 0 || (!g->preserved.empty() && g->preserved[static_cast<size_t>(token)]);
        // an end-of-generation token has its piece too (llama-server appends it to the text: a
        // preserved end token such as <|eom_id|> is part of what the parser reads)
        *piece_len = llama_token_to_piece(vocab, token, piece, piece_cap, 0, special);
        return token;
    } catch (const std::exception & e) {
        report(err, err_size, e.what());
    } catch (...) {
        report(err, err_size, nullptr);
    }
    return LLAMA_TOKEN_NULL;
}

// Speculative verification (src/shim/speculative.cpp): sample outputs `first`, `first + 1`, ... of
// `ctx` with the guide, accepting each token as llama-server's common_sampler_sample_and_accept_n
// does, while they equal `draft`: the first token that differs from its draft token (or the one
// after the whole draft, or an end-of-generation token) is the last. Writes the tokens to `out`
// (room for n_draft + 1) and returns how many; -1 with `err` set when llama.cpp threw (the guide's
// state is then undefined).
LLAMACT_SHIM_API int32_t llamact_guide_sample_run(void * p, llama_context * ctx, const llama_vocab * vocab,
                                                  int32_t first, const llama_token * draft, int32_t n_draft,
                                                  llama_token * out, char * err, size_t err_size) {
    LLAMACT_GUARD(err, err_size, -1,
        guide * g = as_guide(p);
        for (int32_t i = 0; i <= n_draft; ++i) {
            const llama_token token = sample(g, ctx, first + i);
            if (!accept(g, token)) {
                throw std::runtime_error("the sampled token is not admitted by the grammar");
            }
            out[i] = token;
            if (i == n_draft || token != draft[i] || llama_vocab_is_eog(vocab, token)) {
                return i + 1;
            }
        }
        return n_draft + 1;)
}
