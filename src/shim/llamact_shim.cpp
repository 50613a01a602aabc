// llamact's C-ABI shim over the few llama.h entry points that can throw C++ exceptions.
//
// llama.h is a C API, but some calls run C++ that throws (std::regex_error for a bad lazy-grammar
// trigger pattern, std::runtime_error when a grammar cannot accept a token). An exception that
// reaches a ctypes frame cannot unwind it and ends the process in std::terminate. Each wrapper
// here catches everything at the boundary and reports the message through an error buffer, so
// Python raises a LlamaException instead. No behaviour is added: success paths call straight through,
// except that decoding honours llamact's atomic abort flag (below).

#include "ggml.h"
#include "gguf.h"
#include "llama.h"
#include "shim_internal.h"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>

using llamact_shim::first_argmax;
using llamact_shim::report;

// Returns the sampled token, or LLAMA_TOKEN_NULL with `err` set.
LLAMACT_SHIM_API llama_token llamact_sampler_sample(struct llama_sampler * smpl, struct llama_context * ctx,
                                                    int32_t idx, char * err, size_t err_size) {
    LLAMACT_GUARD(err, err_size, LLAMA_TOKEN_NULL, return llama_sampler_sample(smpl, ctx, idx);)
}

// Returns 0, or -1 with `err` set.
LLAMACT_SHIM_API int32_t llamact_sampler_accept(struct llama_sampler * smpl, llama_token token, char * err,
                                                size_t err_size) {
    LLAMACT_GUARD(err, err_size, -1, llama_sampler_accept(smpl, token); return 0;)
}

// Returns the sampler, or NULL (with `err` set when an exception was the cause; a grammar that
// does not parse returns NULL from llama.cpp itself and leaves `err` empty).
LLAMACT_SHIM_API struct llama_sampler * llamact_sampler_init_grammar(const struct llama_vocab * vocab,
                                                                   const char * grammar_str,
                                                                   const char * grammar_root, char * err,
                                                                   size_t err_size) {
    LLAMACT_GUARD(err, err_size, nullptr, return llama_sampler_init_grammar(vocab, grammar_str, grammar_root);)
}

LLAMACT_SHIM_API struct llama_sampler * llamact_sampler_init_grammar_lazy_patterns(
    const struct llama_vocab * vocab, const char * grammar_str, const char * grammar_root,
    const char ** trigger_patterns, size_t num_trigger_patterns, const llama_token * trigger_tokens,
    size_t num_trigger_tokens, char * err, size_t err_size) {
    LLAMACT_GUARD(err, err_size, nullptr,
                  return llama_sampler_init_grammar_lazy_patterns(vocab, grammar_str, grammar_root, trigger_patterns,
                                                                  num_trigger_patterns, trigger_tokens,
                                                                  num_trigger_tokens);)
}

// ------------------------------------------------------------------------------------------------
// A check of a GGUF file that llama.cpp does not make before loading it.
//
// Norm weights and biases enter elementwise operations (ggml_mul, ggml_add) with the F32
// activations, and ggml's CPU kernels have no F32 x F16 (or quantized) form of those: a file whose
// norm or bias tensor has another type loads, then aborts the process at the first decode
// (binary_op: unsupported types). Upstream's converter always writes 1-D tensors and norms as F32
// ("most of the codebase that takes in 1D tensors or norms only handles F32"), and
// llama-quantize never quantizes 1-D tensors, so such a type means a damaged file.
//
// Returns 1 with `err` set when the file has such a tensor; 0 otherwise, also when gguf cannot
// read the file at all (llama.cpp's own load then says why).

namespace {

bool ends_with(const char * text, const char * suffix) {
    const size_t n = std::strlen(text);
    const size_t m = std::strlen(suffix);
    return n >= m && std::memcmp(text + n - m, suffix, m) == 0;
}

}  // namespace

LLAMACT_SHIM_API int32_t llamact_gguf_tensor_problem(const char * path, char * err, size_t err_size) {
    try {
        gguf_init_params params = { /* no_alloc = */ true, /* ctx = */ nullptr };
        gguf_context * gguf = gguf_init_from_file(path, params);
        if (gguf == nullptr) {
            return 0;
        }
        int32_t found = 0;
        for (int64_t i = 0; i < gguf_get_n_tensors(gguf) && found == 0; ++i) {
            const char *          name = gguf_get_tensor_name(gguf, i);
            const int64_t *       ne   = gguf_get_tensor_ne(gguf, i);
            const enum ggml_type  type = gguf_get_tensor_type(gguf, i);
            const bool one_dim = ne[1] == 1 && ne[2] == 1 && ne[3] == 1;
            const bool elementwise = ends_with(name, "norm.weight") || ends_with(name, ".bias");
            if (one_dim && elementwise && type != GGML_TYPE_F32) {
                const char * type_name = ggml_type_name(type);
                std::snprintf(err, err_size,
                              "tensor '%s' is a norm weight or bias stored as %s; llama.cpp computes those only "
                              "in f32 (a GGUF writer never stores them otherwise)",
                              name, type_name != nullptr ? type_name : "an unknown type");
                found = 1;
            }
        }
        gguf_free(gguf);
        return found;
    } catch (...) {
        return 0;  // llama.cpp's own load reads the same header and reports the problem
    }
}

// ------------------------------------------------------------------------------------------------
// The abort flag (its contract is in shim_internal.h): the calls Python makes on it.

using llamact_shim::as_flag;
using llamact_shim::abort_flag_t;
using llamact_shim::take_abort;

// Construct the flag (clear) in `flag`: 4 bytes, 4-aligned, owned by the caller.
LLAMACT_SHIM_API void llamact_abort_init(void * flag) {
    new (flag) abort_flag_t(0);
}

LLAMACT_SHIM_API void llamact_abort_request(void * flag) {
    as_flag(flag)->store(1, std::memory_order_release);
}

// Forget a pending request; returns whether there was one.
LLAMACT_SHIM_API int32_t llamact_abort_clear(void * flag) {
    return take_abort(flag) ? 1 : 0;
}

// llama.cpp's abort callback, called by ggml after every graph node (hundreds of times a token):
// a Python callback would take the GIL each time. A relaxed load is a plain load on every target.
LLAMACT_SHIM_API bool llamact_abort_flag(void * data) {
    return data != nullptr && as_flag(data)->load(std::memory_order_relaxed) != 0;
}

using llamact_shim::decode_with_abort;

// Returns llama_decode's code (2 = aborted through `abort_flag`, which may be NULL), or INT32_MIN
// with `err` set.
LLAMACT_SHIM_API int32_t llamact_decode(struct llama_context * ctx, struct llama_batch batch, void * abort_flag,
                                        char * err, size_t err_size) {
    LLAMACT_GUARD(err, err_size, INT32_MIN, return decode_with_abort(ctx, batch, abort_flag);)
}

// ------------------------------------------------------------------------------------------------
// The per-token path, kept out of Python.

// One generation step: decode `prev` (unless it is LLAMA_TOKEN_NULL: the prompt was just decoded),
// then choose the next token, say whether it ends generation, and write its text piece. One call
// per token keeps Python's per-token work to a minimum.
//
// `greedy_only` (the chain is exactly one greedy sampler) takes the argmax of the logits directly,
// the first maximum as upstream's greedy sampler does, and lets the chain accept it: the same token
// without building the full candidates array.
//
// `abort_flag` (may be NULL) is checked first, also when there is nothing to decode: a request
// pending since the last step ends generation before any work, and is consumed.
//
// Returns the token; or LLAMA_TOKEN_NULL with `*decode_rc` = llama_decode's non-zero code (1 = no
// room in the context, 2 = aborted), or with `err` set when an exception was caught.
// `*piece_len` < 0 means the piece needs -len bytes.
LLAMACT_SHIM_API llama_token llamact_step(struct llama_context * ctx, struct llama_sampler * chain,
                                          const struct llama_vocab * vocab, void * abort_flag, llama_token prev,
                                          int32_t greedy_only, int32_t render_special, char * piece,
                                          int32_t piece_cap, int32_t * piece_len, int32_t * is_eog,
                                          int32_t * decode_rc, char * err, size_t err_size) {
    try {
        *decode_rc = 0;
        if (prev != LLAMA_TOKEN_NULL) {
            const int32_t rc = decode_with_abort(ctx, llama_batch_get_one(&prev, 1), abort_flag);
            if (rc != 0) {
                *decode_rc = rc;
                return LLAMA_TOKEN_NULL;
            }
        } else if (take_abort(abort_flag)) {  // nothing to decode: a pending request still ends it
            *decode_rc = 2;
            return LLAMA_TOKEN_NULL;
        }
        llama_token token = LLAMA_TOKEN_NULL;
        if (greedy_only) {
            const float * logits = llama_get_logits_ith(ctx, -1);
            if (logits == nullptr) {
                report(err, err_size, "no logits to sample from: decode a batch first");
                return LLAMA_TOKEN_NULL;
            }
            token = first_argmax(logits, llama_vocab_n_tokens(vocab));
            llama_sampler_accept(chain, token);
        } else {
            token = llama_sampler_sample(chain, ctx, -1);
        }
        *is_eog = llama_vocab_is_eog(vocab, token) ? 1 : 0;
        *piece_len = *is_eog ? 0 : llama_token_to_piece(vocab, token, piece, piece_cap, 0, render_special != 0);
        return token;
    } catch (const std::exception & e) {
        report(err, err_size, e.what());
    } catch (...) {
        report(err, err_size, nullptr);
    }
    return LLAMA_TOKEN_NULL;
}
