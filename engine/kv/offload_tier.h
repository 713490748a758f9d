// A second tier for the KV cache (KV offloading, as vLLM's CPU offloading
// and SGLang's hierarchical cache): full blocks' bytes kept by their prefix
// hash after the pool lets them go, in host memory or in a file on disk
// written and read with real I/O, so a later prefix hit can load them back
// instead of computing them again. Fixed capacity in blocks; when full, the
// least recently used block goes. Bytes only: which hashes chain into a
// prefix is the KV manager's to know.
#pragma once

#include "engine/kv/block_hash.h"

#include <absl/container/flat_hash_map.h>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace kvscope::kv {

enum class TierMedium { memory, file };

struct OffloadTierConfig {
    TierMedium medium = TierMedium::memory;
    // TierMedium::file: created (empty: a new one in the temporary
    // directory), and removed at the end.
    std::filesystem::path file;
    std::int64_t capacity_blocks = 0;
    std::int64_t block_bytes = 0;
};

struct OffloadTierStats {
    std::int64_t writes = 0; // blocks stored
    std::int64_t reads = 0;  // blocks loaded back
    std::int64_t evictions = 0;
    std::int64_t bytes_written = 0;
    std::int64_t bytes_read = 0;
    double write_seconds = 0;
    double read_seconds = 0;
};

class OffloadTier {
public:
    // Throws std::invalid_argument for a zero capacity or block size, and
    // std::system_error naming the file when it cannot be created.
    explicit OffloadTier(const OffloadTierConfig& config);
    ~OffloadTier();
    OffloadTier(const OffloadTier&) = delete;
    OffloadTier& operator=(const OffloadTier&) = delete;

    const OffloadTierConfig& config() const { return config_; }
    std::int64_t size() const { return static_cast<std::int64_t>(slot_of_.size()); }
    const OffloadTierStats& stats() const { return stats_; }

    bool contains(BlockHash hash) const { return slot_of_.contains(hash); }
    // A failed write (a full disk): the file's error, and the block evicted
    // to make room for it, which is gone all the same.
    struct WriteFailed : std::system_error {
        WriteFailed(const std::system_error& error, std::optional<BlockHash> evicted_hash)
            : std::system_error(error)
            , evicted(evicted_hash) {}
        std::optional<BlockHash> evicted;
    };

    // Stores `bytes` (block_bytes of them) under `hash`, replacing what it
    // held; returns the hash of the block it evicted to make room, if any.
    // Throws WriteFailed naming the file when the write fails, leaving the
    // tier without `hash`.
    std::optional<BlockHash> put(BlockHash hash, std::span<const std::byte> bytes);
    // Copies the block under `hash` into `bytes` and makes it the most
    // recently used; false when the tier does not hold it. A file tier's
    // block that cannot be read back whole (the file was truncated) or whose
    // bytes are not those written (the file was changed: each block's
    // checksum is kept in memory) is dropped from the tier, and
    // std::system_error names the file and what went wrong: a reader
    // computes the prefix instead of attending to other bytes.
    bool get(BlockHash hash, std::span<std::byte> bytes);
    void erase(BlockHash hash);
    // Makes `hash`, if held, the most recently used.
    void touch(BlockHash hash);

private:
    void write_slot(std::int64_t slot, std::span<const std::byte> bytes);
    void read_slot(std::int64_t slot, std::span<std::byte> bytes);
    static std::size_t checksum(std::span<const std::byte> bytes);

    struct Entry {
        BlockHash hash;
        std::int64_t slot;
        std::size_t checksum = 0; // of the bytes written (file tier)
    };
    OffloadTierConfig config_;
    std::list<Entry> lru_; // front: most recently used
    absl::flat_hash_map<BlockHash, std::list<Entry>::iterator> slot_of_;
    std::vector<std::int64_t> free_slots_;
    std::unique_ptr<std::byte[]> memory_; // TierMedium::memory
    int fd_ = -1;                         // TierMedium::file
    OffloadTierStats stats_;
};

std::string_view tier_medium_name(TierMedium medium); // "memory", "file"

} // namespace kvscope::kv
