#include "engine/session/generation.h"

#include "engine/events/typed_events.h"
#include "engine/session/backend_factory.h"
#include "engine/session/serving_loop.h"
#include "engine/session/serving_session.h"

#include <stdexcept>

namespace kvscope::session {
namespace {

// Hands each sampled token over as the engine emits it, and keeps the
// times the speeds come from.
class TokenStream : public events::EventSink {
public:
    explicit TokenStream(const std::function<bool(std::int32_t)>& on_token)
        : on_token_(on_token) {}

    void on_event(const events::EngineEvent& event) override {
        if (event.kind == events::EventKind::request_admitted && admitted_ns < 0) {
            admitted_ns = event.time_ns;
        } else if (event.kind == events::EventKind::token_sampled) {
            first_token_ns = first_token_ns < 0 ? event.time_ns : first_token_ns;
            last_token_ns = event.time_ns;
            // A verifying pass can keep several tokens: none after a stop.
            if (!stopped) {
                stopped = !on_token_(
                    static_cast<std::int32_t>(events::as<events::TokenSampled>(event).token));
            }
        }
    }

    std::int64_t admitted_ns = -1;
    std::int64_t first_token_ns = -1;
    std::int64_t last_token_ns = -1;
    bool stopped = false;

private:
    const std::function<bool(std::int32_t)>& on_token_;
};

} // namespace

GenerationStats generate(RunConfig config, std::shared_ptr<const model::LlamaModel> model,
                         const workload::WorkloadRequest& request,
                         const std::function<bool(std::int32_t)>& on_token) {
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
    config.default_cache_tokens =
        static_cast<std::int64_t>(spec.prompt.size()) + request.max_tokens;
    config.requests = {tokenized};
    config.real_time = false;
    config.token_text = true; // token_sampled events carry the ids streamed

    TokenStream stream(on_token);
    ServingSession run(config, &stream, std::move(model));
    ServingSession::ServeOptions serve;
    serve.stop_requested = [&stream] {
        return stream.stopped;
    };
    const std::int64_t id = run.serve(serve).front();

    const sched::Request& r = run.engine().request(id);
    if (r.state == sched::RequestState::rejected) {
        throw std::runtime_error("the engine rejected the prompt: " + r.finish_reason);
    }
    GenerationStats stats;
    stats.prompt_tokens = r.prompt_length();
    stats.generated_tokens = r.generated;
    stats.stop_reason = r.state == sched::RequestState::aborted ? "stopped" : r.finish_reason;
    if (stream.admitted_ns >= 0 && stream.first_token_ns >= 0) {
        stats.prefill_seconds =
            static_cast<double>(stream.first_token_ns - stream.admitted_ns) * 1e-9;
        stats.decode_seconds =
            static_cast<double>(stream.last_token_ns - stream.first_token_ns) * 1e-9;
    }
    stats.speculation.add(r.accounting.drafted_tokens, r.accounting.accepted_tokens,
                          r.accounting.verify_steps);
    stats.backend = describe_backend(run.backend());
    stats.backend_note = run.backend_note();
    return stats;
}

} // namespace kvscope::session
