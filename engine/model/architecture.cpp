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

} // namespace

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
