#include "profiler/recording/run_metadata.h"

#include "engine/util/json_text.h"
#include "kvscope/build_info.h"
#include "profiler/recording/machine_info.h"

#include <nlohmann/json.hpp>

namespace kvscope::profiler {
namespace {

// What every recording says first: the machine, the version, who made it.
std::map<std::string, std::string> base_metadata(const std::string& recorded_by) {
    std::map<std::string, std::string> metadata = machine_info();
    metadata["kvscope_version"] = build_info::version;
    metadata["recorded_by"] = recorded_by;
    return metadata;
}

} // namespace

std::map<std::string, std::string> run_metadata(const session::RunConfig& config,
                                                const std::filesystem::path& model_file,
                                                const std::string& recorded_by) {
    std::map<std::string, std::string> metadata = base_metadata(recorded_by);
    metadata["model_path"] = model_file.string();
    metadata["workload"] = config.workload;
    return metadata;
}

std::map<std::string, std::string> attach_metadata(const std::vector<std::string>& endpoints,
                                                   const std::string& recorded_by,
                                                   const std::string& tokenizer_path) {
    std::map<std::string, std::string> metadata = base_metadata(recorded_by);
    metadata["source"] = "attach";
    metadata["endpoints"] = json_text(nlohmann::json(endpoints));
    if (!tokenizer_path.empty()) {
        metadata["tokenizer"] = tokenizer_path;
    }
    return metadata;
}

std::map<std::string, std::string> simulate_metadata(const std::string& trace_path,
                                                     const std::string& settings_json,
                                                     const std::string& recorded_by) {
    std::map<std::string, std::string> metadata = base_metadata(recorded_by);
    metadata["source"] = "simulate";
    metadata["trace"] = trace_path;
    metadata["simulation"] = settings_json;
    return metadata;
}

void add_session_metadata(Recorder& recorder, const session::ServingSession& session) {
    for (const auto& [key, value] : session.recording_metadata()) {
        recorder.set_metadata(key, value);
    }
}

} // namespace kvscope::profiler
