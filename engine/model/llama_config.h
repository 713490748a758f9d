// Hyperparameters of a Llama-family model, read from GGUF metadata under the
// file's architecture prefix ("llama.block_count", ...).
#pragma once

#include <cstdint>
#include <string>

namespace kvscope::gguf {
class GgufFile;
}

namespace kvscope::model {

struct LlamaConfig {
    std::string architecture; // general.architecture
    std::string name;         // general.name, for display
    int layers = 0;
    int hidden = 0;     // embedding width
    int heads = 0;      // query heads
    int kv_heads = 0;   // key/value heads (grouped-query attention when < heads)
    int head_dim = 0;   // hidden / heads
    int ffn_hidden = 0; // SwiGLU inner width
    int vocab = 0;
    int context_length = 0; // trained context
    float rope_theta = 10000.0f;
    float rms_eps = 1e-5f;
    bool tied_embeddings = false; // output head shares token_embd

    // Throws gguf::GgufError naming the file and key when metadata is missing
    // or inconsistent, or the architecture is not Llama-like.
    static LlamaConfig from_gguf(const gguf::GgufFile& file);
};

} // namespace kvscope::model
