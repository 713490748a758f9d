#include "engine/sim/trace_reader.h"

#include "engine/sim/hash_id_trace.h"
#include "engine/sim/kvscope_trace.h"
#include "engine/util/text_lines.h"

#include <fstream>
#include <nlohmann/json.hpp>

namespace kvscope::sim {
namespace {

constexpr std::size_t kMaxWarnings = 20;

// splitmix64: a well-mixed 64-bit value from any input.
std::uint64_t mix(std::uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

} // namespace

void TraceReader::fail(std::int64_t line, const std::string& what) const {
    throw TraceError(path_ + (line > 0 ? ":" + std::to_string(line) : std::string()) + ": " + what);
}

void TraceReader::warn(std::int64_t line, const std::string& what) {
    ++warning_count_;
    if (warnings_.size() < kMaxWarnings) {
        warnings_.push_back(path_ + ":" + std::to_string(line) + ": " + what);
    }
}

std::string_view trace_format_name(TraceFormat format) {
    switch (format) {
    case TraceFormat::automatic:
        return "auto";
    case TraceFormat::mooncake:
        return "mooncake";
    case TraceFormat::qwen_bailian:
        return "qwen-bailian";
    case TraceFormat::kvscope:
        return "kvscope";
    }
    return "auto";
}

std::optional<TraceFormat> parse_trace_format(std::string_view name) {
    for (const TraceFormat format : {TraceFormat::automatic, TraceFormat::mooncake,
                                     TraceFormat::qwen_bailian, TraceFormat::kvscope}) {
        if (name == trace_format_name(format)) {
            return format;
        }
    }
    return std::nullopt;
}

TraceFormat detect_trace_format(const std::string& path) {
    std::ifstream in(path);
    if (!in) {
        throw TraceError(path + ": cannot open the trace");
    }
    std::string text;
    std::int64_t line = 0;
    for (LineRead read; (read = read_line(in, text)) != LineRead::end;) {
        ++line;
        if (read == LineRead::too_long) {
            throw TraceError(path + ":" + std::to_string(line) + ": " + too_long_trace_line());
        }
        const auto first = text.find_first_not_of(" \t\r");
        if (first == std::string::npos || text[first] == '#') {
            continue; // blank, or a kvscope trace's comment
        }
        const nlohmann::json object = nlohmann::json::parse(text, nullptr, false);
        const std::string where = path + ":" + std::to_string(line) + ": ";
        if (!object.is_object()) {
            throw TraceError(where + "not a JSON object, so not a trace kvscope knows");
        }
        if (object.contains("prompt") || object.contains("prompt_ids")) {
            return TraceFormat::kvscope;
        }
        if (object.contains("chat_id") || object.contains("parent_chat_id")) {
            return TraceFormat::qwen_bailian;
        }
        if (object.contains("hash_ids")) {
            return TraceFormat::mooncake;
        }
        throw TraceError(where + "neither \"prompt\"/\"prompt_ids\" (kvscope), \"chat_id\" "
                                 "(qwen-bailian) nor \"hash_ids\" (mooncake): give --format");
    }
    throw TraceError(path + ": no requests");
}

std::unique_ptr<TraceReader> open_trace(const std::string& path, TraceFormat format,
                                        const TokenizerSource& tokenizer) {
    if (format == TraceFormat::automatic) {
        format = detect_trace_format(path);
    }
    switch (format) {
    case TraceFormat::qwen_bailian:
        return std::make_unique<HashIdTrace>(path, kQwenBailianFormat);
    case TraceFormat::kvscope:
        return std::make_unique<KvscopeTrace>(path, tokenizer);
    case TraceFormat::mooncake:
    case TraceFormat::automatic:
        break;
    }
    return std::make_unique<HashIdTrace>(path, kMooncakeFormat);
}

std::vector<std::int32_t> trace_prompt_tokens(const TraceRequest& request, std::int32_t vocab) {
    if (!request.prompt.empty()) {
        return request.prompt;
    }
    std::vector<std::int32_t> tokens;
    tokens.reserve(static_cast<std::size_t>(request.input_tokens));
    for (const std::int64_t id : request.block_ids) {
        const std::uint64_t seed = mix(static_cast<std::uint64_t>(id));
        for (std::int32_t j = 0; j < request.tokens_per_id &&
                                 static_cast<std::int32_t>(tokens.size()) < request.input_tokens;
             ++j) {
            const std::uint64_t value = mix(seed + static_cast<std::uint64_t>(j));
            tokens.push_back(static_cast<std::int32_t>(value % static_cast<std::uint64_t>(vocab)));
        }
    }
    return tokens;
}

} // namespace kvscope::sim
