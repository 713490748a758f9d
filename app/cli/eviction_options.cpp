#include "app/cli/eviction_options.h"

namespace kvscope::cli {

void EvictionOptions::add_to(CLI::App& app) {
    app.add_option("--eviction", kind,
                   "Token eviction: none, window (most recent), streaming (sinks + recent), "
                   "h2o (heavy hitters + recent), snapkv (prompt compressed once)")
        ->check(CLI::IsMember({"none", "window", "streaming", "h2o", "snapkv"}))
        ->capture_default_str();
    app.add_option("--kv-budget", config.budget, "Most tokens each sequence keeps in the cache")
        ->check(CLI::NonNegativeNumber);
    app.add_option("--sink-tokens", config.sink_tokens, "streaming: first tokens always kept")
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
    app.add_option("--recent-window", config.recent_tokens,
                   "streaming, h2o: most recent tokens always kept (default: budget - sinks "
                   "for streaming, half the budget for h2o)")
        ->check(CLI::NonNegativeNumber);
    app.add_option("--snapkv-window", config.snapkv_window,
                   "snapkv: last prompt tokens whose attention chooses what to keep")
        ->check(CLI::PositiveNumber)
        ->capture_default_str();
    app.add_option("--snapkv-pool", config.snapkv_pool,
                   "snapkv: width of the max-pooling over scores (odd)")
        ->check(CLI::PositiveNumber)
        ->capture_default_str();
}

std::string EvictionOptions::resolve(int block_size) {
    config.kind = kv::parse_eviction_kind(kind).value_or(kv::EvictionKind::none);
    return config.problem(block_size);
}

} // namespace kvscope::cli
