#include "engine/model_path.h"

#include <cstdlib>
#include <fstream>
#include <system_error>

namespace kvscope {
namespace {

std::filesystem::path env_path(const char* name) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') {
        return {};
    }
    return std::filesystem::path(value);
}

} // namespace

std::filesystem::path model_cache_dir() {
    // Same rule as scripts/setup.sh, so the two always agree.
    std::filesystem::path base = env_path("XDG_CACHE_HOME");
    if (base.empty()) {
        std::filesystem::path home = env_path("HOME");
        base = home.empty() ? std::filesystem::path(".cache") : home / ".cache";
    }
    return base / "kvscope" / "models";
}

ModelPath resolve_model_path() {
    if (std::filesystem::path chosen = env_path("KVSCOPE_MODEL"); !chosen.empty()) {
        return {chosen, true};
    }
    return {model_cache_dir() / default_model_file_name, false};
}

std::string model_path_problem(const ModelPath& model) {
    std::error_code ec;
    const auto status = std::filesystem::status(model.path, ec);
    std::string problem;
    if (!std::filesystem::exists(status)) {
        problem = "model file not found: " + model.path.string();
    } else if (!std::filesystem::is_regular_file(status)) {
        problem = "model path is not a regular file: " + model.path.string();
    } else if (!std::ifstream(model.path, std::ios::binary)) {
        problem = "model file cannot be read: " + model.path.string();
    } else {
        return {};
    }
    if (model.from_environment) {
        problem +=
            "\n  (chosen by KVSCOPE_MODEL; unset it to use the default model, or point it at a "
            "readable .gguf file)";
    } else {
        problem +=
            "\n  Run scripts/setup.sh to download it, or set KVSCOPE_MODEL=/path/to/model.gguf";
    }
    return problem;
}

} // namespace kvscope
