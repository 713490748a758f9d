#include "engine/session/generation.h"

#include "engine/events/typed_events.h"
#include "engine/session/backend_factory.h"
#include "engine/session/serving_loop.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace kvscope::session {
namespace {

// Hands each sampled token over as the engine emits it, and keeps the
// times the speeds come from.
class TokenStream : public events::EventSink {
public:
    explicit TokenStream(std::function<bool(std::int32_t)> on_token)
        : on_token_(std::move(on_token)) {}

    void on_event(const events::EngineEvent& event) override {
        if (event.kind == events::EventKind::request_admitted && admitted_ns < 0) {
            admitted_ns = event.time_ns;
        } else if (event.kind == events::EventKind::token_sampled && !stopped) {
            // A verifying pass can keep several tokens: none after a stop.
            first_token_ns = first_token_ns < 0 ? event.time_ns : first_token_ns;
            last_token_ns = event.time_ns;
            ++handed;
            stopped = on_token_ && !on_token_(static_cast<std::int32_t>(
                                       events::as<events::TokenSampled>(event).token));
        }
    }

    std::int64_t admitted_ns = -1;
    std::int64_t first_token_ns = -1;
    std::int64_t last_token_ns = -1;
    int handed = 0; // tokens given to on_token
    bool stopped = false;

private:
    std::function<bool(std::int32_t)> on_token_;
};

} // namespace

GenerationStats generate(RunConfig config, std::shared_ptr<const model::LlamaModel> model,
                         const workload::WorkloadRequest& request, const GenerateHooks& hooks) {
    sampling::SamplingParams default_sampling;
    default_sampling.temperature = config.temperature;
    // Tokenized here first: an empty prompt fails before the backend is made,
    // and the cache is sized to what this request needs.
    workload::WorkloadRequest tokenized = request;
    const sched::RequestSpec spec =
        to_request_specs({request}, model->tokenizer(), default_sampling).front();
    if (spec.prompt.empty()) {
        throw std::invalid_argument("the prompt is empty");
    }
    tokenized.ids = spec.prompt;
    tokenized.text.clear();
    tokenized.chat = false;
    tokenized.sampling = spec.sampling;
    tokenized.arrival_seconds = 0;
    // The output stops at the model's length (ServingSession cuts
    // max_tokens there): no room past it.
    const auto prompt = static_cast<std::int64_t>(spec.prompt.size());
    const std::int64_t model_length =
        config.max_model_len > 0 ? config.max_model_len : model->config().context_length;
    config.default_cache_tokens =
        std::max(prompt, std::min<std::int64_t>(prompt + request.max_tokens, model_length));
    config.requests = {tokenized};
    config.real_time = false;
    config.token_text = true; // token_sampled events carry the ids streamed

    TokenStream stream(hooks.on_token);
    ServingSession run(config, &stream, std::move(model));
    if (hooks.on_ready) {
        hooks.on_ready(run);
    }
    ServingSession::ServeOptions serve;
    serve.stop_requested = [&] {
        return stream.stopped || (hooks.stop_requested && hooks.stop_requested());
    };
    const std::vector<std::int64_t> ids = run.serve(serve);
    if (ids.size() != 1) {
        throw std::logic_error("generate: the session served " + std::to_string(ids.size()) +
                               " requests, not 1");
    }

    const sched::Request& r = run.engine().request(ids.front());
    if (r.state == sched::RequestState::rejected) {
        throw std::runtime_error("the engine rejected the prompt: " + r.finish_reason);
    }
    GenerationStats stats;
    stats.prompt_tokens = r.prompt_length();
    stats.generated_tokens = stream.handed;
    stats.stop_reason = r.state == sched::RequestState::aborted ? "stopped" : r.finish_reason;
    if (stream.admitted_ns >= 0 && stream.first_token_ns >= 0) {
        stats.prefill_seconds =
            static_cast<double>(stream.first_token_ns - stream.admitted_ns) * 1e-9;
        stats.decode_seconds =
            static_cast<double>(stream.last_token_ns - stream.first_token_ns) * 1e-9;
    }
    stats.speculation.add(r.accounting.drafted_tokens, r.accounting.accepted_tokens,
                          r.accounting.verify_steps);
    return stats;
}

} // namespace kvscope::session
