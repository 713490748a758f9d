#include "engine/kv/eviction_policy.h"

#include <algorithm>
#include <array>
#include <numeric>

namespace kvscope::kv {
namespace {

struct NamedKind {
    EvictionKind kind;
    std::string_view name;
};
constexpr std::array kKinds = {
    NamedKind{EvictionKind::none, "none"}, NamedKind{EvictionKind::window, "window"},
    NamedKind{EvictionKind::streaming, "streaming"}, NamedKind{EvictionKind::h2o, "h2o"},
    NamedKind{EvictionKind::snapkv, "snapkv"}};

int recent_of(const EvictionConfig& c) {
    if (c.recent_tokens >= 0) {
        return std::min(c.recent_tokens, c.budget);
    }
    switch (c.kind) {
    case EvictionKind::streaming:
        return std::max(0, c.budget - c.sink_tokens);
    case EvictionKind::h2o:
        return c.budget / 2; // the H2O paper's even split
    default:
        return c.budget;
    }
}

// The `count` entries of [begin, end) with the highest scores, ascending.
std::vector<std::int32_t> top_scored(std::span<const float> scores, std::int32_t begin,
                                     std::int32_t end, std::int32_t count) {
    std::vector<std::int32_t> order(static_cast<std::size_t>(std::max(0, end - begin)));
    std::iota(order.begin(), order.end(), begin);
    count = std::clamp(count, 0, static_cast<std::int32_t>(order.size()));
    std::partial_sort(order.begin(), order.begin() + count, order.end(),
                      [&](std::int32_t a, std::int32_t b) {
                          const float sa = static_cast<std::size_t>(a) < scores.size()
                                               ? scores[static_cast<std::size_t>(a)]
                                               : 0.0f;
                          const float sb = static_cast<std::size_t>(b) < scores.size()
                                               ? scores[static_cast<std::size_t>(b)]
                                               : 0.0f;
                          return sa != sb ? sa > sb : a < b;
                      });
    order.resize(static_cast<std::size_t>(count));
    std::sort(order.begin(), order.end());
    return order;
}

void append_range(std::vector<std::int32_t>& out, std::int32_t begin, std::int32_t end) {
    for (std::int32_t i = begin; i < end; ++i) {
        out.push_back(i);
    }
}

} // namespace

std::string_view eviction_kind_name(EvictionKind kind) {
    for (const NamedKind& k : kKinds) {
        if (k.kind == kind) {
            return k.name;
        }
    }
    return "unknown";
}

std::optional<EvictionKind> parse_eviction_kind(std::string_view name) {
    for (const NamedKind& k : kKinds) {
        if (k.name == name) {
            return k.kind;
        }
    }
    return std::nullopt;
}

std::string EvictionConfig::problem(int block_size, int sliding_window) const {
    if (kind == EvictionKind::none) {
        return {};
    }
    if (sliding_window > 0) {
        return std::string("--eviction ") + std::string(eviction_kind_name(kind)) +
               " is not available for models with sliding-window layers (this one slides over " +
               std::to_string(sliding_window) + " tokens) yet";
    }
    if (budget <= 0) {
        return std::string("--eviction ") + std::string(eviction_kind_name(kind)) +
               " needs --kv-budget TOKENS";
    }
    if (budget < block_size) {
        return "--kv-budget " + std::to_string(budget) + " is below one block (" +
               std::to_string(block_size) + " tokens)";
    }
    if (kind == EvictionKind::streaming && sink_tokens >= budget) {
        return "--sink-tokens must be below --kv-budget";
    }
    if (kind == EvictionKind::snapkv && (snapkv_window <= 0 || snapkv_window >= budget)) {
        return "--snapkv-window must be above 0 and below --kv-budget";
    }
    if (snapkv_pool <= 0 || snapkv_pool % 2 == 0) {
        return "--snapkv-pool must be a positive odd number";
    }
    return {};
}

std::string EvictionConfig::describe() const {
    if (kind == EvictionKind::none) {
        return "no eviction";
    }
    std::string text = std::string(eviction_kind_name(kind)) + " eviction, budget " +
                       std::to_string(budget) + " tokens";
    if (kind == EvictionKind::streaming) {
        text += ", " + std::to_string(sink_tokens) + " sinks";
    }
    if (kind == EvictionKind::streaming || kind == EvictionKind::h2o) {
        text += ", " + std::to_string(recent_of(*this)) + " recent";
    }
    if (kind == EvictionKind::snapkv) {
        text +=
            ", window " + std::to_string(snapkv_window) + ", pool " + std::to_string(snapkv_pool);
    }
    return text;
}

bool should_evict(const EvictionConfig& config, std::int32_t entries, int block_size) {
    return config.enabled() && config.kind != EvictionKind::snapkv &&
           entries >= config.budget + block_size;
}

std::vector<std::int32_t> select_kept(const EvictionConfig& c, std::int32_t entries,
                                      std::span<const float> scores) {
    std::vector<std::int32_t> kept;
    if (!c.enabled() || entries <= c.budget) {
        append_range(kept, 0, entries);
        return kept;
    }
    switch (c.kind) {
    case EvictionKind::none:
        break;
    case EvictionKind::window:
        append_range(kept, entries - c.budget, entries);
        break;
    case EvictionKind::streaming: {
        const int recent = recent_of(c);
        const int sinks = std::min(c.sink_tokens, c.budget - recent);
        append_range(kept, 0, sinks);
        append_range(kept, entries - recent, entries);
        break;
    }
    case EvictionKind::h2o: {
        const int recent = recent_of(c);
        kept = top_scored(scores, 0, entries - recent, c.budget - recent);
        append_range(kept, entries - recent, entries);
        break;
    }
    case EvictionKind::snapkv: {
        // Scores of the prefix, max-pooled so a chosen token keeps its
        // neighbours (SnapKV's clustering), then the window itself.
        const std::int32_t window = std::min(c.snapkv_window, entries);
        const std::int32_t prefix = entries - window;
        std::vector<float> pooled(static_cast<std::size_t>(prefix), 0.0f);
        const int half = c.snapkv_pool / 2;
        for (std::int32_t i = 0; i < prefix; ++i) {
            float best = 0.0f;
            for (std::int32_t j = std::max(0, i - half); j <= std::min(prefix - 1, i + half); ++j) {
                if (static_cast<std::size_t>(j) < scores.size()) {
                    best = std::max(best, scores[static_cast<std::size_t>(j)]);
                }
            }
            pooled[static_cast<std::size_t>(i)] = best;
        }
        kept = top_scored(pooled, 0, prefix, c.budget - window);
        append_range(kept, prefix, entries);
        break;
    }
    }
    return kept;
}

} // namespace kvscope::kv
