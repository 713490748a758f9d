// The engine metrics `kvscope attach --metrics` keeps, out of everything a
// /metrics page lists: KV usage, prefix cache queries and hits, preemptions
// and the cache config (capacity), in vLLM's and SGLang's names. Each kept
// sample becomes an AttachedMetric row; these functions write and read the
// row's JSON, and sum a source's latest samples into what the summary shows.
#pragma once

#include "engine/events/typed_events.h"
#include "profiler/attach/prometheus_text.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kvscope::attach {

struct MetricSample {
    // vLLM's declared name: a counter's `_total` suffix (which the client
    // adds when exposing it) removed, so the name is the same whichever
    // prometheus_client version the engine ships.
    std::string name;
    double value = 0;
    std::map<std::string, std::string> labels;
};

// The samples of `text` kvscope keeps, in order.
std::vector<MetricSample> kept_metrics(const PrometheusText& text);
bool is_kept_metric(std::string_view name);

// AttachedMetric's JSON: {"name", "value", "labels"}; a value that is not
// finite is written "NaN", "+Inf" or "-Inf" (JSON has no such numbers).
std::string metric_json(const MetricSample& sample);
// None for a row that does not parse.
std::optional<MetricSample> metric_of(const events::AttachedMetric& row);

// A source's latest value of each metric and label set, and its first (so
// counters can be read since attaching).
struct MetricSeries {
    std::string name;
    std::map<std::string, std::string> labels;
    double first = 0;
    double latest = 0;
    std::int64_t first_ns = 0;
    std::int64_t latest_ns = 0;
};
using MetricSeriesMap = std::map<std::string, MetricSeries>; // by name and labels
void add_metric(MetricSeriesMap& series, const MetricSample& sample, std::int64_t t_ns);

// What the summary shows, summed over an engine's label sets (its
// data-parallel engines): usage is their mean, counters their sum.
struct MetricsSummary {
    std::optional<double> kv_usage;       // 0..1
    std::optional<double> prefix_queries; // tokens, since the engine started
    std::optional<double> prefix_hits;
    std::optional<double> prefix_hit_rate;       // hits / queries, or SGLang's own gauge
    std::optional<double> prefix_hit_rate_since; // over the counters' growth since attaching
    std::optional<double> preemptions;
    std::optional<std::int64_t> num_gpu_blocks; // vllm:cache_config_info
    std::optional<std::int64_t> block_size;
};
MetricsSummary summarize_metrics(const MetricSeriesMap& series);

} // namespace kvscope::attach
