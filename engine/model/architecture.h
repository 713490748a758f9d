// What sets each supported architecture's transformer block apart from
// Llama's, in one table (architecture.cpp). The config carries the entry of
// its file's architecture; the weights load the tensors it names and the
// backends run one block whose optional steps follow the weights they find
// (a bias, a QK norm, a post-norm) and the two choices below.
#pragma once

#include <string>
#include <string_view>

namespace kvscope::model {

// How RoPE pairs a head's dimensions. llama.cpp's GGUF conversion permutes
// Llama's Q and K so that adjacent dimensions rotate together ("NORM");
// Qwen and Gemma keep the original layout, dimension i with i + head_dim / 2
// ("NEOX").
enum class RopePairing { adjacent, halves };

// The gated FFN's activation: silu(gate) * up (SwiGLU) or
// gelu_tanh(gate) * up (GeGLU, Gemma).
enum class GateActivation { silu, gelu_tanh };

struct Architecture {
    std::string_view name; // general.architecture
    RopePairing rope = RopePairing::adjacent;
    GateActivation activation = GateActivation::silu;
    bool qkv_bias = false;         // attn_q/k/v.bias (Qwen2)
    bool qk_norm = false;          // attn_q_norm, attn_k_norm per head before RoPE (Qwen3, Gemma 3)
    bool post_norms = false;       // post_attention_norm, post_ffw_norm before each residual add
    bool scaled_embedding = false; // embeddings times sqrt(width) (Gemma)
    // Every n-th layer (1-based) attends globally and the others over a
    // sliding window, when the file gives the window; 0: all global. Not in
    // GGUF metadata: llama.cpp hard-codes it per architecture too.
    int global_layer_period = 0;
    // RoPE base of the sliding-window layers (the file gives the global one).
    float sliding_rope_base = 0.0f;
};

// The entry for `name`, or nullptr when kvscope cannot run it.
const Architecture* find_architecture(std::string_view name);

// "llama, mistral, qwen2, qwen3, gemma3": for error messages.
std::string supported_architectures();

} // namespace kvscope::model
