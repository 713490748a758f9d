// Drives an LlmEngine through a workload: turns each request into token ids
// (chat template included), submits it when its arrival time comes, and steps
// the engine until every request has ended.
#pragma once

#include "engine/sched/llm_engine.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/workload/workload.h"

#include <functional>

namespace kvscope::session {

// Throws std::invalid_argument naming the request when token ids fall
// outside the vocabulary.
std::vector<sched::RequestSpec>
to_request_specs(const std::vector<workload::WorkloadRequest>& requests,
                 const tokenizer::Tokenizer& tokenizer,
                 const sampling::SamplingParams& default_sampling);

struct DriveOptions {
    // Arrivals on the wall clock (the engine idles until the next one), or
    // all at once in order (a saturated engine, the fastest run).
    bool real_time = true;
    // Called right before each step, outside its timings: a caller that must
    // wait for its turn (kvscope gate's two builds in step) waits here.
    std::function<void()> before_step;
    std::function<void(const sched::StepStats&)> on_step;
    std::function<bool()> stop_requested; // true: abort what is left and return
};

// Returns the engine's request ids in workload order.
std::vector<std::int64_t> drive(sched::LlmEngine& engine,
                                const std::vector<sched::RequestSpec>& specs,
                                const DriveOptions& options);

} // namespace kvscope::session
