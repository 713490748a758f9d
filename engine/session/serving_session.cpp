#include "engine/session/serving_session.h"

#include "engine/session/model_loading.h"
#include "engine/session/serving_loop.h"

#include <algorithm>
#include <stdexcept>

namespace kvscope::session {

std::filesystem::path run_model_file(const RunConfig& config) {
    return model_file(config.model_path);
}

ServingSession::ServingSession(const RunConfig& config, events::EventSink* sink,
                               std::shared_ptr<const model::LlamaModel> model)
    : config_(config) {
    if (const std::string problem = config_.problem(); !problem.empty()) {
        throw std::runtime_error(problem);
    }
    resolve_backend_kind_with_reason(config_.backend.kind); // throws before a long load
    if (model) {
        model_ = std::move(model);
    } else {
        model_path_ = run_model_file(config_);
        model_ = load_model(model_path_);
    }
    if (const std::string problem =
            config_.eviction.problem(config_.block_size, model_->config().sliding_window);
        !problem.empty()) {
        throw std::runtime_error(problem);
    }
    KvCacheSpec cache;
    cache.block_size = config_.block_size;
    cache.format = config_.cache_format;
    cache.hybrid = config_.hybrid_kv;
    const ResolvedBackend resolved = resolve_backend_kind_with_reason(
        config_.backend.kind, cuda_cache_problem(model_->config(), cache));
    backend_note_ = resolved.fallback_note;
    const model::LlamaConfig& shape = model_->config();
    const int max_model_len =
        config_.max_model_len > 0 ? config_.max_model_len : shape.context_length;
    config_.scheduler.max_model_len = max_model_len;

    const std::vector<workload::WorkloadRequest> requests =
        config_.requests.empty() ? workload::load_workload(config_.workload, config_.preset)
                                 : config_.requests;
    sampling::SamplingParams sampling;
    sampling.temperature = config_.temperature;
    specs_ = to_request_specs(requests, model_->tokenizer(), sampling);
    for (std::size_t i = 0; i < specs_.size(); ++i) {
        sched::RequestSpec& spec = specs_[i];
        if (!requests[i].sampling) { // reproducible, and different per request
            spec.sampling.seed = config_.preset.seed * 1'000'003 + i;
        }
        // Outputs stop at the model length (longer prompts are rejected).
        const auto room = static_cast<int>(max_model_len - static_cast<int>(spec.prompt.size()));
        if (room > 0) {
            spec.max_tokens = std::min(spec.max_tokens, room);
        }
    }

    cache.num_blocks = resolve_num_blocks(config_.cache, shape, config_.cache_format,
                                          config_.block_size, config_.default_cache_tokens,
                                          backend_memory_bytes(resolved.kind), cache.hybrid);
    backend_ = make_backend(config_.backend, model_, cache);
    if (config_.speculative.enabled() && config_.speculative.method == spec::DraftMethod::model) {
        if (config_.draft_model_path.empty()) {
            throw std::runtime_error("draft:K with a draft model needs --draft-model FILE.gguf");
        }
        draft_model_ = load_model(model_file(config_.draft_model_path));
        if (const std::string problem = draft_model_mismatch(*model_, *draft_model_);
            !problem.empty()) {
            throw std::runtime_error(problem);
        }
        draft_backend_ = make_backend(config_.backend, draft_model_, cache);
    }

    sched::EngineConfig engine;
    engine.scheduler = config_.scheduler;
    engine.prefix_caching = config_.prefix_caching;
    engine.cache_policy = config_.cache_policy;
    engine.eviction = config_.eviction;
    engine.speculative = config_.speculative;
    engine.draft_backend = draft_backend_.get();
    engine.offload = config_.offload;
    engine.offload_write_through = config_.offload_write_through;
    engine.record_ops = config_.record_ops;
    const tokenizer::Tokenizer& tok = model_->tokenizer();
    engine.ends_generation = [&tok](std::int32_t id) {
        return tok.ends_generation(id);
    };
    if (config_.token_text) {
        engine.token_piece = [&tok](std::int32_t id) {
            return tok.token_bytes(id, true);
        };
    }
    engine_ = std::make_unique<sched::LlmEngine>(*backend_, engine, sink);
}

ServingSession::~ServingSession() = default;

std::map<std::string, std::string> ServingSession::recording_metadata() const {
    return {
        {"model_name", model_name(*model_)},
        {"requests", std::to_string(specs_.size())},
        {"backend", backend_->name()},
        {"run_config", engine_->describe_config()},
    };
}

std::vector<std::int64_t> ServingSession::serve(const ServeOptions& options) {
    DriveOptions drive;
    drive.real_time = config_.real_time;
    drive.stop_requested = options.stop_requested;
    drive.before_step = options.before_step;
    drive.on_step = options.on_step;
    return session::drive(*engine_, specs_, drive);
}

std::size_t ServingSession::ended_requests() const {
    std::size_t ended = 0;
    for (const std::int64_t id : engine_->request_ids()) {
        ended += engine_->request(id).is_done() ? 1 : 0;
    }
    return ended;
}

} // namespace kvscope::session
