// What `kvscope run` and `kvscope record` share: their options and serving
// a workload through one ServingSession, recorded when --out is given.
#pragma once

#include "app/cli/engine_options.h"
#include "app/cli/eviction_options.h"
#include "app/cli/offload_options.h"
#include "app/cli/serving_options.h"
#include "app/cli/speculative_options.h"
#include "engine/workload/workload.h"

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

namespace kvscope::cli {

struct ServeWorkloadOptions {
    EngineOptions engine;
    ServingOptions serving;
    EvictionOptions eviction;
    SpeculativeOptions speculative;
    OffloadOptions offload;
    std::string workload = "shared-prefix";
    workload::PresetOptions preset;
    bool all_at_once = false;
    float temperature = 0.0f;
    std::string events_path;
    bool json = false;
    bool per_request = false;
    bool quiet = false;          // no progress lines
    int throttle_ms = 0;         // sleep in each forward pass: a stand-in for a slower build
    double slowdown_percent = 0; // CPU time spun in each forward pass, in percent of its own
    std::string out_path;        // record: the recording to write
    bool overwrite = false;
    std::string gpu_capture = "auto";    // record: auto, on, off
    std::string on_write_error = "stop"; // record: stop or continue the run when writing fails
    std::string command = "run";         // for messages
    std::string step_turns; // kvscope gate's socket: take steps in turns with another build
};

// The workload, output and engine options both subcommands take.
void add_workload_options(CLI::App* parser, const std::shared_ptr<ServeWorkloadOptions>& options);

// Serves the workload; returns the exit status (130 when interrupted).
int serve_workload(ServeWorkloadOptions& options);

} // namespace kvscope::cli
