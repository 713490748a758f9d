#include "engine/session/cache_size.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <unistd.h>

namespace kvscope::session {

bool CacheSize::given() const {
    return num_blocks > 0 || memory_bytes > 0 || memory_utilization > 0 || tokens > 0;
}

std::string CacheSize::problem() const {
    const int stated =
        (num_blocks > 0) + (memory_bytes > 0) + (memory_utilization > 0) + (tokens > 0);
    if (stated > 1) {
        return "give the KV-cache size one way: --num-gpu-blocks-override, "
               "--kv-cache-memory-bytes, --gpu-memory-utilization or --cache-tokens";
    }
    if (num_blocks < 0 || memory_bytes < 0 || tokens < 0 || budget_bytes < 0) {
        return "a KV-cache size cannot be negative";
    }
    if (memory_utilization < 0 || memory_utilization > 1) {
        return "--gpu-memory-utilization is a fraction between 0 and 1";
    }
    return {};
}

std::string CacheSize::describe() const {
    if (num_blocks > 0) {
        return std::to_string(num_blocks) + " blocks";
    }
    if (memory_bytes > 0) {
        return readable_bytes(memory_bytes);
    }
    if (memory_utilization > 0) {
        char text[64];
        std::snprintf(text, sizeof text, "%.0f%% of %s", 100 * memory_utilization,
                      budget_bytes > 0 ? readable_bytes(budget_bytes).c_str() : "free memory");
        return text;
    }
    if (tokens > 0) {
        return std::to_string(tokens) + " tokens";
    }
    return "what the run needs";
}

std::int64_t kv_block_bytes(const model::LlamaConfig& model, const kv::KvCacheFormat& format,
                            int block_size, bool hybrid) {
    const int layers = model::kv_group_layout(model, hybrid).layers_per_block;
    return static_cast<std::int64_t>(std::llround(
        kv::kv_bytes_per_token(format, layers, model.kv_heads, model.head_dim, block_size) *
        block_size));
}

int resolve_num_blocks(const CacheSize& size, const model::LlamaConfig& model,
                       const kv::KvCacheFormat& format, int block_size, std::int64_t default_tokens,
                       std::int64_t memory_bytes_available, bool hybrid) {
    if (const std::string problem = size.problem(); !problem.empty()) {
        throw std::runtime_error(problem);
    }
    if (block_size < 1) {
        throw std::runtime_error("the block size must be at least 1 token");
    }
    const std::int64_t block_bytes =
        std::max<std::int64_t>(1, kv_block_bytes(model, format, block_size, hybrid));
    std::int64_t blocks = 0;
    std::string asked;
    if (size.num_blocks > 0) {
        blocks = size.num_blocks;
        asked = std::to_string(size.num_blocks) + " blocks";
    } else if (size.memory_bytes > 0) {
        blocks = size.memory_bytes / block_bytes;
        asked = "a KV cache of " + readable_bytes(size.memory_bytes);
    } else if (size.memory_utilization > 0) {
        const std::int64_t budget =
            size.budget_bytes > 0 ? size.budget_bytes : memory_bytes_available;
        blocks = static_cast<std::int64_t>(size.memory_utilization * static_cast<double>(budget)) /
                 block_bytes;
        asked = "a KV cache of " + readable_bytes(static_cast<std::int64_t>(
                                       size.memory_utilization * static_cast<double>(budget)));
    } else {
        const std::int64_t tokens = size.tokens > 0 ? size.tokens : default_tokens;
        blocks = (tokens + block_size - 1) / block_size *
                 model::kv_group_layout(model, hybrid).group_count();
        asked = "a KV cache of " + std::to_string(tokens) + " tokens";
    }
    // A size the user gave must leave room to page (2 blocks); the run's
    // own need may be a single block (a one-token benchmark).
    if (blocks < (size.given() ? 2 : 1)) {
        throw std::runtime_error(
            asked + " holds fewer than 2 blocks of " + std::to_string(block_size) + " tokens (" +
            readable_bytes(block_bytes) + " each) of this model; give it more");
    }
    if (blocks > (1 << 30)) {
        throw std::runtime_error(asked + " is more than 2^30 blocks; give it less");
    }
    return static_cast<int>(blocks);
}

std::int64_t available_host_memory_bytes() {
    std::ifstream meminfo("/proc/meminfo");
    for (std::string line; std::getline(meminfo, line);) {
        long long kib = 0;
        if (std::sscanf(line.c_str(), "MemAvailable: %lld kB", &kib) == 1) {
            return static_cast<std::int64_t>(kib) * 1024;
        }
    }
    const long pages = sysconf(_SC_AVPHYS_PAGES);
    const long page_size = sysconf(_SC_PAGESIZE);
    return pages > 0 && page_size > 0 ? static_cast<std::int64_t>(pages) * page_size : 0;
}

std::string readable_bytes(std::int64_t bytes) {
    char text[32];
    const auto b = static_cast<double>(bytes);
    if (bytes >= std::int64_t{1} << 30) {
        std::snprintf(text, sizeof text, "%.1f GiB", b / (1024.0 * 1024.0 * 1024.0));
    } else if (bytes >= 1024 * 1024) {
        std::snprintf(text, sizeof text, "%.1f MiB", b / (1024.0 * 1024.0));
    } else {
        std::snprintf(text, sizeof text, "%.1f KiB", b / 1024.0);
    }
    return text;
}

} // namespace kvscope::session
