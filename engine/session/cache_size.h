// How big the KV cache is, as one notion with vLLM's knob names where they
// mean the same. A run states at most one of: a block count
// (--num-gpu-blocks-override), a byte size (--kv-cache-memory-bytes), a
// fraction of the backend's memory (--gpu-memory-utilization: of free device
// memory on a GPU, of a stated budget on the CPU) or a token count
// (--cache-tokens); with none, the run's own need decides. The CLI and the
// app both resolve it here, against the model's shape and the KV formats.
#pragma once

#include "engine/kv/kv_format.h"
#include "engine/model/llama_config.h"

#include <cstdint>
#include <string>

namespace kvscope::session {

struct CacheSize {
    int num_blocks = 0;            // --num-gpu-blocks-override; 0: not given
    std::int64_t memory_bytes = 0; // --kv-cache-memory-bytes; 0: not given
    double memory_utilization = 0; // --gpu-memory-utilization, in (0, 1]; 0: not given
    std::int64_t budget_bytes = 0; // CPU: what the utilization is a share of (0: available RAM)
    std::int64_t tokens = 0;       // --cache-tokens; 0: not given

    // Empty when at most one size is given and it is in range; else why not.
    std::string problem() const;
    // "256 blocks", "512.0 MiB", "90% of free memory", "8192 tokens", or
    // "what the run needs".
    std::string describe() const;
    bool given() const;
};

// Bytes one block of `block_size` tokens takes, K and V, in every layer it
// holds: all of them, or a hybrid cache's group of layers (`hybrid`, for a
// model with sliding-window layers).
std::int64_t kv_block_bytes(const model::LlamaConfig& model, const kv::KvCacheFormat& format,
                            int block_size, bool hybrid = true);

// The block count `size` asks for. `default_tokens` is the run's own need
// (used when no size is given); `memory_bytes_available` is what the
// utilization is a share of (free device memory, or the CPU budget).
// A token count gives every KV group room for that many tokens (a hybrid
// cache's sliding groups need less once their windows fill, which the
// blocks they let go then serve). Throws std::runtime_error saying what to
// change when a size given holds fewer than 2 blocks.
int resolve_num_blocks(const CacheSize& size, const model::LlamaConfig& model,
                       const kv::KvCacheFormat& format, int block_size, std::int64_t default_tokens,
                       std::int64_t memory_bytes_available, bool hybrid = true);

// Memory the machine could still give (MemAvailable), for the CPU budget.
std::int64_t available_host_memory_bytes();

std::string readable_bytes(std::int64_t bytes); // "360.0 KiB", "12.5 MiB", "1.2 GiB"

} // namespace kvscope::session
