// The CPU backend's KV cache: for every layer, K and V of every block in the
// configured formats, plus full-precision copies of the blocks a KIVI format
// has not quantised yet. Writes encode, reads decode into float tiles.
#pragma once

#include "engine/kv/block_allocator.h"
#include "engine/kv/kv_format.h"
#include "engine/runner/forward_batch.h"
#include "kernels/math/paged_slots.h"

#include <cstddef>
#include <span>
#include <unordered_map>
#include <vector>

namespace kvscope::cpu {

struct KvGeometry {
    int layers = 0; // layers per block: all of them, or a hybrid cache's group size (kv_groups.h)
    int kv_heads = 0;
    int head_dim = 0;
    int block_size = 16;
    int num_blocks = 0;
};

// One of K or V of one layer: (num_blocks, kv_heads, head_block_bytes) bytes.
struct KvPlane {
    std::byte* data = nullptr;
    kv::KvFormat format = kv::KvFormat::f32;
    bool is_key = true;
    std::int64_t head_block_bytes = 0;
    std::int64_t row_bytes = 0; // per token, for per-token formats
    int kv_heads = 0;

    std::byte* head_block(kv::BlockId block, int head) const {
        return data + math::head_block_offset(block, head, kv_heads, head_block_bytes);
    }
};

class KvStore;

// What attention needs of one layer's cache.
struct LayerKvView {
    const KvStore* store = nullptr;
    int layer = 0; // its place in the blocks (KvGeometry::layers)
    int group = 0; // whose block tables and slots it reads (ForwardBatch)
    KvPlane keys;
    KvPlane values;
    int kv_heads = 0;
    int head_dim = 0;
    int block_size = 0;

    // Rows [first, first + count) of `head` in `block`, as (count, head_dim)
    // floats: straight from the cache when it holds them as f32 (or from the
    // open block's copy), otherwise decoded into `tile`.
    const float* rows(const KvPlane& plane, kv::BlockId block, int head, int first, int count,
                      float* tile) const;
};

class KvStore {
public:
    // Throws std::invalid_argument when a format cannot hold the model's heads.
    KvStore(const KvGeometry& geometry, const kv::KvCacheFormat& format);

    const KvGeometry& geometry() const { return geometry_; }
    const kv::KvCacheFormat& format() const { return format_; }
    std::int64_t bytes() const { return static_cast<std::int64_t>(storage_.size()); }
    double bytes_per_token() const;
    std::size_t open_block_count() const { return open_.size(); }

    // Layer slot `layer` of the blocks, read through KV group `group`'s tables.
    LayerKvView layer(int layer, int group = 0);

    // Stores k, v: (tokens, kv_heads, head_dim) of layer slot `layer` into
    // the slots the batch names for `group`. KIVI blocks are quantised when their last slot
    // is written, which the causal order makes the last of their tokens.
    void write(int layer, const runner::ForwardBatch& batch, const float* k, const float* v,
               int group = 0);

    // Copies the entries in slots `from` to slots `to` in every layer, K and
    // V, reading all sources first. Per-token formats move their bytes
    // unchanged; KIVI rows are decoded and written again (re-quantised when
    // a destination block fills).
    void copy_slots(std::span<const std::int32_t> from, std::span<const std::int32_t> to);

    // One block's K/V in every layer as bytes, as stored (for a second cache
    // tier): per layer its K heads, then its V heads.
    std::int64_t block_bytes() const;
    // Copies `block` out to / in from `bytes` (block_bytes() of them). A
    // KIVI block still open (not full) has no stored form: logic_error.
    void read_block(kv::BlockId block, std::span<std::byte> bytes) const;
    void write_block(kv::BlockId block, std::span<const std::byte> bytes);

    // Forgets the open copies of blocks the KV manager freed.
    void release(std::span<const kv::BlockId> blocks);

    // The open copy of (block, layer, plane), or nullptr: (kv_heads, block_size, head_dim).
    const float* open_block(kv::BlockId block, int layer, bool is_key) const;

private:
    std::int64_t open_key(kv::BlockId block, int layer, bool is_key) const {
        return (static_cast<std::int64_t>(block) * geometry_.layers + layer) * 2 + (is_key ? 0 : 1);
    }
    void write_plane(const KvPlane& plane, int layer, std::int32_t slot, const float* src);

    KvGeometry geometry_;
    kv::KvCacheFormat format_;
    // (layers, [K, V], num_blocks, kv_heads, head_block_bytes)
    std::vector<std::byte> storage_;
    std::int64_t key_plane_bytes_ = 0;
    std::int64_t value_plane_bytes_ = 0;
    std::unordered_map<std::int64_t, std::vector<float>> open_;
};

} // namespace kvscope::cpu
