// Prompt-lookup drafting (vLLM's ngram method, after "Prompt Lookup
// Decoding"): when the sequence's last n tokens occurred earlier in it, the
// tokens that followed that occurrence are a cheap guess of what comes
// next. Text that quotes or repeats its context (code edits, summaries,
// extraction) drafts well; free generation rarely does.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace kvscope::spec {

// Up to `count` tokens that followed the latest earlier occurrence of the
// last n tokens of `tokens`, for the longest n in [min_n, max_n] that has
// one; empty when none does.
std::vector<std::int32_t> propose_ngram(std::span<const std::int32_t> tokens, int min_n, int max_n,
                                        int count);

} // namespace kvscope::spec
