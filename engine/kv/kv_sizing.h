// What a KV cache weighs and how much of it fits: bytes per token, per
// request and per batch for a model's attention shape and the cache's K/V
// formats, and the tokens and requests a device's memory holds once the
// weights are in. The same model is also sized as if its attention were
// multi-head (MHA), grouped-query (GQA), multi-query (MQA) or multi-head
// latent (MLA, DeepSeek's: one compressed latent a token and layer instead
// of per-head K and V) - what each variant buys in cache.
//
// Per token, for per-head attention: layers x KV heads x (K row + V row)
// bytes, the rows in the chosen formats (kv_format.h, with their scales);
// for MLA: layers x (latent + decoupled RoPE key) values in the K format.
// A hybrid model (Gemma 3: five layers in six over a sliding window) keeps
// a request's whole context only in its global layers; a sliding layer
// holds the window and the block it starts in, as vLLM's hybrid manager,
// which frees blocks that left the window, keeps it.
#pragma once

#include "engine/kv/kv_format.h"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvscope::kv {

struct ModelShape {
    std::string name;
    int layers = 0;
    int heads = 0;    // query heads
    int kv_heads = 0; // K/V heads (== heads: MHA; 1: MQA; between: GQA)
    int key_dim = 0;  // per head
    int value_dim = 0;
    // MLA: the values a token and layer caches (the KV latent plus the
    // decoupled RoPE key, 512 + 64 in DeepSeek-V2/V3); 0: per-head K/V.
    int mla_latent = 0;
    double weight_bytes = 0; // at the precision the model is usually served in
    int sliding_layers = 0;  // of `layers`, those over a sliding window
    int sliding_window = 0;  // tokens; 0: none

    bool hybrid() const { return sliding_layers > 0 && sliding_window > 0; }
    int global_layers() const { return layers - (hybrid() ? sliding_layers : 0); }
};

// Llama-3-8B, Llama-3-70B, Mistral-7B, Qwen2.5-7B, Gemma-3-27B, DeepSeek-V3
// (their published configurations; weights at bf16, DeepSeek-V3's at fp8).
const std::vector<ModelShape>& known_model_shapes();
std::optional<ModelShape> find_model_shape(std::string_view name); // any case

// `global`: the model's own attention with every layer global (a hybrid
// model without its windows: what the windows save).
enum class AttentionVariant { mha, gqa, mqa, mla, global };

struct VariantSize {
    AttentionVariant variant = AttentionVariant::mha;
    std::string label; // "GQA (8 KV heads)"
    ModelShape shape;  // the model with this attention
    double bytes_per_token = 0;
    bool own = false; // the model's own attention
};

// Bytes a token's K/V take in the cache, over all layers (a hybrid model's
// token while it is in every window).
double bytes_per_token(const ModelShape& shape, const KvCacheFormat& format);

// Bytes a token keeps once it has left every window: its global layers' K/V
// (a model without windows: bytes_per_token).
double bytes_per_token_past_windows(const ModelShape& shape, const KvCacheFormat& format);

// Bytes one request of `context` tokens holds: bytes_per_token x context,
// but a hybrid model's sliding layers hold at most window + one block.
double request_bytes(const ModelShape& shape, const KvCacheFormat& format, std::int64_t context);

// The model as MHA, its own GQA (when it groups heads), MQA and MLA (its own
// latent, else DeepSeek's proportions: 4 x key_dim + key_dim / 2), each with
// the model's windows; a hybrid model also without them (`global`).
std::vector<VariantSize> attention_variants(const ModelShape& shape, const KvCacheFormat& format);

struct SizingQuestion {
    std::int64_t context_tokens = 8192; // a request's prompt and output
    int batch = 1;
    double memory_bytes = 0; // the device's (0: not asked)
    double utilization = 0.9;
    double weight_bytes = 0;
};

struct SizingAnswer {
    double per_request_bytes = 0;
    double per_batch_bytes = 0;
    double cache_budget_bytes = 0; // memory x utilization - weights (may be < 0)
    double tokens_fit = 0;         // whole tokens the budget holds
    double requests_fit = 0;       // whole requests of context_tokens
};

SizingAnswer answer(double bytes_per_token, const SizingQuestion& question);
// The same for `shape`'s requests of question.context_tokens, windows and
// all: tokens_fit counts the tokens of the requests that fit.
SizingAnswer answer(const ModelShape& shape, const KvCacheFormat& format,
                    const SizingQuestion& question);

// "320.00 KiB", "2.50 GiB", "-4.60 GiB": sizes as kvscope size and the app
// print them (two decimals: a cache's size compared across variants).
std::string size_text(double bytes);

} // namespace kvscope::kv
