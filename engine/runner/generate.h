// Generation for one prompt: chunked prefill, then decode token by token
// until an end token or the token limit, streaming each token to a callback.
// The simplest driver of a backend; the scheduler (continuous batching) runs
// many sequences instead.
#pragma once

#include "engine/runner/backend.h"
#include "engine/sampling/sampler.h"
#include "engine/tokenizer/tokenizer.h"

#include <functional>
#include <span>
#include <string>

namespace kvscope::runner {

struct GenerationStats {
    int prompt_tokens = 0;
    int generated_tokens = 0;
    double prefill_seconds = 0;
    double decode_seconds = 0; // from the first to the last generated token
    std::string stop_reason;   // "end token", "token limit", "cache full", "stopped"

    double prefill_tokens_per_second() const {
        return prefill_seconds > 0 ? prompt_tokens / prefill_seconds : 0;
    }
    // Decode speed counts the tokens after the first (which prefill produced).
    double decode_tokens_per_second() const {
        return decode_seconds > 0 && generated_tokens > 1 ? (generated_tokens - 1) / decode_seconds
                                                          : 0;
    }
};

struct GenerateOptions {
    int max_tokens = 256;
    int prefill_chunk = 512; // tokens per prefill step, bounds activation memory
};

// Calls on_token for each generated token (end tokens included); returning
// false stops generation. Throws std::invalid_argument when the prompt is
// empty or does not fit the KV cache.
GenerationStats generate(Backend& backend, const tokenizer::Tokenizer& tokenizer,
                         std::span<const std::int32_t> prompt, const GenerateOptions& options,
                         sampling::Sampler& sampler,
                         const std::function<bool(std::int32_t)>& on_token);

} // namespace kvscope::runner
