// What a --model option takes: a GGUF file, or the name of a model
// scripts/setup.sh caches (engine/model_path.h), checked as CLI11 parses.
#pragma once

#include "engine/model_path.h"

#include <CLI/CLI.hpp>
#include <filesystem>
#include <string>

namespace kvscope::cli {

inline CLI::Validator model_file_or_name() {
    return CLI::Validator(
        [](std::string& value) -> std::string {
            if (std::filesystem::exists(value) || named_model_path(value)) {
                return {};
            }
            return "no such file, nor a model name (" + model_names() + "): " + value;
        },
        "FILE|NAME");
}

} // namespace kvscope::cli
