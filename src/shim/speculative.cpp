// Speculative decoding's native steps: one verification of a draft (decode the pending token and
// the draft in one batch, then let the target sample every position while it equals the draft),
// and the draft model's greedy pick. Python chooses the drafts (llamact/engine/speculative); these
// keep the per-position work in C, as llamact_step does for one token.

#include "shim_internal.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <vector>

using llamact_shim::decode_with_abort;
using llamact_shim::first_argmax;
using llamact_shim::report;
using llamact_shim::take_abort;

extern "C" int32_t llamact_guide_sample_run(void * p, llama_context * ctx, const llama_vocab * vocab, int32_t first,
                                            const llama_token * draft, int32_t n_draft, llama_token * out, char * err,
                                            size_t err_size);

namespace {

// llamact_guide_sample_run for a plain chain (its grammar, if any, is a chain member): each output
// sampled and accepted in turn, the greedy chain by the first argmax as llamact_step takes it.
int32_t chain_run(llama_sampler * chain, int32_t greedy_only, llama_context * ctx, const llama_vocab * vocab,
                  int32_t first, const llama_token * draft, int32_t n_draft, llama_token * out) {
    const int32_t n_vocab = llama_vocab_n_tokens(vocab);
    for (int32_t i = 0; i <= n_draft; ++i) {
        llama_token token;
        if (greedy_only) {
            const float * logits = llama_get_logits_ith(ctx, first + i);
            if (logits == nullptr) {
                throw std::runtime_error("no logits to sample from at a verified position");
            }
            token = first_argmax(logits, n_vocab);
            llama_sampler_accept(chain, token);
        } else {
            token = llama_sampler_sample(chain, ctx, first + i);
        }
        out[i] = token;
        if (i == n_draft || token != draft[i] || llama_vocab_is_eog(vocab, token)) {
            return i + 1;
        }
    }
    return n_draft + 1;
}

}  // namespace

// Sample outputs `first`.. of `ctx` with a plain chain while they equal `draft` (see
// llamact_guide_sample_run). Returns how many tokens `out` holds, or -1 with `err` set.
LLAMACT_SHIM_API int32_t llamact_chain_sample_run(llama_sampler * chain, int32_t greedy_only, llama_context * ctx,
                                                  const llama_vocab * vocab, int32_t first, const llama_token * draft,
                                                  int32_t n_draft, llama_token * out, char * err, size_t err_size) {
    LLAMACT_GUARD(err, err_size, -1, return chain_run(chain, greedy_only, ctx, vocab, first, draft, n_draft, out);)
}

// One verification step of sequence `seq_id`: decode `tokens` (the pending token, then the draft:
// n_tokens >= 1) at the positions after what the sequence holds, every one with its logits; sample
// and accept position by position while the target's token equals the draft's next one
// (`guided`: `sampler` is a guide, else a plain chain, `greedy_only` as for llamact_step); then
// drop the rejected draft tokens from the memory. The tokens chosen go to `out` (room for
// n_tokens): all but the last equal the draft; the last is the target's own. Returns their count;
// 0 with `*decode_rc` = llama_decode's code (1: no room, 2: aborted through `abort_flag`) when the
// batch was not decoded; -1 with `err` set when an exception was caught.
LLAMACT_SHIM_API int32_t llamact_spec_verify(llama_context * ctx, void * sampler, int32_t guided, int32_t greedy_only,
                                             const llama_vocab * vocab, void * abort_flag, int32_t seq_id,
                                             const llama_token * tokens, int32_t n_tokens, llama_token * out,
                                             int32_t * decode_rc, char * err, size_t err_size) {
    try {
        *decode_rc = 0;
        if (n_tokens < 1) {
            report(err, err_size, "a verification needs the pending token");
            return -1;
        }
        llama_memory_t mem = llama_get_memory(ctx);
        const llama_pos pos0 = llama_memory_seq_pos_max(mem, seq_id) + 1;
        std::vector<llama_token> token(tokens, tokens + n_tokens);
        std::vector<llama_pos> pos(static_cast<size_t>(n_tokens));
        std::vector<int32_t> n_seq(static_cast<size_t>(n_tokens), 1);
        std::vector<llama_seq_id> seq(static_cast<size_t>(n_tokens), seq_id);
        std::vector<llama_seq_id *> seq_ptr(static_cast<size_t>(n_tokens));
        std::vector<int8_t> logits(static_cast<size_t>(n_tokens), 1);
        for (int32_t i = 0; i < n_tokens; ++i) {
            pos[static_cast<size_t>(i)] = pos0 + i;
            seq_ptr[static_cast<size_t>(i)] = &seq[static_cast<size_t>(i)];
        }
        llama_batch batch = { n_tokens, token.data(), nullptr, pos.data(), n_seq.data(), seq_ptr.data(), logits.data() };
        const int32_t rc = decode_with_abort(ctx, batch, abort_flag);
        if (rc != 0) {
            *decode_rc = rc;
            return 0;
        }
        const int32_t n = guided
            ? llamact_guide_sample_run(sampler, ctx, vocab, 0, tokens + 1, n_tokens - 1, out, err, err_size)
            : chain_run(static_cast<llama_sampler *>(sampler), greedy_only, ctx, vocab, 0, tokens + 1, n_tokens - 1,
                        out);
        if (n < 0) {
            return -1;
        }
        // the pending token and the n - 1 accepted draft tokens stay; the rest of the batch goes
        llama_memory_seq_rm(mem, seq_id, pos0 + n, -1);
        return n;
    } catch (const std::exception & e) {
        report(err, err_size, e.what());
    } catch (...) {
        report(err, err_size, nullptr);
    }
    return -1;
}

// The draft model's pick at output `idx`: the most likely token (the first maximum) and, in `*p`,
// its probability among the `k` most likely (the softmax of their logits), as upstream's
// draft-simple reads it from a top-k sampler (common/speculative.cpp). Returns LLAMA_TOKEN_NULL
// with `err` set when there are no logits.
LLAMACT_SHIM_API llama_token llamact_draft_pick(llama_context * ctx, int32_t idx, int32_t n_vocab, int32_t k,
                                                float * p, char * err, size_t err_size) {
    LLAMACT_GUARD(err, err_size, LLAMA_TOKEN_NULL,
        const float * logits = llama_get_logits_ith(ctx, idx);
        if (logits == nullptr) {
            report(err, err_size, "no logits for the draft's output");
            return LLAMA_TOKEN_NULL;
        }
        const llama_token best = first_argmax(logits, n_vocab);
        const int32_t kk = std::max(1, std::min(k, n_vocab));
        // the k largest logits in one pass: a small array kept in descending order
        std::vector<float> top;
        top.reserve(static_cast<size_t>(kk) + 1);
        for (int32_t i = 0; i < n_vocab; ++i) {
            const float x = logits[i];
            if (static_cast<int32_t>(top.size()) == kk && !(x > top.back())) {
                continue;
            }
            top.insert(std::upper_bound(top.begin(), top.end(), x, std::greater<float>()), x);
            if (static_cast<int32_t>(top.size()) > kk) {
                top.pop_back();
            }
        }
        const float m = logits[best];
        double sum = 0.0;
        for (const float x : top) {
            sum += std::exp(static_cast<double>(x - m));
        }
        *p = static_cast<float>(1.0 / sum);
        return best;)
}

// The first token id at or after `start` whose text differs between two vocabularies (upstream's
// draft compatibility check compares them all, common_speculative_are_compatible); -1 when the
// texts agree up to the shorter vocabulary's end.
LLAMACT_SHIM_API int32_t llamact_vocab_text_mismatch(const llama_vocab * a, const llama_vocab * b, int32_t start) {
    try {
        const int32_t n = std::min(llama_vocab_n_tokens(a), llama_vocab_n_tokens(b));
        for (int32_t i = std::max(0, start); i < n; ++i) {
            const char * ta = llama_vocab_get_text(a, i);
            const char * tb = llama_vocab_get_text(b, i);
            if (ta == nullptr || tb == nullptr || std::strcmp(ta, tb) != 0) {
                return i;
            }
        }
        return -1;
    } catch (...) {
        return start;
    }
}
