#include "engine/model_path.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <system_error>

namespace kvscope {
namespace {

struct NamedModel {
    std::string_view name;  // shown in help texts
    std::string_view alias; // also taken
    const char* file;
};

constexpr std::array<NamedModel, 2> kNamedModels{{
    {"smollm2", "SmolLM2-135M-Instruct", default_model_file_name},
    {"gemma-3-270m", "gemma3", gemma3_model_file_name},
}};

bool same_ignoring_case(std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return std::tolower(static_cast<unsigned char>(x)) ==
                      std::tolower(static_cast<unsigned char>(y));
           });
}

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

std::optional<std::filesystem::path> named_model_path(std::string_view name) {
    for (const NamedModel& model : kNamedModels) {
        if (same_ignoring_case(name, model.name) || same_ignoring_case(name, model.alias)) {
            return model_cache_dir() / model.file;
        }
    }
    return std::nullopt;
}

std::string model_names() {
    std::string names;
    for (const NamedModel& model : kNamedModels) {
        names += (names.empty() ? "" : ", ") + std::string(model.name);
    }
    return names;
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
