// `kvscope info`: what this build contains, which GPUs it sees and which model
// it would load. The first thing to run on a new machine.
#include "app/cli/command.h"
#include "engine/gpu_devices.h"
#include "engine/model_path.h"
#include "engine/util/json_text.h"
#include "engine/util/perf_counters.h"
#include "kvscope/build_info.h"

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sqlite3.h>

namespace kvscope::cli {
namespace {

struct InfoOptions {
    bool json = false;
};

// Whether the CUDA backend has run on GPU hardware, as the repository's
// bench/results/gpu-verification.json said when this build was configured.
nlohmann::json cuda_verification() {
    const bool verified = build_info::cuda_verified_on_gpu;
    const std::string status =
        verified
            ? std::string(build_info::cuda_verified_date) + " on " +
                  build_info::cuda_verified_device + " (" + build_info::cuda_verified_results + ")"
            : std::string("not yet on GPU hardware (compiled and CPU-checked only)");
    const std::string not_yet = build_info::cuda_not_yet_verified;
    return {{"verified_on_gpu", verified},
            {"date", build_info::cuda_verified_date},
            {"device", build_info::cuda_verified_device},
            {"results", build_info::cuda_verified_results},
            {"not_yet_on_gpu", not_yet},
            {"status",
             verified && !not_yet.empty() ? status + "; not yet on a GPU: " + not_yet : status}};
}

nlohmann::json collect_info() {
    nlohmann::json info;
    info["version"] = build_info::version;
    info["build_type"] = build_info::build_type;
    info["compiler"] = build_info::compiler;
    info["cuda_compiled"] = build_info::with_cuda;
    info["cuda_architectures"] = build_info::cuda_architectures;
    info["cuda_verification"] = cuda_verification();
    info["sqlite_version"] = sqlite3_libversion();
    const std::string counters_problem = perf_counters_unavailable_reason();
    info["hardware_counters"] = {{"available", counters_problem.empty()}};
    if (!counters_problem.empty()) {
        info["hardware_counters"]["unavailable_reason"] = counters_problem;
    }

    const GpuInventory gpus = query_gpu_devices();
    info["gpus"] = nlohmann::json::array();
    for (const GpuDevice& gpu : gpus.devices) {
        info["gpus"].push_back({{"index", gpu.index},
                                {"name", gpu.name},
                                {"compute_capability", std::to_string(gpu.compute_major) + "." +
                                                           std::to_string(gpu.compute_minor)},
                                {"memory_bytes", gpu.total_memory_bytes},
                                {"multiprocessors", gpu.multiprocessors}});
    }
    if (!gpus.unavailable_reason.empty()) {
        info["gpu_unavailable_reason"] = gpus.unavailable_reason;
    }

    const ModelPath model = resolve_model_path();
    const std::string problem = model_path_problem(model);
    info["model"] = {{"path", model.path.string()},
                     {"from_KVSCOPE_MODEL", model.from_environment},
                     {"available", problem.empty()}};
    if (!problem.empty()) {
        info["model"]["problem"] = problem;
    }
    return info;
}

void print_text(const nlohmann::json& info) {
    std::cout << "kvscope " << info["version"].get<std::string>() << " ("
              << info["build_type"].get<std::string>() << ", "
              << info["compiler"].get<std::string>() << ")\n";
    std::cout << "  CUDA backend : "
              << (info["cuda_compiled"].get<bool>()
                      ? "compiled for " + info["cuda_architectures"].get<std::string>()
                      : std::string("not compiled"))
              << "\n";
    std::cout << "  CUDA verified: " << info["cuda_verification"]["status"].get<std::string>()
              << "\n";
    std::cout << "  GPUs         : ";
    if (info["gpus"].empty()) {
        std::cout << "none (" << info["gpu_unavailable_reason"].get<std::string>() << ")\n";
    } else {
        std::cout << info["gpus"].size() << "\n";
        for (const auto& gpu : info["gpus"]) {
            std::cout << "    [" << gpu["index"].get<int>() << "] "
                      << gpu["name"].get<std::string>() << ", sm_"
                      << gpu["compute_capability"].get<std::string>() << ", "
                      << gpu["memory_bytes"].get<std::size_t>() / (1024 * 1024) << " MiB\n";
        }
    }
    std::cout << "  SQLite       : " << info["sqlite_version"].get<std::string>() << "\n";
    const nlohmann::json& counters = info["hardware_counters"];
    std::cout << "  HW counters  : "
              << (counters["available"].get<bool>()
                      ? std::string("instructions and cycles (regression gates use them)")
                      : "none (" + counters["unavailable_reason"].get<std::string>() +
                            "); gates use CPU time")
              << "\n";
    const auto& model = info["model"];
    std::cout << "  Model        : " << model["path"].get<std::string>()
              << (model["from_KVSCOPE_MODEL"].get<bool>() ? " (from KVSCOPE_MODEL)" : "") << "\n";
    if (!model["available"].get<bool>()) {
        std::cout << "  Model problem: " << model["problem"].get<std::string>() << "\n";
    }
}

} // namespace

Command add_info_command(CLI::App& app) {
    auto options = std::make_shared<InfoOptions>();
    CLI::App* parser = app.add_subcommand(
        "info", "Show what this build contains, the GPUs it sees and the model it "
                "would load");
    parser->add_flag("--json", options->json, "Print one JSON object instead of text");
    return {parser, [options] {
                const nlohmann::json info = collect_info();
                if (options->json) {
                    std::cout << json_text(info, 2) << "\n";
                } else {
                    print_text(info);
                }
                // A missing model is reported, not an error: info must work
                // before set-up has fetched anything.
                return exit_ok;
            }};
}

} // namespace kvscope::cli
