// What a kernel needs of one layer of the paged KV pool, passed by value (as
// flashinfer's paged_kv_t is). The pool's bytes use the CPU KV store's layout
// (kernels/math/kv_codec_math.h, kernels/math/paged_slots.h): per plane
// (num_blocks, kv_heads, head_block_bytes).
#pragma once

#include "kernels/math/host_device.h"
#include "kernels/math/kv_format_kind.h"

#include <cstdint>

namespace kvscope::kernels {

struct KvPlaneView {
    std::uint8_t* data = nullptr; // (num_blocks, kv_heads, head_block_bytes)
    kv::KvFormat format = kv::KvFormat::f16;
    std::int64_t head_block_bytes = 0;
    std::int64_t row_bytes = 0; // per token; 0 for KIVI keys
};

// KIVI formats keep a block's entries in fp32 until the block is full (the
// residual window), then quantise it whole. Open blocks live in a side pool
// of `open_capacity` entries, each (layers, 2 [K, V], kv_heads, block_size,
// head_dim) floats.
struct OpenBlocksView {
    float* data = nullptr;
    // (num_blocks + 1: the padding rows' spare block too): where a block's
    // open copy is, -1 if none. Writes use
    // write_slot (blocks written this step, the ones they fill included);
    // reads use read_slot (the blocks still open once this step's full
    // blocks are quantised).
    const std::int32_t* write_slot = nullptr;
    const std::int32_t* read_slot = nullptr;
    int layers = 0;

    KVSCOPE_HD std::int64_t floats_per_slot(int kv_heads, int block_size, int head_dim) const {
        return static_cast<std::int64_t>(layers) * 2 * kv_heads * block_size * head_dim;
    }
};

struct PagedKvView {
    KvPlaneView keys;
    KvPlaneView values;
    OpenBlocksView open; // unused unless a plane's format is KIVI
    int layer = 0;       // the layer's slot in a block (kv_groups.h), which open_tile indexes
    int kv_heads = 0;
    int head_dim = 0;
    int block_size = 16;
    int num_blocks = 0;
    // Positions a query attends, its own included (a sliding-window layer);
    // 0: the whole context.
    int window = 0;

    // The fp32 open copy of (block's open slot, this layer, plane, head),
    // (block_size, head_dim).
    KVSCOPE_HD float* open_tile(std::int32_t open_slot, bool is_key, int head) const {
        const std::int64_t per_head = static_cast<std::int64_t>(block_size) * head_dim;
        return open.data + open_slot * open.floats_per_slot(kv_heads, block_size, head_dim) +
               ((static_cast<std::int64_t>(layer) * 2 + (is_key ? 0 : 1)) * kv_heads + head) *
                   per_head;
    }
};

// A step's batch on the device: ForwardBatch's arrays (engine/runner/forward_batch.h).
struct DeviceBatchView {
    int tokens = 0;
    int sequences = 0;
    const std::int32_t* token_ids = nullptr;           // (tokens)
    const std::int32_t* positions = nullptr;           // (tokens)
    const std::int32_t* cache_positions = nullptr;     // (tokens)
    const std::int32_t* slot_mapping = nullptr;        // (KV groups, tokens)
    const std::int32_t* sequence_of = nullptr;         // (tokens)
    const std::int32_t* block_table_offsets = nullptr; // (sequences + 1)
    const std::int32_t* block_tables = nullptr; // (KV groups, block_table_offsets[sequences])
    const std::int32_t* capture_attention_from = nullptr; // (sequences)
    const std::int64_t* capture_offsets = nullptr;        // (sequences + 1), into the capture sums
    // The KV group (kv_groups.h) whose tables the layer reads: block_tables
    // holds every sequence's table of group 0, then of group 1, ...
    int kv_group = 0;
    // Where the step's attention takes the tensor-core path over query tiles
    // (engine/cuda/query_tiles.h, tile_attention.cuh): tile i holds tokens
    // [query_tile_bounds[2i], query_tile_bounds[2i + 1]), at most
    // query_tile_tokens of them, and the per-token kernels run only the
    // untiled tokens (decodes, and other runs too short for a tile). No
    // tiles: every token takes the per-token paths.
    int query_tiles = 0;
    int query_tile_tokens = 0;
    const std::int32_t* query_tile_bounds = nullptr; // (2 * query_tiles)
    int untiled_count = 0;
    const std::int32_t* untiled_tokens = nullptr; // (untiled_count)

    // The per-token kernels' rows of grid x, and the token of row `row`.
    KVSCOPE_HD int per_token_rows() const { return query_tiles > 0 ? untiled_count : tokens; }
    KVSCOPE_HD int per_token_row_token(int row) const {
        return query_tiles > 0 ? untiled_tokens[row] : row;
    }

    // Sequence `seq`'s block table in the layer's group. The group's offset
    // is read on the device: the tables grow between replays of a captured
    // decode graph, which must not bake it in.
    KVSCOPE_HD const std::int32_t* table_of(int seq) const {
        return block_tables + static_cast<std::int64_t>(kv_group) * block_table_offsets[sequences] +
               block_table_offsets[seq];
    }
};

} // namespace kvscope::kernels
