// A request trace for kvscope simulate, read a request at a time: the
// formats it knows, what each request gives the replay, and the FILE:LINE
// errors and warnings a bad trace gets.
//   mooncake      Mooncake's (Kimi's) traces: a hash id per 512-token block
//                 (hash_id_trace.h)
//   qwen-bailian  Alibaba Bailian's Qwen traces: a hash id per 16-token
//                 block, timestamps in seconds (hash_id_trace.h)
//   kvscope       kvscope's own workload JSONL: prompts as text or token ids
//                 (kvscope_trace.h; engine/workload/workload.h has the format)
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace kvscope::tokenizer {
class Tokenizer;
}

namespace kvscope::sim {

class TraceError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

struct TraceRequest {
    std::int64_t line = 0; // in the file, from 1
    double arrival_s = 0;  // from the trace's start
    std::int32_t input_tokens = 0;
    std::int32_t output_tokens = 0;
    // A hash-id trace's prompt: one id per block of tokens_per_id tokens,
    // the last block partial (trace_prompt_tokens() makes the tokens)...
    std::vector<std::int64_t> block_ids;
    std::int32_t tokens_per_id = 0;
    // ...or, from a kvscope trace, the prompt's tokens themselves.
    std::vector<std::int32_t> prompt;
};

class TraceReader {
public:
    virtual ~TraceReader() = default;

    // The next request in arrival order; none at the end. Throws TraceError.
    virtual std::optional<TraceRequest> next() = 0;

    const std::vector<std::string>& warnings() const { return warnings_; } // the first 20
    std::int64_t warning_count() const { return warning_count_; }
    const std::string& path() const { return path_; }

protected:
    explicit TraceReader(std::string path)
        : path_(std::move(path)) {}
    // At `line` of the file (0: the file as a whole).
    [[noreturn]] void fail(std::int64_t line, const std::string& what) const;
    void warn(std::int64_t line, const std::string& what);

private:
    std::string path_;
    std::vector<std::string> warnings_;
    std::int64_t warning_count_ = 0;
};

enum class TraceFormat { automatic, mooncake, qwen_bailian, kvscope };

std::string_view trace_format_name(TraceFormat format); // "auto", "mooncake", ...
std::optional<TraceFormat> parse_trace_format(std::string_view name);

// The format of the trace at `path`, from its first request's fields:
// "prompt" or "prompt_ids" (kvscope), "chat_id" (qwen-bailian), "hash_ids"
// (mooncake). Throws TraceError when it cannot tell.
TraceFormat detect_trace_format(const std::string& path);

// Text prompts (kvscope traces) need a tokenizer: called once, when the
// trace has one, it gives it (or throws, saying why there is none).
using TokenizerSource = std::function<const tokenizer::Tokenizer&()>;

// Opens the trace at `path` in `format` (automatic: detected). Throws
// TraceError.
std::unique_ptr<TraceReader> open_trace(const std::string& path, TraceFormat format,
                                        const TokenizerSource& tokenizer = {});

// The prompt token ids a trace request stands for: its own tokens, or each
// hash id's block of tokens derived from the id alone (equal ids, equal
// tokens; different ids, different tokens but by astronomically rare
// chance), the last block cut to the input length. Derived ids are below
// `vocab`.
std::vector<std::int32_t> trace_prompt_tokens(const TraceRequest& request, std::int32_t vocab);

} // namespace kvscope::sim
