// How `kvscope run` and `record` print a served workload's summary as text
// (and `generate` its drafts).
#pragma once

#include "engine/session/run_config.h"
#include "engine/session/run_summary.h"

#include <string>

namespace kvscope::cli {

void print_summary(const session::RunSummary& summary, const session::RunConfig& config,
                   bool per_request);

// "draft:4 (...): 120 tokens drafted, 80 kept (66.7%), 2.60 tokens per
// verifying pass".
std::string speculation_text(const spec::SpeculativeConfig& config,
                             const spec::SpeculationTotals& totals);

} // namespace kvscope::cli
