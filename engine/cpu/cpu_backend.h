// The CPU backend: runs a Llama-family model over a ForwardBatch in fp32, on
// all cores, with K/V in a paged cache it owns, stored in the formats chosen.
#pragma once

#include "engine/cpu/cpu_weights.h"
#include "engine/cpu/kv_store.h"
#include "engine/cpu/paged_attention.h"
#include "engine/cpu/thread_pool.h"
#include "engine/model/llama_model.h"
#include "engine/runner/backend.h"
#include "engine/runner/captured_attention.h"

#include <memory>
#include <vector>

namespace kvscope::cpu {

struct CpuBackendOptions {
    int num_blocks = 1024;
    int block_size = 16;
    int threads = 0; // 0: all hardware threads
    kv::KvCacheFormat cache_format;
    // Give sliding-window layers their own block tables, which let go of
    // what the window left (kv_groups.h); off: every layer keeps the whole
    // context, as a plain paged cache does.
    bool hybrid_kv = true;
};

class CpuBackend final : public runner::Backend {
public:
    // Allocates the KV cache; throws std::bad_alloc / std::invalid_argument.
    CpuBackend(std::shared_ptr<const model::LlamaModel> model, const CpuBackendOptions& options);

    std::string name() const override { return "cpu"; }
    int vocab_size() const override { return model_->config().vocab; }
    int block_size() const override { return options_.block_size; }
    int layers() const override { return model_->config().layers; }
    int num_blocks() const override { return options_.num_blocks; }
    int threads() const { return pool_.size(); }
    std::int64_t kv_cache_bytes() const override { return kv_.bytes(); }
    kv::KvCacheFormat cache_format() const override { return kv_.format(); }
    const KvStore& kv_store() const { return kv_; }
    kv::KvGroupLayout kv_groups() const override { return groups_; }

    void forward(const runner::ForwardBatch& batch, float* logits) override;
    void release_blocks(std::span<const kv::BlockId> blocks) override { kv_.release(blocks); }
    std::int64_t block_bytes() const override { return kv_.block_bytes(); }
    void read_block(kv::BlockId block, std::span<std::byte> bytes) const override {
        kv_.read_block(block, bytes);
    }
    void write_block(kv::BlockId block, std::span<const std::byte> bytes) override {
        kv_.write_block(block, bytes);
    }
    std::span<const float> captured_attention(std::size_t s) const override {
        return captured_.of(s);
    }
    void copy_slots(std::span<const std::int32_t> from, std::span<const std::int32_t> to) override {
        kv_.copy_slots(from, to);
    }

private:
    std::shared_ptr<const model::LlamaModel> model_;
    std::shared_ptr<const CpuWeights> weights_; // shared with the model's other CPU backends
    CpuBackendOptions options_;
    kv::KvGroupLayout groups_;
    ThreadPool pool_;
    KvStore kv_;
    runner::CapturedAttention captured_; // in the last forward()
    // Per-step activations, reused from step to step.
    struct RopeTable {
        float base = 0.0f;
        std::vector<float> cos, sin; // (tokens, head_dim / 2)
    };
    struct Scratch {
        std::vector<float> x, h, q, k, v, attn, gate, up, selected;
        std::vector<RopeTable> rope;
    } scratch_;
};

} // namespace kvscope::cpu
