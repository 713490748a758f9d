// Token eviction: which of a sequence's cached tokens to keep when it holds
// more than its budget. Pure selection over positions and attention scores;
// the caller compacts the survivors so whole blocks go back to the pool.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kvscope::kv {

enum class EvictionKind {
    none,
    window,    // the most recent `budget` tokens
    streaming, // StreamingLLM: `sink_tokens` first tokens + the most recent
    h2o,       // Heavy-Hitter Oracle: highest accumulated attention + the most recent
    snapkv,    // SnapKV: the prompt compressed once, by the last window's attention
};

std::string_view eviction_kind_name(EvictionKind kind);
std::optional<EvictionKind> parse_eviction_kind(std::string_view name);

struct EvictionConfig {
    EvictionKind kind = EvictionKind::none;
    int budget = 0;         // --kv-budget: most tokens a sequence keeps
    int sink_tokens = 4;    // streaming: tokens always kept at the start
    int recent_tokens = -1; // streaming, h2o: most recent kept; -1: the policy's default
    int snapkv_window = 32; // snapkv: prompt tokens whose attention scores the rest
    int snapkv_pool = 7;    // snapkv: max-pooling width over scores (keeps neighbours)

    bool enabled() const { return kind != EvictionKind::none; }
    bool needs_attention() const {
        return kind == EvictionKind::h2o || kind == EvictionKind::snapkv;
    }
    // Why this configuration cannot work; empty when it can. `sliding_window`:
    // the model's (0: none), which eviction cannot combine with yet: a
    // window counts positions, and evicting leaves entries whose positions
    // are no longer their indices.
    std::string problem(int block_size, int sliding_window = 0) const;
    std::string describe() const;
};

// The cache entries (indices into the sequence's cache, ascending) to keep,
// out of `entries`. `scores`: accumulated attention per entry (h2o, snapkv),
// else ignored. For snapkv, call once when the prompt is done. Returns every
// index when nothing needs to go.
std::vector<std::int32_t> select_kept(const EvictionConfig& config, std::int32_t entries,
                                      std::span<const float> scores);

// Whether a sequence holding `entries` should be compacted now: past its
// budget by at least a block, so each compaction frees whole blocks.
bool should_evict(const EvictionConfig& config, std::int32_t entries, int block_size);

} // namespace kvscope::kv
