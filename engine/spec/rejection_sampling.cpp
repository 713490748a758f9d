#include "engine/spec/rejection_sampling.h"

#include <algorithm>
#include <unordered_map>

namespace kvscope::spec {
namespace {

double probability_of(const sampling::Distribution& d, std::int32_t token) {
    for (const sampling::TokenProbability& t : d) {
        if (t.token == token) {
            return t.probability;
        }
    }
    return 0.0;
}

} // namespace

DraftCheck check_draft(const sampling::Distribution& p, const sampling::Distribution& q,
                       std::int32_t drafted, double accept_u, double replace_u) {
    const double p_x = probability_of(p, drafted);
    const double q_x = q.empty() ? 1.0 : probability_of(q, drafted);
    // q_x is never 0 for a token drawn from q; guard anyway.
    if (q_x > 0.0 && accept_u < std::min(1.0, p_x / q_x)) {
        return {true, drafted};
    }
    // The residual max(0, p - q) over p's support (where p is 0 it is 0).
    std::unordered_map<std::int32_t, double> q_of;
    if (q.empty()) {
        q_of[drafted] = 1.0;
    } else {
        for (const sampling::TokenProbability& t : q) {
            q_of[t.token] = t.probability;
        }
    }
    sampling::Distribution residual;
    double total = 0;
    for (const sampling::TokenProbability& t : p) {
        const auto it = q_of.find(t.token);
        const double left = t.probability - (it == q_of.end() ? 0.0 : it->second);
        if (left > 0) {
            residual.push_back({t.token, left});
            total += left;
        }
    }
    if (total <= 0) {
        // p <= q everywhere means p = q, where a rejection cannot happen
        // (accept_u < 1 = p/q); rounding can still land here.
        return {false, sampling::draw_from(p, replace_u)};
    }
    for (sampling::TokenProbability& t : residual) {
        t.probability /= total;
    }
    return {false, sampling::draw_from(residual, replace_u)};
}

} // namespace kvscope::spec
