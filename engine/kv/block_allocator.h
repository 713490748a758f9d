// Hands out the physical blocks of the paged KV cache. Pure bookkeeping: no
// tensors live here, so it is testable on its own and shared by every backend.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

namespace kvscope::kv {

using BlockId = std::int32_t;

class BlockAllocator {
public:
    explicit BlockAllocator(int num_blocks);

    // A free block, or nullopt when the pool is exhausted.
    std::optional<BlockId> allocate();
    // Returns `block` to the pool. Throws std::logic_error on a double free or
    // an id outside the pool, which would otherwise corrupt other sequences.
    void free(BlockId block);

    int total() const { return static_cast<int>(in_use_.size()); }
    int free_count() const { return static_cast<int>(free_.size()); }
    int used_count() const { return total() - free_count(); }
    bool in_use(BlockId block) const { return in_use_.at(static_cast<std::size_t>(block)); }

private:
    std::deque<BlockId> free_; // lowest ids first, so fresh pools fill in order
    std::vector<bool> in_use_;
};

// A block table's entry for a block a sliding-window group let go (its
// tokens left the window): nothing is read there.
inline constexpr BlockId kNoBlock = -1;

// The KV blocks of one sequence: per KV group (kv_groups.h), a block table
// whose entry i holds the group's layers' K/V of tokens [i * block_size,
// (i + 1) * block_size). Every group's table is as long as the first's.
struct SequenceBlocks {
    std::vector<BlockId> block_table;               // group 0's (the only one of a plain cache)
    std::vector<std::vector<BlockId>> other_tables; // groups 1.. of a hybrid cache
    std::int32_t length = 0;                        // tokens whose K/V are in the cache
    // Prefix-cache hashes of its full blocks, in order (the chain's parents).
    std::vector<std::uint64_t> block_hashes;
    // False once its K/V no longer equal a full-context run's (an eviction
    // policy dropped tokens): its later blocks must not be shared.
    bool cacheable = true;

    std::int32_t capacity(int block_size) const {
        return static_cast<std::int32_t>(block_table.size()) * block_size;
    }
    int groups() const { return 1 + static_cast<int>(other_tables.size()); }
    // Gives an empty sequence a table per group (the backend's kv_groups()).
    void set_groups(int groups) {
        other_tables.resize(static_cast<std::size_t>(groups > 1 ? groups - 1 : 0));
    }
    std::vector<BlockId>& table(int group) {
        return group == 0 ? block_table : other_tables[static_cast<std::size_t>(group - 1)];
    }
    const std::vector<BlockId>& table(int group) const {
        return group == 0 ? block_table : other_tables[static_cast<std::size_t>(group - 1)];
    }
};

// Grows `sequence` to hold `new_length` tokens, in each of its groups' tables
// (none lets blocks go: kv_manager.h does that). All or nothing: when the
// pool runs out, blocks taken by this call are returned and false comes back.
bool reserve(SequenceBlocks& sequence, std::int32_t new_length, int block_size,
             BlockAllocator& allocator);

// Frees every block of `sequence` and empties it.
void release(SequenceBlocks& sequence, BlockAllocator& allocator);

} // namespace kvscope::kv
