// The CUDA backend: the same forward pass as the CPU backend (every
// architecture of model/architecture.h, a hybrid cache's groups), on one
// GPU. Weights in fp16 (CudaWeights), linear layers through cuBLAS, the rest
// through the kernels of kernels/, K/V in a paged pool laid out as the CPU
// KvStore's, in the same formats, encoded by the same shared math. One
// non-blocking stream; a step synchronises once, to hand back its logits.
#pragma once

#include "engine/cuda/cublas_linear.h"
#include "engine/cuda/cuda_stream.h"
#include "engine/cuda/cuda_weights.h"
#include "engine/cuda/decode_graphs.h"
#include "engine/cuda/device_buffer.h"
#include "engine/cuda/kivi_open_blocks.h"
#include "engine/model/llama_model.h"
#include "engine/runner/backend.h"
#include "engine/runner/captured_attention.h"
#include "kernels/math/rope_math.h"
#include "kernels/paged_attention.cuh"
#include "kernels/paged_kv_view.cuh"
#include "kernels/rope_kv_write.cuh"
#include "kernels/wide_row_fetch.h"

#include <cstddef>
#include <cstdint>
#include <cuda_fp16.h>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kvscope::cuda {

struct CudaBackendOptions {
    int num_blocks = 1024;
    int block_size = 16;
    kv::KvCacheFormat cache_format;
    int device = 0; // CUDA device index
    // Replay plain decode steps from captured CUDA graphs (bucketed batch
    // sizes); off: every step launches its kernels one by one.
    bool cuda_graphs = true;
    // Layers grouped by attention kind, each group with its own block
    // tables (kv_groups.h), where the model has sliding-window layers; off:
    // one group of every layer (a plain cache; the windows still apply).
    bool hybrid_kv = true;
    // The decode kernels (kernels/dependent_launch.cuh's launch_kernel: the
    // norms, GEMV, RoPE + KV write, vector attention and its merge, ...) may
    // start while the kernel before them ends (programmatic dependent
    // launch), where the device and the build can (launch_overlap.h); off,
    // and for cuBLAS and the other kernels: strictly in turn.
    bool overlap_launches = true;
    // How the vector attention path reads 16-bit K and V rows: into
    // registers, or through a shared-memory ring (kernels/wide_row_fetch.h).
    kernels::WideRowFetch wide_row_fetch = kernels::WideRowFetch::registers;
    // Steps of prefill chunks take the tensor-core attention over query tiles
    // (kernels/tile_attention.cuh) where the cache fits it; off: every token
    // through the vector path, as decodes are.
    bool tile_prefill = true;
    // Linear layers of 9 to 64 tokens on tensor cores (kernels/tile_gemm.cuh);
    // off: through cuBLAS.
    bool tile_gemm = true;
};

class CudaBackend final : public runner::Backend {
public:
    // Uploads the weights (once per model) and allocates the zeroed KV pool.
    // Throws std::invalid_argument (bad geometry, a format that cannot hold
    // the model's heads), std::runtime_error (the pool does not fit in the
    // device's free memory) or kernels::CudaError (no usable device).
    CudaBackend(std::shared_ptr<const model::LlamaModel> model, const CudaBackendOptions& options);
    ~CudaBackend() override;
    CudaBackend(const CudaBackend&) = delete;
    CudaBackend& operator=(const CudaBackend&) = delete;

    std::string name() const override { return "cuda"; }
    int vocab_size() const override { return model_->config().vocab; }
    int block_size() const override { return options_.block_size; }
    int layers() const override { return model_->config().layers; }
    int num_blocks() const override { return options_.num_blocks; }
    kv::KvCacheFormat cache_format() const override { return options_.cache_format; }
    kv::KvGroupLayout kv_groups() const override { return groups_; }
    // The KV manager's blocks (the spare padding block not counted).
    std::int64_t kv_cache_bytes() const override {
        return (key_plane_bytes_ + value_plane_bytes_) / (options_.num_blocks + 1) *
               options_.num_blocks * groups_.layers_per_block;
    }
    // Decode graphs captured so far and steps replayed from them (tests).
    std::size_t decode_graph_count() const { return graphs_.size(); }
    std::int64_t decode_graph_replays() const { return graphs_.replays(); }
    // Steps whose attention ran over query tiles (tests).
    std::int64_t tiled_steps() const { return tiled_steps_; }
    const std::string& device_name() const { return device_name_; }
    // The options that differ from the defaults (CudaBackendOptions), in
    // words, comma-separated; empty when none does: which kernels a run
    // took, for its description (session::describe_backend).
    std::string changed_paths() const;
    int device() const { return options_.device; }

    // Throws std::invalid_argument for a batch that would address outside
    // the pool or the vocabulary (checked on the host: on the device such a
    // batch would corrupt memory silently), kernels::CudaError or
    // CublasError when the device fails.
    void forward(const runner::ForwardBatch& batch, float* logits) override;
    // Samples on the device (kernels/sampling.cuh): a step copies back token
    // ids, not (rows, vocab) logits.
    bool samples_on_device() const override { return true; }
    void forward_sampled(const runner::ForwardBatch& batch,
                         std::span<const runner::RowSampling> rows, std::int32_t* tokens) override;
    void release_blocks(std::span<const kv::BlockId> blocks) override;
    std::span<const float> captured_attention(std::size_t s) const override {
        return captured_.of(s);
    }
    // Synchronous: returns once the copies are done.
    void copy_slots(std::span<const std::int32_t> from, std::span<const std::int32_t> to) override;
    // A block's bytes laid out as the CPU KvStore's (per layer its K run,
    // then its V run), so either backend's tier holds the same bytes.
    // Synchronous, through pageable host memory: what a copy to the offload
    // tier costs is what it measures.
    std::int64_t block_bytes() const override {
        return (key_plane_bytes_ + value_plane_bytes_) / (options_.num_blocks + 1) *
               groups_.layers_per_block;
    }
    void read_block(kv::BlockId block, std::span<std::byte> bytes) const override;
    void write_block(kv::BlockId block, std::span<const std::byte> bytes) override;

    // cudaMemGetInfo and the buffers this backend holds.
    std::optional<runner::DeviceMemory> device_memory() const override;
    std::int64_t activation_overflows() const override { return activation_overflows_; }

private:
    // run_step, refusing every step after one failed on the device.
    void guarded_step(const runner::ForwardBatch& batch, float* logits,
                      std::span<const runner::RowSampling> sampling, std::int32_t* tokens);
    // Runs `work` (a step or a slot copy) unless an earlier one failed on the
    // device; a failure after device_work_started_ stops the backend.
    template <class Work>
    void run_guarded(Work&& work);
    void copy_slots_unguarded(std::span<const std::int32_t> from, std::span<const std::int32_t> to);
    // Checks a block copy's arguments; throws std::invalid_argument.
    void check_block_copy(const char* what, kv::BlockId block, std::size_t bytes) const;
    // Copies `block`'s K and V runs of every layer out to `to_host`, or in
    // from `from_host` (the other null; block_bytes() long), on the stream,
    // then waits for them.
    void copy_block_runs(kv::BlockId block, std::byte* to_host, const std::byte* from_host) const;
    // forward() and forward_sampled(): logits to `logits`, or (rows given)
    // the sampled tokens to `tokens`. A step is planned, its buffers
    // reserved, its arrays staged and uploaded, its kernels enqueued (or its
    // decode graph replayed), and its results read back, a function each.
    void run_step(const runner::ForwardBatch& requested, float* logits,
                  std::span<const runner::RowSampling> sampling, std::int32_t* sampled_tokens);
    struct StepPlan;
    struct DeviceStep;
    // Decides everything about the step before anything changes.
    StepPlan plan_step(const runner::ForwardBatch& requested,
                       std::span<const runner::RowSampling> sampling, bool sampled) const;
    // Every allocation the step needs: a failure then leaves the open-block
    // bookkeeping and the previous buffers as they were.
    void reserve_step(const StepPlan& plan, std::span<const runner::RowSampling> sampling);
    // Packs the step's arrays (and KIVI's open-block plan) and uploads them.
    DeviceStep stage_step(const StepPlan& plan, std::span<const runner::RowSampling> sampling);
    // The model's kernels on the stream, or the bucket's graph replayed.
    void enqueue_step(const StepPlan& plan, const DeviceStep& step);
    void enqueue_model(const StepPlan& plan, const DeviceStep& step,
                       const kernels::AttentionWorkspace& workspace);
    void enqueue_layer(int layer, const StepPlan& plan, const DeviceStep& step,
                       const kernels::AttentionWorkspace& workspace);
    // Samples (forward_sampled) or downloads the logits, and the attention
    // capture, then waits for the stream.
    void read_back(const StepPlan& plan, const DeviceStep& step, float* logits,
                   std::int32_t* sampled_tokens);
    // The kernels' view of model layer `layer`'s K/V in the pool (its slot in
    // its group's blocks, its window), with the open blocks' slot arrays
    // given (null when no plane is KIVI).
    kernels::PagedKvView layer_view(int layer, const std::int32_t* write_slot,
                                    const std::int32_t* read_slot) const;
    // The view of layer slot `slot` of every block (no window): what block
    // copies move.
    kernels::PagedKvView slot_view(int slot, const std::int32_t* write_slot,
                                   const std::int32_t* read_slot) const;
    // The angle table of RoPE base `base` (empty when the cache takes the
    // unfused path).
    kernels::RopeTableView rope_table_of(float base) const;
    bool has_kivi_plane() const { return open_blocks_.has_value(); }
    void validate(const runner::ForwardBatch& batch) const;
    // Makes room in the open pool for `slots` slots, keeping its contents.
    void reserve_open_slots(int slots);
    // Zeroes the open slots just handed out (the CPU starts them from zeros).
    void zero_open_slots(const std::vector<std::int32_t>& slots);
    // Waits until the last upload has read the pinned staging buffer.
    void wait_for_staging();
    // Copies `bytes` of staging to the device batch buffer, in stream order.
    void upload_staging(std::size_t bytes);
    std::int64_t activation_bytes() const;
    // The device buffers a captured graph addresses.
    std::vector<const void*> graph_addresses() const;

    // One op in an NVTX range; timed with events when an observer listens.
    template <class Run>
    void op(const char* name, int layer, Run&& run);
    int next_timing_event();
    // Records timing event `index` on the stream, as a node of the graph
    // when the stream is being captured.
    void record_timing_event(int index);
    void report_ops();

    std::shared_ptr<const model::LlamaModel> model_;
    CudaBackendOptions options_;
    std::string device_name_;
    CudaStream stream_;
    CublasHandle cublas_;
    std::shared_ptr<const CudaWeights> weights_; // shared with the model's other CUDA backends

    // How the layers share blocks: each layer's group and slot.
    kv::KvGroupLayout groups_;
    // (layers_per_block, [K, V], num_blocks + 1, kv_heads, head_block_bytes):
    // the CPU KvStore's layout, so both address it through
    // kernels/math/paged_slots.h.
    // Block num_blocks is a spare the KV manager never hands out: padded
    // decode rows (decode_padding.h) write there.
    DeviceBuffer<std::uint8_t> pool_;
    std::int64_t key_plane_bytes_ = 0;   // one layer's K plane
    std::int64_t value_plane_bytes_ = 0; // one layer's V plane
    std::int64_t max_copy_pitch_ = 0;    // the largest pitch cudaMemcpy2D takes here
    int multiprocessors_ = 1;            // the device's, for the attention's split length
    bool overlap_launches_ = false;      // asked for, and the device can
    // cos and sin of RoPE per (position, pair) below the trained context, the
    // CPU's angles computed once (kernels/rope_kv_write.cuh), a table per
    // RoPE base the layers use (Gemma 3: two); only for 16-bit caches, whose
    // RoPE and KV write are one kernel (empty otherwise).
    struct RopeAngles {
        float base = 0.0f;
        DeviceBuffer<math::RopeCosSin> angles;
    };
    std::vector<RopeAngles> rope_angles_;
    // Llama 3's per-pair RoPE frequency divisors (the config's), for the
    // kernels that compute angles themselves; empty for other models.
    DeviceBuffer<float> rope_divisors_;
    const float* rope_divisors_or_null() const {
        return rope_divisors_.bytes() > 0 ? rope_divisors_.data() : nullptr;
    }
    int rope_positions_ = 0;
    bool rope_halves_ = false; // pairs (i, i + head_dim/2): math::rope_pair_dims
    // How attention splits may be cut, for steps without and with attention
    // capture (kernels/paged_attention.cuh).
    kernels::AttentionSplitLimits step_splits_;
    kernels::AttentionSplitLimits capture_splits_;
    kernels::AttentionSplitLimits tile_splits_;
    int tile_tokens_ = 0; // tokens per query tile; 0: the tile path does not fit
    std::int64_t tiled_steps_ = 0;
    // Op timing, only while an observer is set: events recorded around each
    // op, read back after the step's synchronisation.
    struct TimedOp {
        const char* name;
        int layer;
        int begin; // index into timing_events_
        int end;
    };
    std::vector<CudaEvent> timing_events_;
    int timing_events_used_ = 0;
    std::vector<TimedOp> timed_ops_;
    // A timed decode graph's ops, listed when it was captured: its event
    // record nodes hold the same events (never freed while the backend lives).
    struct TimedGraphOps {
        std::vector<TimedOp> ops;
        int events_used = 0;
    };
    std::map<DecodeGraphKey, TimedGraphOps> timed_graph_ops_;
    std::int64_t anchor_host_ns_ = 0; // the host clock when timing_events_[0] was recorded
    // After the timing events: timed graphs hold them, so the graphs go first.
    DecodeGraphs graphs_;
    std::string failure_;              // why a step failed on the device; empty while all is well
    bool device_work_started_ = false; // this step or copy has changed device or bookkeeping
    // KIVI's fp32 open blocks: (open slots, layers, [K, V], kv_heads,
    // block_size, head_dim) floats; bookkeeping only when a plane is KIVI.
    std::optional<KiviOpenBlocks> open_blocks_;
    DeviceBuffer<float> open_pool_;
    int open_pool_slots_ = 0;

    // A step's arrays: packed in pinned memory, uploaded in one copy.
    PinnedBuffer<std::byte> staging_;
    DeviceBuffer<std::byte> batch_arrays_;
    CudaEvent staging_read_{false}; // recorded after each upload from staging_

    // Per-step activations, grown to the largest batch so far and kept.
    struct Activations {
        DeviceBuffer<float> x;       // (tokens, hidden): the residual stream
        DeviceBuffer<float> h;       // (tokens, hidden): a block's output before its post-norm
        DeviceBuffer<float> qkv;     // (tokens, (heads + 2 kv_heads) * head_dim): fused QKV
        DeviceBuffer<float> q;       // (tokens, heads, head_dim): the attention's queries
        DeviceBuffer<float> k;       // (tokens, kv_heads, head_dim): unfused path only
        DeviceBuffer<float> v;       // (tokens, kv_heads, head_dim): unfused path only
        DeviceBuffer<float> gate_up; // (tokens, 2 ffn_hidden): gate, then up, per token
        // (tokens, max(hidden, heads * head_dim)): the input of the linear
        // layers but the down one, written by the kernel before it (a norm,
        // the attention)
        DeviceBuffer<__half> x_half;
        // (tokens, ffn_hidden): the down layer's input, the gated activation,
        // apart from x_half, which the gate/up GEMV that writes it reads
        DeviceBuffer<__half> ffn_half;
        DeviceBuffer<float>
            workspace;                // AttentionWorkspace::floats(tokens, heads, splits, head_dim)
        DeviceBuffer<float> selected; // (logit rows, hidden)
        DeviceBuffer<float> logits;   // (logit rows, vocab)
        DeviceBuffer<float> capture;  // (sum of context lengths): attention sums
        DeviceBuffer<std::uint8_t> sample_scratch; // sampling_scratch_bytes(rows, vocab)
        DeviceBuffer<std::int32_t> tokens;         // (logit rows): sampled tokens
        // copy_slots' scratch
        DeviceBuffer<std::uint8_t> copy_rows; // (count, kv_heads, K row_bytes + V row_bytes)
        DeviceBuffer<float> copy_keys;        // (count, kv_heads, head_dim)
        DeviceBuffer<float> copy_values;      // (count, kv_heads, head_dim)
    } act_;
    PinnedBuffer<float> download_;               // logits, then the capture sums
    PinnedBuffer<std::int32_t> download_tokens_; // sampled tokens
    // Where a step's fp16 writes count the values they saturate
    // (kernels/activation_overflow.h), its copy, and the running total.
    DeviceBuffer<unsigned int> overflows_;
    PinnedBuffer<unsigned int> download_overflows_;
    std::int64_t activation_overflows_ = 0;

    runner::CapturedAttention captured_; // in the last forward()
};

} // namespace kvscope::cuda
