// A kvscope workload trace (engine/workload/workload.h: one JSON request a
// line, "prompt" text or "prompt_ids", "arrival" seconds, "max_tokens") as
// a trace to replay. Its prompts are real tokens: text goes through the
// tokenizer (and the chat template for chat requests) exactly as a live run
// would, so the prefix cache shares what a run would share. Read whole: these
// traces are written by hand or by kvscope, not hours of production.
#pragma once

#include "engine/sim/trace_reader.h"

#include <deque>

namespace kvscope::sim {

// The tokenizer of the model `model_option` names (or $KVSCOPE_MODEL, or the
// model setup.sh fetched: session::model_file), loaded the first time it is
// asked for and shared by every caller after, from any thread. Throws
// TraceError saying why there is none.
TokenizerSource model_tokenizer(const std::string& model_option);

class KvscopeTrace final : public TraceReader {
public:
    // Throws TraceError for a bad line (FILE:LINE, from the workload
    // reader) and for text prompts without a tokenizer.
    KvscopeTrace(const std::string& path, const TokenizerSource& tokenizer);

    std::optional<TraceRequest> next() override;

private:
    std::deque<TraceRequest> requests_;
};

} // namespace kvscope::sim
