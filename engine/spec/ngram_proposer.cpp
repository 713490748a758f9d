#include "engine/spec/ngram_proposer.h"

#include <algorithm>

namespace kvscope::spec {

std::vector<std::int32_t> propose_ngram(std::span<const std::int32_t> tokens, int min_n, int max_n,
                                        int count) {
    const auto size = static_cast<std::ptrdiff_t>(tokens.size());
    if (count <= 0) {
        return {};
    }
    for (std::ptrdiff_t n = std::min<std::ptrdiff_t>(max_n, size - 1); n >= min_n && n >= 1; --n) {
        const std::span<const std::int32_t> suffix =
            tokens.subspan(static_cast<std::size_t>(size - n));
        // Latest start first: an occurrence ending before the suffix's own
        // start (start + n <= size - 1 leaves at least one token after it).
        for (std::ptrdiff_t start = size - n - 1; start >= 0; --start) {
            if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + start)) {
                continue;
            }
            const std::ptrdiff_t from = start + n;
            const std::ptrdiff_t to = std::min(size, from + count);
            return {tokens.begin() + from, tokens.begin() + to};
        }
    }
    return {};
}

} // namespace kvscope::spec
