// The KV events an attached engine publishes, as decoded: what the wire
// holds, nothing inferred. The typed engine events (engine/events) are made
// from these by the next layer up; an attached engine knows hashes, not
// physical blocks, owning requests or reference counts.
#pragma once

#include "profiler/attach/block_hash.h"

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace kvscope::attach {

// Where vLLM's events put a block when they name no medium (vLLM's
// MEDIUM_GPU; older versions had no medium field at all).
inline constexpr const char* kDefaultMedium = "GPU";

// Full blocks entered the prefix cache: hashes[i] covers
// token_ids[i * block_size, (i + 1) * block_size); parent is the hash of the
// block before hashes[0] (none: the prompt's first block).
struct StoredBlocks {
    std::vector<BlockHash> hashes{};
    std::optional<BlockHash> parent{};
    std::vector<std::int64_t> token_ids{};
    std::int64_t block_size = 0;
    std::optional<std::int64_t> lora_id{};
    std::string medium = kDefaultMedium;     // GPU, CPU, CPU_PINNED, DISK, ...
    std::optional<std::int64_t> group_idx{}; // KV cache group (hybrid models)
    bool operator==(const StoredBlocks&) const = default;
};

// Blocks left the cache of `medium` (evicted, or freed without caching).
// An empty medium: whichever tier of the rank holds them (TensorRT-LLM's
// removals do not say).
struct RemovedBlocks {
    std::vector<BlockHash> hashes{};
    std::string medium = kDefaultMedium;
    std::optional<std::int64_t> group_idx{};
    bool operator==(const RemovedBlocks&) const = default;
};

// The whole prefix cache was reset.
struct AllCleared {
    bool operator==(const AllCleared&) const = default;
};

// Blocks moved between cache tiers, keeping what they hold (TensorRT-LLM's
// "updated" events with a new cache level: offloaded to host memory, or
// brought back).
struct MovedBlocks {
    std::vector<BlockHash> hashes{};
    std::string from_medium;
    std::string to_medium;
    bool operator==(const MovedBlocks&) const = default;
};

using KvEvent = std::variant<StoredBlocks, RemovedBlocks, AllCleared, MovedBlocks>;

// One published message: a batch of events from one engine step.
struct KvEventBatch {
    std::string topic; // empty when the frames carry none (SGLang, replies)
    std::uint64_t sequence = 0;
    double ts = 0;                      // the publisher's wall clock, seconds since the epoch
    std::optional<std::int64_t> rank{}; // data-parallel rank, when sent
    std::vector<KvEvent> events;
};

// What decoding met, summed over messages by whoever reads a stream.
struct DecodeCounts {
    std::int64_t messages = 0;            // messages handed to the decoder
    std::int64_t events = 0;              // events decoded and kept
    std::int64_t unknown_event_types = 0; // events of a type we do not know, skipped
    std::int64_t unknown_fields = 0;      // fields we do not know, ignored
    std::int64_t malformed_events = 0;    // events dropped for a wrong shape or type
    std::int64_t rejected_messages = 0;   // messages dropped whole (frames, msgpack)

    DecodeCounts& operator+=(const DecodeCounts& other);
    bool operator==(const DecodeCounts&) const = default;
};

} // namespace kvscope::attach
