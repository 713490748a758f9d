#include "engine/cpu/cpu_backend.h"

#include "engine/cpu/matmul.h"
#include "engine/cpu/ops.h"
#include "engine/util/cpu_clock.h"
#include "engine/util/host_clock.h"
#include "kernels/nvtx_range.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace kvscope::cpu {

CpuBackend::CpuBackend(std::shared_ptr<const model::LlamaModel> model,
                       const CpuBackendOptions& options)
    : model_(std::move(model))
    , weights_(CpuWeights::of(*model_))
    , options_(options)
    , groups_(model::kv_group_layout(model_->config(), options.hybrid_kv))
    , pool_(options.threads)
    , kv_(KvGeometry{groups_.layers_per_block, model_->config().kv_heads, model_->config().head_dim,
                     options.block_size, options.num_blocks},
          options.cache_format) {}

void CpuBackend::forward(const runner::ForwardBatch& batch, float* logits) {
    const model::LlamaConfig& c = model_->config();
    const CpuWeights& w = *weights_;
    const std::int64_t tokens = batch.token_count();
    if (tokens == 0) {
        return;
    }
    if (batch.kv_groups != groups_.group_count()) {
        throw std::invalid_argument("the batch has block tables for " +
                                    std::to_string(batch.kv_groups) + " KV groups, the cache " +
                                    std::to_string(groups_.group_count()));
    }
    for (const std::int32_t slot : batch.slot_mapping) {
        if (slot < 0 || slot >= options_.num_blocks * options_.block_size) {
            throw std::invalid_argument("slot " + std::to_string(slot) +
                                        " is outside the KV cache");
        }
    }
    const std::int64_t hidden = c.hidden;
    const std::int64_t q_width = static_cast<std::int64_t>(c.heads) * c.head_dim;
    const std::int64_t kv_width = static_cast<std::int64_t>(c.kv_heads) * c.head_dim;

    // Activations for this step, (tokens, width) each, in buffers kept across
    // steps so decoding does not allocate.
    const auto sized = [](std::vector<float>& buffer, std::int64_t count) -> std::vector<float>& {
        buffer.resize(static_cast<std::size_t>(count));
        return buffer;
    };
    std::vector<float>& x = sized(scratch_.x, tokens * hidden);
    std::vector<float>& h = sized(scratch_.h, tokens * hidden);
    std::vector<float>& q = sized(scratch_.q, tokens * q_width);
    std::vector<float>& k = sized(scratch_.k, tokens * kv_width);
    std::vector<float>& v = sized(scratch_.v, tokens * kv_width);
    std::vector<float>& attn = sized(scratch_.attn, tokens * q_width);
    std::vector<float>& gate = sized(scratch_.gate, tokens * c.ffn_hidden);
    std::vector<float>& up = sized(scratch_.up, tokens * c.ffn_hidden);

    for (std::int64_t t = 0; t < tokens; ++t) {
        const std::int32_t id = batch.token_ids[static_cast<std::size_t>(t)];
        if (id < 0 || id >= c.vocab) {
            throw std::invalid_argument("token id " + std::to_string(id) +
                                        " is outside the vocabulary");
        }
        dequantize_row(w.token_embedding, id, x.data() + t * hidden);
    }
    if (c.traits.scaled_embedding) {
        // As transformers does: the scale rounded to the activations' type.
        const float scale = std::sqrt(static_cast<float>(hidden));
        for (float& value : x) {
            value *= scale;
        }
    }
    captured_.reset(batch);
    const AttentionCapture attention_capture{captured_.sums(), captured_.offsets()};
    // One cos/sin table per RoPE base the layers use (Gemma 3: two), kept
    // from step to step like the activations.
    std::vector<RopeTable>& tables = scratch_.rope;
    std::size_t table_count = 0;
    const auto rope_table_of = [&](float base) -> RopeTable* {
        const auto end = tables.begin() + static_cast<std::ptrdiff_t>(table_count);
        const auto found = std::find_if(tables.begin(), end,
                                        [&](const RopeTable& table) { return table.base == base; });
        return found == end ? nullptr : &*found;
    };
    for (const model::LayerAttention& la : c.layer_attention) {
        if (rope_table_of(la.rope_base) == nullptr) {
            if (table_count == tables.size()) {
                tables.emplace_back();
            }
            RopeTable& table = tables[table_count++];
            table.base = la.rope_base;
            table.cos.resize(static_cast<std::size_t>(tokens * c.head_dim / 2));
            table.sin.resize(table.cos.size());
            rope_tables(batch.positions.data(), tokens, c.head_dim, la.rope_base,
                        c.rope_divisors_or_null(), table.cos.data(), table.sin.data());
        }
    }

    // Each op in an NVTX range, and timed only when someone listens.
    const auto op = [this](const char* name, int layer, const auto& run) {
        const nvtx::Range range(name);
        if (op_observer_ == nullptr) {
            run();
            return;
        }
        const std::int64_t begin = host_now_ns();
        const std::int64_t cpu_begin = thread_cpu_ns();
        run();
        const std::int64_t cpu = thread_cpu_ns() - cpu_begin;
        op_observer_->on_op(name, layer, begin, host_now_ns(), cpu);
    };
    // A self-draft runs the first layers only (ForwardBatch::layers).
    const int run_layers = batch.layers > 0 ? std::min(batch.layers, c.layers) : c.layers;
    for (int l = 0; l < run_layers; ++l) {
        const CpuLayerWeights& layer = w.layers[static_cast<std::size_t>(l)];
        const int group = groups_.group_of[static_cast<std::size_t>(l)];
        const LayerKvView cache = kv_.layer(groups_.slot_of[static_cast<std::size_t>(l)], group);
        const nvtx::Range layer_range(nvtx::layer_name(l));

        const model::LayerWeights& vectors = *layer.vectors;
        const model::LayerAttention& scope = c.layer_attention[static_cast<std::size_t>(l)];
        // The output of a block's attention or FFN goes through its post-norm,
        // where the architecture has one, then into the residual stream.
        const auto add_to_residual = [&](const std::vector<float>& post_norm) {
            if (!post_norm.empty()) {
                rms_norm(h.data(), post_norm.data(), h.data(), tokens, hidden, c.rms_eps);
            }
            add_in_place(x.data(), h.data(), tokens * hidden);
        };

        op("attn_norm", l, [&] {
            rms_norm(x.data(), vectors.attn_norm.data(), h.data(), tokens, hidden, c.rms_eps);
        });
        op("qkv", l, [&] {
            const MatmulOutput qkv[] = {
                {&layer.wq, q.data()}, {&layer.wk, k.data()}, {&layer.wv, v.data()}};
            matmul_shared_input(qkv, h.data(), tokens, pool_);
            if (!vectors.q_bias.empty()) {
                add_bias(q.data(), vectors.q_bias.data(), tokens, q_width);
                add_bias(k.data(), vectors.k_bias.data(), tokens, kv_width);
                add_bias(v.data(), vectors.v_bias.data(), tokens, kv_width);
            }
        });
        if (!vectors.q_norm.empty()) {
            op("qk_norm", l, [&] {
                rms_norm(q.data(), vectors.q_norm.data(), q.data(), tokens * c.heads, c.head_dim,
                         c.rms_eps);
                rms_norm(k.data(), vectors.k_norm.data(), k.data(), tokens * c.kv_heads, c.head_dim,
                         c.rms_eps);
            });
        }
        op("rope", l, [&] {
            const RopeTable& table = *rope_table_of(scope.rope_base);
            rope(q.data(), table.cos.data(), table.sin.data(), tokens, c.heads, c.head_dim,
                 c.traits.rope);
            rope(k.data(), table.cos.data(), table.sin.data(), tokens, c.kv_heads, c.head_dim,
                 c.traits.rope);
        });
        op("kv_write", l, [&] { kv_.write(cache.layer, batch, k.data(), v.data(), group); });
        op("attention", l, [&] {
            paged_attention(cache, batch, q.data(), c.heads, attn.data(), pool_, attention_capture,
                            {c.attention_scale, scope.window});
        });
        op("attn_out", l, [&] {
            matmul(layer.wo, attn.data(), tokens, h.data(), pool_);
            add_to_residual(vectors.post_attn_norm);
        });
        op("ffn_norm", l, [&] {
            rms_norm(x.data(), vectors.ffn_norm.data(), h.data(), tokens, hidden, c.rms_eps);
        });
        op("gate_up", l, [&] {
            const MatmulOutput gate_up[] = {{&layer.w_gate, gate.data()}, {&layer.w_up, up.data()}};
            matmul_shared_input(gate_up, h.data(), tokens, pool_);
            // Over the pool: tokens x ffn_hidden transcendental calls (a
            // tanh or an exp each) took as long as the two matrices at
            // batch 16 on one thread.
            float* gate_values = gate.data();
            const float* up_values = up.data();
            pool_.parallel_for(tokens * c.ffn_hidden, 4096,
                               [&](std::int64_t begin, std::int64_t end) {
                                   gated_activation(gate_values + begin, up_values + begin,
                                                    end - begin, c.traits.activation);
                               });
        });
        op("down", l, [&] {
            matmul(layer.w_down, gate.data(), tokens, h.data(), pool_);
            add_to_residual(vectors.post_ffn_norm);
        });
    }

    // Only the rows whose logits are wanted go through the (large) output head.
    const auto rows = static_cast<std::int64_t>(batch.logit_tokens.size());
    std::vector<float>& selected = sized(scratch_.selected, rows * hidden);
    for (std::int64_t r = 0; r < rows; ++r) {
        const std::int32_t t = batch.logit_tokens[static_cast<std::size_t>(r)];
        rms_norm(x.data() + t * hidden, w.output_norm.data(), selected.data() + r * hidden, 1,
                 hidden, c.rms_eps);
    }
    if (rows > 0) { // a step of prefill chunks only wants no logits at all
        op("lm_head", -1, [&] { matmul(w.output, selected.data(), rows, logits, pool_); });
    }
}

} // namespace kvscope::cpu
