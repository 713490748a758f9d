// What every recording of a served run says about itself, written the same
// way whether `kvscope record` or the app made it: the machine, the kvscope
// version, the model file and workload (known before the model loads, so a
// file in the way fails first), then what the session built.
#pragma once

#include "engine/session/run_config.h"
#include "engine/session/serving_session.h"
#include "profiler/recording/recorder.h"

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace kvscope::profiler {

// `recorded_by`: "kvscope record", "kvscope-ui".
std::map<std::string, std::string> run_metadata(const session::RunConfig& config,
                                                const std::filesystem::path& model_file,
                                                const std::string& recorded_by);

// A recording of attached engines (kvscope attach, or the app's Attach):
// the machine, the kvscope version, the endpoints as JSON, and the tokenizer
// given for their token ids (a GGUF file; empty: none), so a replay can
// show text again.
std::map<std::string, std::string> attach_metadata(const std::vector<std::string>& endpoints,
                                                   const std::string& recorded_by,
                                                   const std::string& tokenizer_path = "");

// A simulated run's recording (kvscope simulate --record): the machine, the
// kvscope version, the trace file and the simulation's settings as JSON (KV
// capacity, block size, scheduler limits, cost model).
std::map<std::string, std::string> simulate_metadata(const std::string& trace_path,
                                                     const std::string& settings_json,
                                                     const std::string& recorded_by);

// The session's own metadata (model name, requests, backend, run config).
void add_session_metadata(Recorder& recorder, const session::ServingSession& session);

} // namespace kvscope::profiler
