// Finding and loading the model a run names, with the same checks and
// messages for every caller (CLI, app, quality measurement).
#pragma once

#include "engine/kv/kv_sizing.h"
#include "engine/model/llama_model.h"

#include <filesystem>
#include <memory>
#include <string>

namespace kvscope::session {

// The file `option` names (a path, or a name named_model_path() knows), or
// $KVSCOPE_MODEL, or the model setup.sh fetched (when `option` is empty). Throws std::runtime_error
// saying what to run when the file is missing or unreadable.
std::filesystem::path model_file(const std::string& option);

// Throws gguf::GgufError naming the file and the problem.
std::shared_ptr<const model::LlamaModel> load_model(const std::filesystem::path& file);

// The attention shape and weight bytes (the file's size) of the GGUF at
// `file`, from its metadata alone, for sizing its KV cache. Throws
// gguf::GgufError.
kv::ModelShape model_shape(const std::filesystem::path& file);

std::string model_name(const model::LlamaModel& model); // the GGUF's name, else its architecture

// Why `draft` cannot draft for `target` (speculative decoding compares
// token ids, so both must spell every id alike and end on the same
// tokens), or empty.
std::string draft_model_mismatch(const model::LlamaModel& target, const model::LlamaModel& draft);

// "SmolLM2 135M Instruct, 30 layers, 576 wide, 9/3 heads, 85.0 MiB of weights"
std::string describe_model(const model::LlamaModel& model);

} // namespace kvscope::session
