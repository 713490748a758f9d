// The boundary between the engine and the hardware: a backend owns the KV
// storage and runs the model over a ForwardBatch. The CPU backend is one; the
// CUDA backend implements the same interface.
#pragma once

#include "engine/kv/kv_format.h"
#include "engine/kv/kv_groups.h"
#include "engine/runner/device_memory.h"
#include "engine/runner/forward_batch.h"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace kvscope::runner {

// Told about each op a backend runs, when timing is wanted: the CPU
// backend's per-op slices, so a timeline means as much without a GPU.
class OpObserver {
public:
    virtual ~OpObserver() = default;
    // `layer` is -1 for ops outside the layers (the output head); `cpu_ns`
    // is the CPU time the calling thread ran in the op, 0 when not measured
    // (a GPU's kernels).
    virtual void on_op(std::string_view name, int layer, std::int64_t begin_ns, std::int64_t end_ns,
                       std::int64_t cpu_ns) = 0;
};

// How one logit row picks its token on the device: sampling::pick_token's
// rule with these filters and this draw (from the request's generator).
struct RowSampling {
    float temperature = 0.0f; // <= 0: greedy
    int top_k = 0;
    float top_p = 1.0f;
    float min_p = 0.0f;
    double uniform = 0.0; // in [0, 1)
};

class Backend {
public:
    virtual ~Backend() = default;

    // Null (the default) turns op timing off.
    void set_op_observer(OpObserver* observer) { op_observer_ = observer; }

    virtual std::string name() const = 0;
    virtual int vocab_size() const = 0;
    virtual int block_size() const = 0;
    // The model's layers, for a ForwardBatch that runs only some of them; 0
    // when this backend runs none (the simulator).
    virtual int layers() const { return 0; }
    virtual int num_blocks() const = 0;
    // How the layers share the blocks (kv_groups.h): one group of every
    // layer unless the backend keeps a hybrid cache.
    virtual kv::KvGroupLayout kv_groups() const;
    virtual kv::KvCacheFormat cache_format() const = 0;
    // Bytes of the whole KV pool (every block, K and V, all layers).
    virtual std::int64_t kv_cache_bytes() const = 0;

    // Runs the model over `batch`: writes the K/V of its tokens into their
    // slots, attends causally over each sequence's cached tokens, and writes
    // the logits of batch.logit_tokens to `logits` as
    // (logit_tokens.size(), vocab_size()) row-major.
    virtual void forward(const ForwardBatch& batch, float* logits) = 0;

    // The KV manager freed these blocks: state a backend keeps per block
    // beyond the cache itself (KIVI's open blocks) can go.
    virtual void release_blocks(std::span<const kv::BlockId> blocks) = 0;

    // After forward(): for sequence `s` of the batch, the attention
    // probability each of its cache entries received, summed over layers,
    // heads and the capturing query tokens; empty when it captured none.
    virtual std::span<const float> captured_attention(std::size_t s) const {
        (void)s;
        return {};
    }

    // Copies cache entries between slots (every layer, K and V): the
    // compaction after token eviction. Reads all sources before writing any
    // destination, so the copies may overlap.
    virtual void copy_slots(std::span<const std::int32_t> from,
                            std::span<const std::int32_t> to) = 0;

    // A block's K/V in every layer as bytes, for a second cache tier (KV
    // offloading); 0 when this backend cannot move blocks out.
    virtual std::int64_t block_bytes() const { return 0; }
    // Copies a full block out to / in from `bytes` (block_bytes() long).
    // Throws std::logic_error where block_bytes() is 0.
    virtual void read_block(kv::BlockId block, std::span<std::byte> bytes) const;
    virtual void write_block(kv::BlockId block, std::span<const std::byte> bytes);

    // How much of each step's ForwardBatch this backend reads.
    virtual BatchDetail batch_detail() const { return BatchDetail::full; }

    // Whether forward_sampled() picks tokens where the logits are, so a step
    // hands back token ids instead of logits (the CUDA backend).
    virtual bool samples_on_device() const { return false; }

    // forward(), then for each logit row the token `rows[row]` picks by
    // sampling::pick_token's rule, into tokens (logit_tokens.size()). This
    // default computes the logits here and picks on the host, the reference
    // a device sampler must agree with.
    virtual void forward_sampled(const ForwardBatch& batch, std::span<const RowSampling> rows,
                                 std::int32_t* tokens);

    // A GPU backend's use of its device now; none for host backends.
    virtual std::optional<DeviceMemory> device_memory() const { return std::nullopt; }

    // Times the backend saturated an activation past fp16's range on its way
    // into a linear layer, over every step so far: the CUDA backend feeds its
    // matrix products fp16, where a model whose activations grow past 65504
    // computes on clamped values. A value computed again (a self-draft's
    // layers, a recomputed prompt, a decode graph's padding rows, which
    // decode token 0 at position 0) counts again. 0 for backends that keep
    // activations in fp32.
    virtual std::int64_t activation_overflows() const { return 0; }

protected:
    OpObserver* op_observer_ = nullptr;
};

} // namespace kvscope::runner
