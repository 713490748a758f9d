// How `kvscope run` and `record` print a served workload's summary as text.
#pragma once

#include "engine/session/run_config.h"
#include "engine/session/run_summary.h"

namespace kvscope::cli {

void print_summary(const session::RunSummary& summary, const session::RunConfig& config,
                   bool per_request);

} // namespace kvscope::cli
