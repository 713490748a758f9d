#include "engine/kv/block_queue.h"

#include <stdexcept>
#include <string>

namespace kvscope::kv {

BlockQueue::BlockQueue(int num_blocks)
    : next_(static_cast<std::size_t>(num_blocks), kNone)
    , prev_(static_cast<std::size_t>(num_blocks), kNone)
    , queued_(static_cast<std::size_t>(num_blocks), 0) {}

void BlockQueue::push_back(BlockId block) {
    if (contains(block)) {
        throw std::logic_error("block " + std::to_string(block) + " queued twice");
    }
    queued_[index(block)] = 1;
    prev_[index(block)] = tail_;
    next_[index(block)] = kNone;
    if (tail_ == kNone) {
        head_ = block;
    } else {
        next_[index(tail_)] = block;
    }
    tail_ = block;
    ++size_;
}

void BlockQueue::erase(BlockId block) {
    if (!contains(block)) {
        throw std::logic_error("block " + std::to_string(block) + " is not queued");
    }
    const BlockId prev = prev_[index(block)];
    const BlockId next = next_[index(block)];
    (prev == kNone ? head_ : next_[index(prev)]) = next;
    (next == kNone ? tail_ : prev_[index(next)]) = prev;
    queued_[index(block)] = 0;
    --size_;
}

BlockId BlockQueue::pop_front() {
    if (empty()) {
        throw std::logic_error("taking a block from an empty queue");
    }
    const BlockId block = head_;
    erase(block);
    return block;
}

} // namespace kvscope::kv
