#include "engine/model/architecture.h"

#include <array>

namespace kvscope::model {
namespace {

constexpr std::array<Architecture, 5> kArchitectures{{
    {.name = "llama"},
    {.name = "mistral"},
    {.name = "qwen2", .rope = RopePairing::halves, .qkv_bias = true},
    {.name = "qwen3", .rope = RopePairing::halves, .qk_norm = true},
    {.name = "gemma3",
     .rope = RopePairing::halves,
     .activation = GateActivation::gelu_tanh,
     .qk_norm = true,
     .post_norms = true,
     .scaled_embedding = true,
     .global_layer_period = 6,
     .sliding_rope_base = 10000.0f},
}};

bool same_block_as_llama(const Architecture& arch) {
    const Architecture llama{};
    return arch.rope == llama.rope && arch.activation == llama.activation &&
           arch.qkv_bias == llama.qkv_bias && arch.qk_norm == llama.qk_norm &&
           arch.post_norms == llama.post_norms && arch.scaled_embedding == llama.scaled_embedding &&
           arch.global_layer_period == llama.global_layer_period;
}

} // namespace

bool runs_on_cuda(const Architecture& arch) {
    return same_block_as_llama(arch);
}

std::string cuda_architecture_problem(const Architecture& arch) {
    std::string runs;
    for (const Architecture& known : kArchitectures) {
        if (runs_on_cuda(known)) {
            runs += (runs.empty() ? "" : ", ") + std::string(known.name);
        }
    }
    return "the CUDA backend does not run " + std::string(arch.name) + " models yet (it runs " +
           runs + ")";
}

const Architecture* find_architecture(std::string_view name) {
    for (const Architecture& arch : kArchitectures) {
        if (arch.name == name) {
            return &arch;
        }
    }
    return nullptr;
}

std::string supported_architectures() {
    std::string names;
    for (const Architecture& arch : kArchitectures) {
        names += (names.empty() ? "" : ", ") + std::string(arch.name);
    }
    return names;
}

} // namespace kvscope::model
