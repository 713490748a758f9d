// Prometheus' text exposition format (version 0.0.4, what vLLM's and
// SGLang's /metrics serve through prometheus_client), parsed without a
// library: Debian packages none for C++ (prometheus-cpp writes the format but
// does not read it). Strict per line, lenient per text: a line that breaks
// the grammar is skipped and counted, the rest is still read, since one odd
// metric from a newer engine must not hide the ones we want. Never throws,
// whatever the bytes.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kvscope::attach {

struct PrometheusSample {
    std::string name; // as exposed: a counter's `_total` included
    std::vector<std::pair<std::string, std::string>> labels; // in order, unescaped
    double value = 0; // NaN, +Inf and -Inf as the format spells them
    std::optional<std::int64_t> timestamp_ms;

    // The label's value; empty when the sample has none of that name.
    std::string_view label(std::string_view key) const;
};

struct PrometheusText {
    std::vector<PrometheusSample> samples;
    // `# TYPE name type` lines: counter, gauge, histogram, summary, untyped.
    std::map<std::string, std::string> types;
    std::int64_t bad_lines = 0;
    std::string first_error; // "line N: what", empty when every line parsed

    // The type declared for a sample's family: its own name's, else (for
    // `x_total`, `x_count`, `x_sum`, `x_bucket`) x's; empty when undeclared.
    std::string_view type_of(std::string_view sample_name) const;
};

PrometheusText parse_prometheus_text(std::string_view text);

} // namespace kvscope::attach
