#include "profiler/attach/prometheus_text.h"

#include <array>
#include <charconv>
#include <cmath>
#include <limits>

namespace kvscope::attach {
namespace {

bool name_start(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
}

bool name_char(char c) {
    return name_start(c) || (c >= '0' && c <= '9');
}

bool blank(char c) {
    return c == ' ' || c == '\t';
}

bool iequals(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) {
        return false;
    }
    for (std::size_t i = 0; i < a.size(); ++i) {
        const auto lower = [](char c) {
            return c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c;
        };
        if (lower(a[i]) != lower(b[i])) {
            return false;
        }
    }
    return true;
}

// Reads one line's fields left to right; each step fails with a reason.
class LineReader {
public:
    explicit LineReader(std::string_view line)
        : line_(line) {}

    bool at_end() const { return at_ >= line_.size(); }
    char peek() const { return at_end() ? '\0' : line_[at_]; }
    void skip_blanks() {
        while (!at_end() && blank(line_[at_])) {
            ++at_;
        }
    }
    bool take(char c) {
        if (peek() != c || at_end()) {
            return false;
        }
        ++at_;
        return true;
    }
    // Label names may not contain ':' (metric names may).
    std::string_view name(bool metric) {
        const std::size_t begin = at_;
        if (at_end() || !name_start(line_[at_]) || (!metric && line_[at_] == ':')) {
            return {};
        }
        ++at_;
        while (!at_end() && name_char(line_[at_]) && (metric || line_[at_] != ':')) {
            ++at_;
        }
        return line_.substr(begin, at_ - begin);
    }
    // The run up to the next blank (a value or a timestamp).
    std::string_view token() {
        const std::size_t begin = at_;
        while (!at_end() && !blank(line_[at_])) {
            ++at_;
        }
        return line_.substr(begin, at_ - begin);
    }
    // A quoted label value after its opening quote: \\, \" and \n are the
    // format's escapes; any other backslash stays as written (what
    // Prometheus itself does).
    bool quoted(std::string& out) {
        while (!at_end()) {
            const char c = line_[at_++];
            if (c == '"') {
                return true;
            }
            if (c == '\\' && !at_end()) {
                const char e = line_[at_++];
                if (e == 'n') {
                    out += '\n';
                } else if (e == '\\' || e == '"') {
                    out += e;
                } else {
                    out += '\\';
                    out += e;
                }
            } else {
                out += c;
            }
        }
        return false;
    }

private:
    std::string_view line_;
    std::size_t at_ = 0;
};

std::optional<double> parse_value(std::string_view text) {
    if (text.empty()) {
        return std::nullopt;
    }
    std::string_view unsigned_text = text;
    const bool negative = text.front() == '-';
    if (text.front() == '+' || negative) {
        unsigned_text.remove_prefix(1);
    }
    if (iequals(unsigned_text, "inf") || iequals(unsigned_text, "infinity")) {
        return negative ? -std::numeric_limits<double>::infinity()
                        : std::numeric_limits<double>::infinity();
    }
    if (iequals(unsigned_text, "nan")) {
        return std::numeric_limits<double>::quiet_NaN();
    }
    // from_chars takes a leading '-' but not '+', and no "0x" prefix
    // (hex floats are not the format's).
    if (unsigned_text.empty() || unsigned_text.front() == '+' || unsigned_text.front() == '-') {
        return std::nullopt;
    }
    double value = 0;
    const auto [end, error] =
        std::from_chars(unsigned_text.data(), unsigned_text.data() + unsigned_text.size(), value,
                        std::chars_format::general);
    if (error != std::errc() || end != unsigned_text.data() + unsigned_text.size()) {
        return std::nullopt;
    }
    return negative ? -value : value;
}

std::optional<std::int64_t> parse_timestamp(std::string_view text) {
    std::int64_t value = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || error != std::errc() || end != text.data() + text.size()) {
        return std::nullopt;
    }
    return value;
}

// A `# ...` line: TYPE is remembered, HELP and anything else is a comment.
// Returns the problem, or empty.
std::string comment(std::string_view line, PrometheusText& out) {
    LineReader r(line.substr(1));
    r.skip_blanks();
    const std::string_view keyword = r.token();
    if (keyword != "TYPE") {
        return {};
    }
    r.skip_blanks();
    const std::string_view name = r.name(/*metric=*/true);
    if (name.empty()) {
        return "a TYPE line without a metric name";
    }
    r.skip_blanks();
    const std::string_view type = r.token();
    static constexpr std::array<std::string_view, 5> kTypes{"counter", "gauge", "histogram",
                                                            "summary", "untyped"};
    bool known = false;
    for (const std::string_view t : kTypes) {
        known = known || t == type;
    }
    r.skip_blanks();
    if (!known || !r.at_end()) {
        return "TYPE " + std::string(name) +
               " is not one of counter, gauge, histogram, summary, "
               "untyped";
    }
    out.types[std::string(name)] = std::string(type);
    return {};
}

std::string sample(std::string_view line, PrometheusText& out) {
    LineReader r(line);
    PrometheusSample s;
    s.name = r.name(/*metric=*/true);
    if (s.name.empty()) {
        return "no metric name";
    }
    r.skip_blanks();
    if (r.take('{')) {
        for (;;) {
            r.skip_blanks();
            if (r.take('}')) {
                break;
            }
            const std::string_view key = r.name(/*metric=*/false);
            if (key.empty()) {
                return "a label without a name in " + s.name;
            }
            r.skip_blanks();
            if (!r.take('=')) {
                return "label " + std::string(key) + " of " + s.name + " has no '='";
            }
            r.skip_blanks();
            if (!r.take('"')) {
                return "label " + std::string(key) + " of " + s.name + " has no quoted value";
            }
            std::string value;
            if (!r.quoted(value)) {
                return "label " + std::string(key) + " of " + s.name + " is not closed";
            }
            s.labels.emplace_back(key, std::move(value));
            r.skip_blanks();
            if (r.take(',')) {
                continue; // a trailing comma before '}' is allowed
            }
            if (!r.take('}')) {
                return "labels of " + s.name + " are not closed by '}'";
            }
            break;
        }
    }
    r.skip_blanks();
    const std::string_view value_text = r.token();
    const std::optional<double> value = parse_value(value_text);
    if (!value) {
        return "the value of " + s.name + " is not a number";
    }
    s.value = *value;
    r.skip_blanks();
    if (!r.at_end()) {
        const std::optional<std::int64_t> timestamp = parse_timestamp(r.token());
        r.skip_blanks();
        if (!timestamp || !r.at_end()) {
            return "the timestamp of " + s.name + " is not an integer";
        }
        s.timestamp_ms = timestamp;
    }
    out.samples.push_back(std::move(s));
    return {};
}

} // namespace

std::string_view PrometheusSample::label(std::string_view key) const {
    for (const auto& [k, v] : labels) {
        if (k == key) {
            return v;
        }
    }
    return {};
}

std::string_view PrometheusText::type_of(std::string_view sample_name) const {
    if (const auto it = types.find(std::string(sample_name)); it != types.end()) {
        return it->second;
    }
    for (const std::string_view suffix : {"_total", "_count", "_sum", "_bucket"}) {
        if (sample_name.size() > suffix.size() && sample_name.ends_with(suffix)) {
            const auto it =
                types.find(std::string(sample_name.substr(0, sample_name.size() - suffix.size())));
            if (it != types.end()) {
                return it->second;
            }
        }
    }
    return {};
}

PrometheusText parse_prometheus_text(std::string_view text) {
    PrometheusText out;
    std::int64_t number = 0;
    while (!text.empty()) {
        const std::size_t newline = text.find('\n');
        std::string_view line = text.substr(0, newline);
        text.remove_prefix(newline == std::string_view::npos ? text.size() : newline + 1);
        ++number;
        if (!line.empty() && line.back() == '\r') {
            line.remove_suffix(1); // served with CRLF line ends
        }
        while (!line.empty() && blank(line.front())) {
            line.remove_prefix(1);
        }
        if (line.empty()) {
            continue;
        }
        const std::string problem = line.front() == '#' ? comment(line, out) : sample(line, out);
        if (!problem.empty()) {
            if (out.bad_lines++ == 0) {
                out.first_error = "line " + std::to_string(number) + ": " + problem;
            }
        }
    }
    return out;
}

} // namespace kvscope::attach
