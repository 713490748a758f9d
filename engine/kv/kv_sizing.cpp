#include "engine/kv/kv_sizing.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>

namespace kvscope::kv {
namespace {

// Per-block formats' scales amortised over a block of this many tokens.
constexpr int kBlockTokens = 16;

double row_bytes(KvFormat format, int dim, bool is_key) {
    return static_cast<double>(kv_head_block_bytes(format, kBlockTokens, dim, is_key)) /
           kBlockTokens;
}

bool same_name(std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return std::tolower(static_cast<unsigned char>(x)) ==
                      std::tolower(static_cast<unsigned char>(y));
           });
}

} // namespace

const std::vector<ModelShape>& known_model_shapes() {
    // From each model's config.json (num_hidden_layers, num_attention_heads,
    // num_key_value_heads, head_dim; DeepSeek-V3's kv_lora_rank 512 and
    // qk_rope_head_dim 64, qk_nope_head_dim 128, v_head_dim 128) and
    // parameter counts.
    static const std::vector<ModelShape> shapes{
        {"Llama-3-8B", 32, 32, 8, 128, 128, 0, 8.03e9 * 2},
        {"Llama-3-70B", 80, 64, 8, 128, 128, 0, 70.6e9 * 2},
        {"Mistral-7B", 32, 32, 8, 128, 128, 0, 7.24e9 * 2},
        {"Qwen2.5-7B", 28, 28, 4, 128, 128, 0, 7.62e9 * 2},
        // sliding_window 1024 on five layers in six (52 of 62).
        {"Gemma-3-27B", 62, 32, 16, 128, 128, 0, 27.4e9 * 2, 52, 1024},
        {"DeepSeek-V3", 61, 128, 128, 192, 128, 512 + 64, 671e9},
    };
    return shapes;
}

std::optional<ModelShape> find_model_shape(std::string_view name) {
    for (const ModelShape& shape : known_model_shapes()) {
        if (same_name(shape.name, name)) {
            return shape;
        }
    }
    return std::nullopt;
}

double bytes_per_token(const ModelShape& shape, const KvCacheFormat& format) {
    if (shape.mla_latent > 0) {
        return shape.layers * row_bytes(format.key, shape.mla_latent, false);
    }
    return static_cast<double>(shape.layers) * shape.kv_heads *
           (row_bytes(format.key, shape.key_dim, true) +
            row_bytes(format.value, shape.value_dim, false));
}

double bytes_per_token_past_windows(const ModelShape& shape, const KvCacheFormat& format) {
    return bytes_per_token(shape, format) * shape.global_layers() / shape.layers;
}

double request_bytes(const ModelShape& shape, const KvCacheFormat& format, std::int64_t context) {
    const double per_layer = bytes_per_token(shape, format) / shape.layers;
    const auto tokens = static_cast<double>(context);
    if (!shape.hybrid()) {
        return per_layer * shape.layers * tokens;
    }
    const double sliding_tokens =
        std::min(tokens, static_cast<double>(shape.sliding_window + kBlockTokens));
    return per_layer * (shape.global_layers() * tokens + shape.sliding_layers * sliding_tokens);
}

std::vector<VariantSize> attention_variants(const ModelShape& shape, const KvCacheFormat& format) {
    std::vector<VariantSize> out;
    const auto add = [&](AttentionVariant variant, std::string label, ModelShape s, bool own) {
        const double bytes = bytes_per_token(s, format);
        out.push_back({variant, std::move(label), std::move(s), bytes, own});
    };
    ModelShape per_head = shape;
    per_head.mla_latent = 0;
    ModelShape mha = per_head;
    mha.kv_heads = shape.heads;
    add(AttentionVariant::mha, "MHA (" + std::to_string(shape.heads) + " KV heads)", mha,
        shape.mla_latent == 0 && shape.kv_heads == shape.heads);
    if (shape.mla_latent == 0 && shape.kv_heads > 1 && shape.kv_heads < shape.heads) {
        add(AttentionVariant::gqa, "GQA (" + std::to_string(shape.kv_heads) + " KV heads)",
            per_head, true);
    }
    ModelShape mqa = per_head;
    mqa.kv_heads = 1;
    add(AttentionVariant::mqa, "MQA (1 KV head)", mqa,
        shape.mla_latent == 0 && shape.kv_heads == 1);
    ModelShape mla = shape;
    const bool own_latent = shape.mla_latent > 0;
    if (!own_latent) {
        mla.mla_latent = 4 * shape.key_dim + shape.key_dim / 2;
    }
    add(AttentionVariant::mla,
        "MLA (latent " + std::to_string(mla.mla_latent) +
            (own_latent ? ")" : ", DeepSeek's proportions)"),
        mla, own_latent);
    if (shape.hybrid()) {
        ModelShape global = shape;
        global.sliding_layers = 0;
        global.sliding_window = 0;
        add(AttentionVariant::global, "the same, every layer global", global, false);
    }
    return out;
}

std::string size_text(double bytes) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int unit = 0;
    while (std::abs(bytes) >= 1024 && unit < 4) {
        bytes /= 1024;
        ++unit;
    }
    char text[32];
    std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.2f %s", bytes, units[unit]);
    return text;
}

SizingAnswer answer(double bytes_per_token, const SizingQuestion& q) {
    SizingAnswer a;
    a.per_request_bytes = bytes_per_token * static_cast<double>(q.context_tokens);
    a.per_batch_bytes = a.per_request_bytes * q.batch;
    if (q.memory_bytes > 0) {
        a.cache_budget_bytes = q.memory_bytes * q.utilization - q.weight_bytes;
        if (a.cache_budget_bytes > 0 && bytes_per_token > 0) {
            a.tokens_fit = std::floor(a.cache_budget_bytes / bytes_per_token);
            a.requests_fit = q.context_tokens > 0
                                 ? std::floor(a.tokens_fit / static_cast<double>(q.context_tokens))
                                 : 0;
        }
    }
    return a;
}

SizingAnswer answer(const ModelShape& shape, const KvCacheFormat& format,
                    const SizingQuestion& question) {
    if (question.context_tokens <= 0) {
        return answer(bytes_per_token(shape, format), question);
    }
    // The average a token of such a request costs; the per-request and
    // per-batch sizes come out exact.
    return answer(request_bytes(shape, format, question.context_tokens) /
                      static_cast<double>(question.context_tokens),
                  question);
}

} // namespace kvscope::kv
