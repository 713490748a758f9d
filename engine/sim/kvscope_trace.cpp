#include "engine/sim/kvscope_trace.h"

#include "engine/gguf/gguf_file.h"
#include "engine/session/model_loading.h"
#include "engine/session/serving_loop.h"
#include "engine/sim/simulated_backend.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/workload/workload.h"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>

namespace kvscope::sim {

TokenizerSource model_tokenizer(const std::string& model_option) {
    struct Shared {
        std::mutex mutex;
        std::optional<tokenizer::Tokenizer> tokenizer;
    };
    auto shared = std::make_shared<Shared>();
    return [shared, model_option]() -> const tokenizer::Tokenizer& {
        const std::lock_guard lock(shared->mutex);
        if (!shared->tokenizer) {
            try {
                const std::filesystem::path path = session::model_file(model_option);
                shared->tokenizer.emplace(
                    tokenizer::Tokenizer::from_gguf(gguf::GgufFile::open(path)));
            } catch (const std::exception& e) {
                throw TraceError(std::string("text prompts need the model's tokenizer: ") +
                                 e.what());
            }
        }
        return *shared->tokenizer;
    };
}

KvscopeTrace::KvscopeTrace(const std::string& path, const TokenizerSource& tokenizer)
    : TraceReader(path) {
    std::vector<workload::WorkloadRequest> requests;
    try {
        requests = workload::load_trace(path);
    } catch (const workload::WorkloadError& e) {
        throw TraceError(e.what());
    }
    const bool has_text =
        std::any_of(requests.begin(), requests.end(), [](const auto& r) { return r.ids.empty(); });
    std::vector<std::vector<std::int32_t>> prompts;
    if (has_text) {
        if (!tokenizer) {
            fail(0, "text prompts need the model's tokenizer");
        }
        try {
            for (sched::RequestSpec& spec :
                 session::to_request_specs(requests, tokenizer(), sampling::SamplingParams{})) {
                prompts.push_back(std::move(spec.prompt));
            }
        } catch (const std::invalid_argument& e) {
            fail(0, e.what());
        }
    } else {
        for (std::size_t i = 0; i < requests.size(); ++i) {
            for (const std::int32_t id : requests[i].ids) {
                if (id < 0 || id >= SimulatedBackend::kVocab) {
                    fail(0, "request " + std::to_string(i + 1) + ": token id " +
                                std::to_string(id) + " is not a token id");
                }
            }
            prompts.push_back(requests[i].ids);
        }
    }
    for (std::size_t i = 0; i < requests.size(); ++i) {
        if (prompts[i].empty()) {
            fail(0, "request " + std::to_string(i + 1) + " has an empty prompt");
        }
        TraceRequest r;
        r.line = static_cast<std::int64_t>(i + 1); // the request's place, in arrival order
        r.arrival_s = requests[i].arrival_seconds;
        r.input_tokens = static_cast<std::int32_t>(prompts[i].size());
        r.output_tokens = requests[i].max_tokens;
        r.prompt = std::move(prompts[i]);
        requests_.push_back(std::move(r));
    }
}

std::optional<TraceRequest> KvscopeTrace::next() {
    if (requests_.empty()) {
        return std::nullopt;
    }
    TraceRequest r = std::move(requests_.front());
    requests_.pop_front();
    return r;
}

} // namespace kvscope::sim
