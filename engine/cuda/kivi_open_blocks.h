// Which fp32 "open slot" holds each KIVI block that is still being written.
// KIVI quantises a block only once it is full (keys per channel need all of
// its tokens), so until then the block's K and V live in full precision: on
// the CPU in a map (KvStore::write_plane), on the GPU in a side pool of slots
// (kernels::OpenBlocksView). This class is that pool's bookkeeping, on the
// host and free of CUDA so a CPU test can check it: per step it hands out
// slots to the blocks being written, reusing freed ones before growing,
// lists the blocks the step fills, and frees their slots once the step has
// quantised them.
#pragma once

#include "engine/kv/block_allocator.h"

#include <cstdint>
#include <span>
#include <vector>

namespace kvscope::cuda {

class KiviOpenBlocks {
public:
    // What one step's kernels need, copied to the device with the batch.
    struct Step {
        // (num_blocks, the constructor's; the CUDA backend's pool and its
        // spare block): the open slot kv_append writes a block's rows to,
        // -1 for blocks without one (full blocks, free blocks).
        std::vector<std::int32_t> write_slot;
        // (num_blocks, as write_slot): write_slot with this step's filled
        // blocks at -1:
        // attention reads them quantised, as finalize leaves them.
        std::vector<std::int32_t> read_slot;
        // Blocks whose last entry this step writes, in the order first seen:
        // kivi_finalize quantises them after kv_append.
        std::vector<std::int32_t> filled_blocks;
        // Slots handed to a block this step: zero them first, as the CPU
        // starts an open block from zeros.
        std::vector<std::int32_t> opened_slots;
        // Slots the device pool must hold (the most ever open at once).
        int capacity = 0;
    };

    // Throws std::invalid_argument unless num_blocks > 0.
    explicit KiviOpenBlocks(int num_blocks);

    // Plans a step writing the cache entries at `slot_mapping` (block *
    // block_size + offset): every block written gets an open slot unless it
    // has one. Throws std::invalid_argument for a slot outside the pool and
    // std::logic_error while the previous step has not ended.
    const Step& begin_step(std::span<const std::int32_t> slot_mapping, int block_size);

    // The capacity begin_step() would leave for the same arguments, without
    // changing anything: the pool can grow before the step is planned, so a
    // failed allocation leaves the bookkeeping as it was.
    int capacity_needed(std::span<const std::int32_t> slot_mapping, int block_size) const;

    // The step's kernels are enqueued: the blocks it filled are quantised
    // (in stream order) and their slots free for the next step.
    void end_step();

    // The KV manager freed these blocks: their open slots, if any, are free.
    // Throws std::invalid_argument for a block outside the pool and
    // std::logic_error during a step.
    void release(std::span<const kv::BlockId> blocks);

    int num_blocks() const { return static_cast<int>(slot_of_.size()); }
    // Slots ever handed out: the pool's size; grows only when none is free.
    int capacity() const { return capacity_; }
    // Blocks holding an open slot now.
    int open_count() const { return capacity_ - static_cast<int>(free_.size()); }
    // (num_blocks): each block's open slot now, -1 if none. Between steps it
    // is what both reads and writes see (nothing is half-filled).
    std::span<const std::int32_t> current_slots() const { return slot_of_; }

private:
    std::vector<std::int32_t> slot_of_; // (num_blocks)
    std::vector<std::int32_t> free_;    // slots to reuse, most recently freed last
    int capacity_ = 0;
    bool in_step_ = false;
    Step step_;
};

} // namespace kvscope::cuda
