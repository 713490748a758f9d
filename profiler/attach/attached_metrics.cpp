#include "profiler/attach/attached_metrics.h"

#include "engine/util/json_text.h"

#include <array>
#include <charconv>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

namespace kvscope::attach {
namespace {

using nlohmann::json;

// Gauges, as named in vLLM (v1/metrics/loggers.py; gpu_cache_usage_perc
// before 0.10) and SGLang (srt/metrics/collector.py).
constexpr std::array<std::string_view, 5> kGauges{
    "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "vllm:cache_config_info",
    "sglang:token_usage", "sglang:cache_hit_rate"};
// Counters, without the `_total` the client appends (gpu_ before 0.10).
constexpr std::array<std::string_view, 5> kCounters{
    "vllm:prefix_cache_queries", "vllm:prefix_cache_hits", "vllm:gpu_prefix_cache_queries",
    "vllm:gpu_prefix_cache_hits", "vllm:num_preemptions"};

bool is_counter(std::string_view name) {
    for (const std::string_view c : kCounters) {
        if (c == name) {
            return true;
        }
    }
    return false;
}

std::string series_key(const MetricSample& sample) {
    return sample.name + json_text(json(sample.labels));
}

std::optional<std::int64_t> integer_label(const MetricSeries& s, const char* key) {
    const auto it = s.labels.find(key);
    if (it == s.labels.end()) {
        return std::nullopt;
    }
    std::int64_t value = 0;
    const std::string& text = it->second;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc() || end != text.data() + text.size() || value <= 0) {
        return std::nullopt;
    }
    return value;
}

} // namespace

bool is_kept_metric(std::string_view name) {
    for (const std::string_view g : kGauges) {
        if (g == name) {
            return true;
        }
    }
    return is_counter(name);
}

std::vector<MetricSample> kept_metrics(const PrometheusText& text) {
    std::vector<MetricSample> kept;
    for (const PrometheusSample& s : text.samples) {
        std::string_view name = s.name;
        // Counters come as x_total from prometheus_client, as x from older
        // or other clients.
        if (name.ends_with("_total") && is_counter(name.substr(0, name.size() - 6))) {
            name.remove_suffix(6);
        }
        if (!is_kept_metric(name)) {
            continue;
        }
        MetricSample sample;
        sample.name = name;
        sample.value = s.value;
        for (const auto& [key, value] : s.labels) {
            sample.labels[key] = value;
        }
        kept.push_back(std::move(sample));
    }
    return kept;
}

std::string metric_json(const MetricSample& sample) {
    json value;
    if (std::isnan(sample.value)) {
        value = "NaN";
    } else if (std::isinf(sample.value)) {
        value = sample.value > 0 ? "+Inf" : "-Inf";
    } else {
        value = sample.value;
    }
    // Label values are the engine's bytes: replace what is not UTF-8.
    return json_text(json{{"name", sample.name}, {"value", value}, {"labels", sample.labels}});
}

std::optional<MetricSample> metric_of(const events::AttachedMetric& row) {
    const json j = json::parse(row.sample, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) {
        return std::nullopt;
    }
    const auto name = j.find("name");
    const auto value = j.find("value");
    if (name == j.end() || !name->is_string() || value == j.end()) {
        return std::nullopt;
    }
    MetricSample sample;
    sample.name = name->get<std::string>();
    if (value->is_number()) {
        sample.value = value->get<double>();
    } else if (*value == "NaN") {
        sample.value = std::numeric_limits<double>::quiet_NaN();
    } else if (*value == "+Inf") {
        sample.value = std::numeric_limits<double>::infinity();
    } else if (*value == "-Inf") {
        sample.value = -std::numeric_limits<double>::infinity();
    } else {
        return std::nullopt;
    }
    if (const auto labels = j.find("labels"); labels != j.end()) {
        if (!labels->is_object()) {
            return std::nullopt;
        }
        for (const auto& [key, text] : labels->items()) {
            if (!text.is_string()) {
                return std::nullopt;
            }
            sample.labels[key] = text.get<std::string>();
        }
    }
    return sample;
}

void add_metric(MetricSeriesMap& series, const MetricSample& sample, std::int64_t t_ns) {
    const auto [it, inserted] = series.try_emplace(series_key(sample));
    MetricSeries& s = it->second;
    if (inserted) {
        s.name = sample.name;
        s.labels = sample.labels;
        s.first = sample.value;
        s.first_ns = t_ns;
    }
    s.latest = sample.value;
    s.latest_ns = t_ns;
}

MetricsSummary summarize_metrics(const MetricSeriesMap& series) {
    MetricsSummary out;
    double usage_sum = 0;
    int usage_count = 0;
    double sglang_hit_sum = 0;
    int sglang_hit_count = 0;
    double queries_growth = 0;
    double hits_growth = 0;
    const auto add = [](std::optional<double>& total, double value) {
        total = total.value_or(0) + value;
    };
    for (const auto& [key, s] : series) {
        if (!std::isfinite(s.latest)) {
            continue;
        }
        if (s.name == "vllm:kv_cache_usage_perc" || s.name == "vllm:gpu_cache_usage_perc" ||
            s.name == "sglang:token_usage") {
            usage_sum += s.latest;
            ++usage_count;
        } else if (s.name == "sglang:cache_hit_rate") {
            sglang_hit_sum += s.latest;
            ++sglang_hit_count;
        } else if (s.name == "vllm:prefix_cache_queries" ||
                   s.name == "vllm:gpu_prefix_cache_queries") {
            add(out.prefix_queries, s.latest);
            queries_growth += std::isfinite(s.first) ? s.latest - s.first : 0;
        } else if (s.name == "vllm:prefix_cache_hits" || s.name == "vllm:gpu_prefix_cache_hits") {
            add(out.prefix_hits, s.latest);
            hits_growth += std::isfinite(s.first) ? s.latest - s.first : 0;
        } else if (s.name == "vllm:num_preemptions") {
            add(out.preemptions, s.latest);
        } else if (s.name == "vllm:cache_config_info" && s.latest != 0) {
            // An info gauge: 1 for the config in force; the latest one wins.
            if (const auto blocks = integer_label(s, "num_gpu_blocks")) {
                out.num_gpu_blocks = blocks;
            }
            if (const auto size = integer_label(s, "block_size")) {
                out.block_size = size;
            }
        }
    }
    if (usage_count > 0) {
        out.kv_usage = usage_sum / usage_count;
    }
    if (out.prefix_queries && out.prefix_hits && *out.prefix_queries > 0) {
        out.prefix_hit_rate = *out.prefix_hits / *out.prefix_queries;
    } else if (sglang_hit_count > 0) {
        out.prefix_hit_rate = sglang_hit_sum / sglang_hit_count;
    }
    if (queries_growth > 0) {
        out.prefix_hit_rate_since = hits_growth / queries_growth;
    }
    return out;
}

} // namespace kvscope::attach
