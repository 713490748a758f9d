// `kvscope generate`'s recipe: one prompt through the serving engine (the
// LlmEngine, scheduler and paged cache `kvscope run` uses, speculative
// decoding included), each token handed over as it is sampled, then how
// long prefill and decode took and what the drafts came to.
#pragma once

#include "engine/model/llama_model.h"
#include "engine/session/run_config.h"
#include "engine/session/serving_session.h"
#include "engine/spec/speculation_totals.h"
#include "engine/workload/workload.h"

#include <functional>
#include <memory>
#include <string>

namespace kvscope::session {

struct GenerationStats {
    int prompt_tokens = 0;
    int generated_tokens = 0;
    double prefill_seconds = 0; // admission to the first token
    double decode_seconds = 0;  // from the first to the last generated token
    // "end token", "token limit" (or the model's length), "cache full",
    // "stopped"
    std::string stop_reason;
    spec::SpeculationTotals speculation;

    double prefill_tokens_per_second() const {
        return prefill_seconds > 0 ? prompt_tokens / prefill_seconds : 0;
    }
    // Decode speed counts the tokens after the first (which prefill produced).
    double decode_tokens_per_second() const {
        return decode_seconds > 0 && generated_tokens > 1 ? (generated_tokens - 1) / decode_seconds
                                                          : 0;
    }
};

struct GenerateHooks {
    // Each generated token id in order (end tokens included); false stops.
    std::function<bool(std::int32_t)> on_token;
    // Checked between steps (a long prefill too): true stops.
    std::function<bool()> stop_requested;
    // The session is loaded, before the first step: what it runs on.
    std::function<void(const ServingSession&)> on_ready;
};

// Serves `request` alone, all at once, through a ServingSession. The cache
// holds the prompt and the output the model's length allows, unless
// `config.cache` sizes it. Throws std::invalid_argument (an empty prompt,
// ids outside the vocabulary) or std::runtime_error (settings that cannot
// run, a prompt the engine rejected, with its reason).
GenerationStats generate(RunConfig config, std::shared_ptr<const model::LlamaModel> model,
                         const workload::WorkloadRequest& request, const GenerateHooks& hooks);

} // namespace kvscope::session
