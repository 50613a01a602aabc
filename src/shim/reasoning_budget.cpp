// The reasoning budget: a llama_sampler that limits how many tokens a thought may take.
//
// Written from reading upstream's common/reasoning-budget.cpp (the semantics llama-server has);
// llamact's shim links only libllama, so this is its own implementation of that behaviour:
//
//   IDLE --start sequence--> COUNTING --budget used up--> FORCING --forced sequence done--> DONE
//                               |   \--budget used up inside a UTF-8 character--> WAITING_UTF8 --> FORCING
//                               \--an end sequence--> DONE --start sequence--> COUNTING (a new budget)
//
// accept() moves the state; apply() changes logits only while FORCING: every candidate but the
// next forced token gets -inf. The tokens that open and close the thought are token sequences
// (a tag may take several tokens); a sequence is recognised when it ends at the token just
// accepted, the longest one winning where several end there, and matching starts afresh after
// each recognised sequence (upstream's Aho-Corasick matcher has exactly this behaviour; with the
// few short tags here, comparing the recent tokens against each sequence is as fast and simpler).

#include "reasoning_budget.h"

#include "shim_internal.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

namespace llamact_shim {
namespace {

// Distinct, non-empty token sequences, recognised when one ends at the latest token.
struct sequence_matcher {
    std::vector<std::vector<llama_token>> seqs;
    std::vector<llama_token> recent;  // tokens since the last match or reset, at most `longest`
    size_t longest = 0;

    explicit sequence_matcher(const std::vector<std::vector<llama_token>> & given) {
        for (const auto & seq : given) {
            if (!seq.empty() && std::find(seqs.begin(), seqs.end(), seq) == seqs.end()) {
                seqs.push_back(seq);
                longest = std::max(longest, seq.size());
            }
        }
        recent.reserve(longest);
    }

    // The index in `seqs` of the longest sequence ending at `token`, or -1.
    int32_t advance(llama_token token) {
        if (longest == 0) {
            return -1;
        }
        if (recent.size() == longest) {
            recent.erase(recent.begin());
        }
        recent.push_back(token);
        int32_t best = -1;
        size_t best_len = 0;
        for (size_t i = 0; i < seqs.size(); ++i) {
            const auto & seq = seqs[i];
            if (seq.size() > best_len && seq.size() <= recent.size() &&
                std::equal(seq.rbegin(), seq.rend(), recent.rbegin())) {
                best = static_cast<int32_t>(i);
                best_len = seq.size();
            }
        }
        if (best >= 0) {
            recent.clear();
        }
        return best;
    }

    void reset() { recent.clear(); }
};

// Whether `piece` ends on a complete UTF-8 character (upstream's common_utf8_is_complete): the
// last lead byte within the final four bytes must have all its continuation bytes.
bool utf8_complete(const char * piece, size_t n) {
    if (n == 0) {
        return true;
    }
    for (size_t back = 1; back <= std::min<size_t>(4, n); ++back) {
        const auto c = static_cast<unsigned char>(piece[n - back]);
        if ((c & 0xC0) != 0x80) {
            const size_t needed = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
            return back >= needed;
        }
    }
    return false;
}

struct budget_ctx {
    const llama_vocab * vocab;  // for the UTF-8 check; nullptr treats every token as complete
    sequence_matcher start;
    sequence_matcher end;
    std::vector<llama_token> forced;
    int32_t budget;
    int32_t remaining;
    budget_state state;
    size_t force_pos;
    int32_t end_match;  // index into end.seqs, -1 when none
};

bool token_ends_a_character(const budget_ctx * b, llama_token token) {
    if (b->vocab == nullptr) {
        return true;
    }
    char small[64];
    int32_t n = llama_token_to_piece(b->vocab, token, small, sizeof(small), 0, false);
    if (n >= 0) {
        return utf8_complete(small, static_cast<size_t>(n));
    }
    std::string big(static_cast<size_t>(-n), '\0');
    n = llama_token_to_piece(b->vocab, token, big.data(), -n, 0, false);
    return utf8_complete(big.data(), n > 0 ? static_cast<size_t>(n) : 0);
}

void open_thought(budget_ctx * b) {
    b->state = BUDGET_COUNTING;
    b->remaining = b->budget;
    if (b->remaining <= 0) {
        b->state = BUDGET_FORCING;
        b->force_pos = 0;
    }
}

void start_forcing(budget_ctx * b) {
    b->state = BUDGET_FORCING;
    b->force_pos = 0;
    b->end.reset();
}

void budget_accept(llama_sampler * smpl, llama_token token) {
    auto * b = static_cast<budget_ctx *>(smpl->ctx);
    switch (b->state) {
        case BUDGET_IDLE:
            if (b->start.advance(token) >= 0) {
                open_thought(b);
            }
            break;
        case BUDGET_COUNTING:
        case BUDGET_WAITING_UTF8: {
            const int32_t match = b->end.advance(token);
            if (match >= 0) {
                b->state = BUDGET_DONE;
                b->end_match = match;
                break;
            }
            const bool complete = token_ends_a_character(b, token);
            if (b->state == BUDGET_WAITING_UTF8) {
                if (complete) {
                    start_forcing(b);
                }
            } else if (--b->remaining <= 0) {
                if (complete) {
                    start_forcing(b);
                } else {
                    b->state = BUDGET_WAITING_UTF8;
                    b->end.reset();
                }
            }
            break;
        }
        case BUDGET_FORCING: {
            // the end sequence is tracked through the forced tokens, so that DONE reports it
            const int32_t match = b->end.advance(token);
            if (++b->force_pos >= b->forced.size()) {
                b->state = BUDGET_DONE;
                b->end_match = match;
            }
            break;
        }
        case BUDGET_DONE:
            // a model may think more than once in a reply: each new thought gets the whole budget
            if (b->start.advance(token) >= 0) {
                b->end.reset();
                b->end_match = -1;
                open_thought(b);
            }
            break;
    }
}

void budget_apply(llama_sampler * smpl, llama_token_data_array * cur_p) {
    const auto * b = static_cast<const budget_ctx *>(smpl->ctx);
    if (b->state != BUDGET_FORCING || b->force_pos >= b->forced.size()) {
        return;
    }
    const llama_token forced = b->forced[b->force_pos];
    for (size_t i = 0; i < cur_p->size; ++i) {
        if (cur_p->data[i].id != forced) {
            cur_p->data[i].logit = -INFINITY;
        }
    }
}

void budget_reset(llama_sampler * smpl) {
    auto * b = static_cast<budget_ctx *>(smpl->ctx);
    b->state = BUDGET_IDLE;
    b->remaining = b->budget;
    b->start.reset();
    b->end.reset();
    b->force_pos = 0;
    b->end_match = -1;
}

const char * budget_name(const llama_sampler *) {
    return "llamact-reasoning-budget";
}

llama_sampler * budget_clone(const llama_sampler * smpl);

void budget_free(llama_sampler * smpl) {
    delete static_cast<budget_ctx *>(smpl->ctx);
}

llama_sampler_i budget_iface = {
    /* .name              = */ budget_name,
    /* .accept            = */ budget_accept,
    /* .apply             = */ budget_apply,
    /* .reset             = */ budget_reset,
    /* .clone             = */ budget_clone,
    /* .free              = */ budget_free,
    /* .backend_init      = */ nullptr,
    /* .backend_accept    = */ nullptr,
    /* .backend_apply     = */ nullptr,
    /* .backend_set_input = */ nullptr,
    /* .backend_reset     = */ nullptr,
    /* .copy_state        = */ nullptr,
};

llama_sampler * budget_clone(const llama_sampler * smpl) {
    return llama_sampler_init(&budget_iface, new budget_ctx(*static_cast<const budget_ctx *>(smpl->ctx)));
}

std::vector<std::vector<llama_token>> unflatten(const llama_token * tokens, const int32_t * lens, int32_t n) {
    std::vector<std::vector<llama_token>> seqs;
    size_t at = 0;
    for (int32_t i = 0; i < n; ++i) {
        seqs.emplace_back(tokens + at, tokens + at + lens[i]);
        at += static_cast<size_t>(lens[i]);
    }
    return seqs;
}

}  // namespace

bool is_reasoning_budget(const llama_sampler * smpl) {
    return smpl != nullptr && smpl->iface == &budget_iface;
}

budget_state reasoning_budget_state(const llama_sampler * smpl) {
    return static_cast<const budget_ctx *>(smpl->ctx)->state;
}

const std::vector<llama_token> * reasoning_budget_end_match(const llama_sampler * smpl) {
    const auto * b = static_cast<const budget_ctx *>(smpl->ctx);
    return b->end_match >= 0 ? &b->end.seqs[static_cast<size_t>(b->end_match)] : nullptr;
}

bool reasoning_budget_force(llama_sampler * smpl) {
    auto * b = static_cast<budget_ctx *>(smpl->ctx);
    if (b->state != BUDGET_COUNTING) {
        return false;
    }
    start_forcing(b);
    return true;
}

}  // namespace llamact_shim

using namespace llamact_shim;

// A reasoning-budget sampler. Start and end sequences come flattened: `*_tokens` holds them one
// after another, `*_lens[i]` is the length of sequence i. `vocab` (may be NULL: every token then
// counts as a whole character) is used to let a UTF-8 character complete before forcing.
// `initial_state` is one of the budget_state values (COUNTING with a budget <= 0 starts FORCING).
// Returns the sampler (free it with llama_sampler_free), or NULL with `err` set.
LLAMACT_SHIM_API llama_sampler * llamact_reasoning_budget_init(
    const llama_vocab * vocab, const llama_token * start_tokens, const int32_t * start_lens, int32_t n_start,
    const llama_token * end_tokens, const int32_t * end_lens, int32_t n_end, const llama_token * forced,
    int32_t n_forced, int32_t budget, int32_t initial_state, char * err, size_t err_size) {
    LLAMACT_GUARD(err, err_size, nullptr,
        if (initial_state < BUDGET_IDLE || initial_state > BUDGET_DONE) {
            report(err, err_size, "unknown reasoning-budget state");
            return nullptr;
        }
        auto state = static_cast<budget_state>(initial_state);
        if (state == BUDGET_COUNTING && budget <= 0) {
            state = BUDGET_FORCING;
        }
        auto * ctx = new budget_ctx{
            vocab,
            sequence_matcher(unflatten(start_tokens, start_lens, n_start)),
            sequence_matcher(unflatten(end_tokens, end_lens, n_end)),
            std::vector<llama_token>(forced, forced + n_forced),
            budget, budget, state, 0, -1,
        };
        return llama_sampler_init(&budget_iface, ctx);)
}

// The sampler's state (a budget_state value), or -1 when `smpl` is not a reasoning-budget sampler.
LLAMACT_SHIM_API int32_t llamact_reasoning_budget_state(const llama_sampler * smpl) {
    return is_reasoning_budget(smpl) ? reasoning_budget_state(smpl) : -1;
}

// The end sequence that closed the thought (see reasoning_budget_end_match): its length, with up
// to `cap` tokens written to `out`; -1 when there is none (or `smpl` is not a budget sampler).
LLAMACT_SHIM_API int32_t llamact_reasoning_budget_end_match(const llama_sampler * smpl, llama_token * out,
                                                            int32_t cap) {
    const std::vector<llama_token> * seq = is_reasoning_budget(smpl) ? reasoning_budget_end_match(smpl) : nullptr;
    if (seq == nullptr) {
        return -1;
    }
    const auto n = static_cast<int32_t>(seq->size());
    std::copy_n(seq->begin(), std::min(n, std::max(cap, 0)), out);
    return n;
}

// COUNTING -> FORCING: 1 when it happened, 0 otherwise (any other state is left as it is).
LLAMACT_SHIM_API int32_t llamact_reasoning_budget_force(llama_sampler * smpl) {
    return is_reasoning_budget(smpl) && reasoning_budget_force(smpl) ? 1 : 0;
}
