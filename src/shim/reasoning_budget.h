// Internal to libllamact-shim: the reasoning-budget sampler, as the guided sampling step uses it.
// The C ABI (llamact_reasoning_budget_*) is in reasoning_budget.cpp.
#pragma once

#include "llama.h"

#include <cstdint>
#include <vector>

namespace llamact_shim {

// The states, numbered as upstream's common_reasoning_budget_state (common/reasoning-budget.h).
enum budget_state : int32_t {
    BUDGET_IDLE         = 0,  // waiting for a start sequence
    BUDGET_COUNTING     = 1,  // inside the thought, counting its tokens
    BUDGET_FORCING      = 2,  // the budget ran out: forcing the end sequence, one token at a time
    BUDGET_WAITING_UTF8 = 3,  // the budget ran out inside a UTF-8 character: let it complete first
    BUDGET_DONE         = 4,  // the thought ended; a new start sequence opens a new budget
};

bool is_reasoning_budget(const llama_sampler * smpl);

// Only for a sampler for which is_reasoning_budget() holds.
budget_state reasoning_budget_state(const llama_sampler * smpl);

// The end sequence whose last token moved the sampler to DONE (naturally, or as the tail of the
// forced sequence); nullptr when none did since the thought opened.
const std::vector<llama_token> * reasoning_budget_end_match(const llama_sampler * smpl);

// COUNTING -> FORCING (the thought is ended now, as when the budget runs out); false in any other
// state, which is left untouched.
bool reasoning_budget_force(llama_sampler * smpl);

}  // namespace llamact_shim
