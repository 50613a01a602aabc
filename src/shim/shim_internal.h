// Internal to libllamact-shim: what its source files share (never part of the C ABI Python binds).
#pragma once

#include "llama.h"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <exception>

#if defined(_WIN32)
#    define LLAMACT_SHIM_API extern "C" __declspec(dllexport)
#else
#    define LLAMACT_SHIM_API extern "C" __attribute__((visibility("default")))
#endif

// Run the statements; a C++ exception is reported through (err, err_size) and the function
// returns fail_value instead of letting it reach the ctypes frame.
#define LLAMACT_GUARD(err, err_size, fail_value, ...)          \
    try {                                                      \
        __VA_ARGS__                                            \
    } catch (const std::exception & e) {                       \
        llamact_shim::report(err, err_size, e.what());         \
    } catch (...) {                                            \
        llamact_shim::report(err, err_size, nullptr);          \
    }                                                          \
    return fail_value;

namespace llamact_shim {

inline void report(char * err, size_t err_size, const char * what) {
    if (err != nullptr && err_size > 0) {
        std::snprintf(err, err_size, "%s", what != nullptr ? what : "unknown C++ exception");
    }
}

// The index of the first maximum, as upstream's greedy sampler picks it (`>` keeps the earliest;
// a NaN never wins unless it is at index 0). Eight independent running maxima let the CPU overlap
// the comparisons, then a scan finds the first index holding that maximum; any NaN in the way
// falls back to upstream's exact loop.
inline llama_token first_argmax(const float * logits, int32_t n) {
    if (n <= 0) {
        return 0;
    }
    constexpr int32_t lanes = 8;
    if (n >= lanes) {
        float best[lanes];
        for (int32_t k = 0; k < lanes; ++k) {
            best[k] = logits[k];
        }
        int32_t i = lanes;
        for (; i + lanes <= n; i += lanes) {
            for (int32_t k = 0; k < lanes; ++k) {
                best[k] = logits[i + k] > best[k] ? logits[i + k] : best[k];
            }
        }
        for (; i < n; ++i) {
            best[0] = logits[i] > best[0] ? logits[i] : best[0];
        }
        float m = best[0];
        bool nan_seen = m != m;
        for (int32_t k = 1; k < lanes; ++k) {
            nan_seen = nan_seen || best[k] != best[k];
            m = best[k] > m ? best[k] : m;
        }
        if (!nan_seen) {
            for (int32_t j = 0; j < n; ++j) {
                if (logits[j] == m) {
                    return j;
                }
            }
        }
    }
    llama_token token = 0;
    for (int32_t i = 1; i < n; ++i) {
        if (logits[i] > logits[token]) {
            token = i;
        }
    }
    return token;
}

// The abort flag: a std::atomic<int32_t> that lives in 4 bytes the caller allocates (Python owns
// the memory, so a cancel from another thread can never write to freed memory) and that is only
// ever touched through the shim. Non-zero = abort requested. A request is consumed by the decode
// it aborts: one issued before a decode starts aborts that decode, before any work.

using abort_flag_t = std::atomic<int32_t>;
static_assert(sizeof(abort_flag_t) == sizeof(int32_t) && alignof(abort_flag_t) <= alignof(int32_t),
              "the abort flag must fit the int32 the caller allocates");

inline abort_flag_t * as_flag(void * data) {
    return static_cast<abort_flag_t *>(data);
}

// Consume a pending request: true if one was there.
inline bool take_abort(void * flag) {
    if (flag == nullptr) {
        return false;
    }
    abort_flag_t * f = as_flag(flag);  // a plain load first: the per-token check stays free of locked instructions
    return f->load(std::memory_order_relaxed) != 0 && f->exchange(0, std::memory_order_acq_rel) != 0;
}

// llama_decode that honours and consumes the abort flag: 2 (aborted) without decoding when a
// request is already pending, and a request that aborted the decode is consumed.
inline int32_t decode_with_abort(llama_context * ctx, llama_batch batch, void * flag) {
    if (take_abort(flag)) {
        return 2;
    }
    const int32_t rc = llama_decode(ctx, batch);
    if (rc == 2) {
        take_abort(flag);
    }
    return rc;
}

}  // namespace llamact_shim
