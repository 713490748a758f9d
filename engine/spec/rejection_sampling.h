// Speculative sampling's verification rule (Leviathan et al. 2023; Chen et
// al. 2023): a token x drafted from the drafter's distribution q is kept
// with probability min(1, p(x) / q(x)) under the target's distribution p;
// when it is not, the replacement is drawn from max(0, p - q), normalised.
// Whatever q is, the token that comes out is distributed exactly as p, so
// speculation changes speed, never the output's distribution. With greedy
// sampling p is one token, and the rule keeps x exactly when it is the
// target's argmax.
#pragma once

#include "engine/sampling/sampler.h"

#include <cstdint>

namespace kvscope::spec {

struct DraftCheck {
    bool accepted = false;
    std::int32_t token = -1; // the draft when accepted, else its replacement
};

// `q` empty: the draft was certain (prompt lookup: q(x) = 1). `accept_u` and
// `replace_u` are independent draws in [0, 1).
DraftCheck check_draft(const sampling::Distribution& p, const sampling::Distribution& q,
                       std::int32_t drafted, double accept_u, double replace_u);

} // namespace kvscope::spec
