// A FIFO of block ids that also removes from the middle in O(1), its links in
// arrays indexed by block id: no allocation per push and no pointer chasing
// through heap nodes, unlike std::list, which the KV manager's free and
// cached queues spent much of a trace replay in.
#pragma once

#include "engine/kv/block_allocator.h"

#include <cstddef>
#include <vector>

namespace kvscope::kv {

class BlockQueue {
public:
    explicit BlockQueue(int num_blocks);

    bool empty() const { return size_ == 0; }
    std::size_t size() const { return size_; }
    bool contains(BlockId block) const { return queued_[index(block)] != 0; }
    BlockId front() const { return head_; } // kNone when empty

    void push_back(BlockId block); // the block must not be queued
    void erase(BlockId block);     // the block must be queued
    BlockId pop_front();           // the queue must not be empty

    static constexpr BlockId kNone = -1;

private:
    static std::size_t index(BlockId block) { return static_cast<std::size_t>(block); }

    std::vector<BlockId> next_;
    std::vector<BlockId> prev_;
    std::vector<char> queued_;
    BlockId head_ = kNone;
    BlockId tail_ = kNone;
    std::size_t size_ = 0;
};

} // namespace kvscope::kv
