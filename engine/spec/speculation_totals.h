// What speculative decoding came to over a run: tokens drafted, kept by
// verification, and the verifying passes. The run summary adds them up from
// the requests' accounting, kvscope stats from a recording's draft_verified
// events; both derive the rates here.
#pragma once

#include <cstdint>

namespace kvscope::spec {

struct SpeculationTotals {
    std::int64_t drafted = 0;
    std::int64_t accepted = 0;
    std::int64_t verifies = 0;        // a sequence's draft checked in one pass
    std::int64_t blocks_released = 0; // by rollbacks (recordings only)

    // Of the drafted tokens, the share verification kept.
    double acceptance_rate() const {
        return drafted > 0 ? static_cast<double>(accepted) / static_cast<double>(drafted) : 0.0;
    }
    // Tokens a sequence gained per verifying pass: the kept draft plus the
    // target's own token (plain decoding gains 1). A pass that ends its
    // request on a kept draft token adds no token of its own; counted as if
    // it did, which overstates by at most one token per request.
    double tokens_per_verify() const {
        return verifies > 0
                   ? static_cast<double>(accepted + verifies) / static_cast<double>(verifies)
                   : 0.0;
    }
    void add(std::int64_t drafted_tokens, std::int64_t accepted_tokens, std::int64_t passes) {
        drafted += drafted_tokens;
        accepted += accepted_tokens;
        verifies += passes;
    }
};

} // namespace kvscope::spec
