#include "engine/sched/llm_engine.h"

#include "engine/events/typed_events.h"
#include "engine/runner/forward_batch.h"
#include "engine/sched/token_eviction.h"
#include "engine/util/cpu_clock.h"
#include "engine/util/host_clock.h"
#include "kernels/nvtx_range.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

namespace kvscope::sched {
namespace {

// The scheduler's settings with the lookahead speculation needs.
SchedulerConfig scheduler_config(const EngineConfig& config) {
    SchedulerConfig s = config.scheduler;
    s.lookahead = config.speculative.enabled() ? config.speculative.draft_tokens : 0;
    s.draft_before_scheduling =
        config.speculative.enabled() && config.speculative.method == spec::DraftMethod::ngram;
    return s;
}

// Why speculative decoding cannot run with these settings, or empty.
std::string speculation_problem(const EngineConfig& config, const runner::Backend& backend) {
    const spec::SpeculativeConfig& s = config.speculative;
    if (!s.enabled()) {
        return {};
    }
    if (std::string problem = s.problem(backend.layers()); !problem.empty()) {
        return problem;
    }
    if (s.method == spec::DraftMethod::layers && backend.layers() == 0) {
        return "the " + backend.name() + " backend cannot run a self-draft (--draft-layers)";
    }
    if (s.method == spec::DraftMethod::model) {
        const runner::Backend* draft = config.draft_backend;
        if (draft == nullptr) {
            return "draft-model speculation needs the draft model's backend";
        }
        if (draft->block_size() != backend.block_size() ||
            draft->num_blocks() != backend.num_blocks()) {
            return "the draft model's KV pool must have the target's blocks (" +
                   std::to_string(backend.num_blocks()) + " x " +
                   std::to_string(backend.block_size()) + ")";
        }
        if (backend.kv_groups().hybrid() || draft->kv_groups().hybrid()) {
            // The draft's K/V live in the target's block ids: one table each.
            return "a draft model cannot share a hybrid KV cache's block tables (run the "
                   "sliding-window model with a plain cache, or draft with --draft-layers)";
        }
        if (draft->vocab_size() != backend.vocab_size()) {
            return "the draft model's vocabulary (" + std::to_string(draft->vocab_size()) +
                   " tokens) is not the target's (" + std::to_string(backend.vocab_size()) + ")";
        }
        const kv::KvCacheFormat draft_format = draft->cache_format();
        if (kv::quantises_whole_blocks(draft_format.key) ||
            kv::quantises_whole_blocks(draft_format.value)) {
            return "speculative decoding does not combine with KIVI's whole-block formats";
        }
    }
    if (config.eviction.enabled()) {
        // Compaction renumbers cache entries under a draft's slots.
        return "speculative decoding does not combine with token eviction";
    }
    const kv::KvCacheFormat format = backend.cache_format();
    if (kv::quantises_whole_blocks(format.key) || kv::quantises_whole_blocks(format.value)) {
        // A block quantised when a draft filled it cannot take the rollback.
        return "speculative decoding does not combine with KIVI's whole-block formats";
    }
    return {};
}

} // namespace

LlmEngine::LlmEngine(runner::Backend& backend, const EngineConfig& config, events::EventSink* sink)
    : backend_(backend)
    , config_(config)
    , sink_(sink)
    , kv_layout_(backend.kv_groups())
    , kv_(backend.num_blocks(), backend.block_size(), config.prefix_caching, config.cache_policy,
          kv_layout_.windows())
    , scheduler_(scheduler_config(config), kv_) {
    kv_.set_event_sink(sink);
    if (const std::string problem = config.eviction.problem(
            backend.block_size(), kv_layout_.hybrid() ? kv_.window(kv_.groups() - 1) : 0);
        !problem.empty()) {
        throw std::invalid_argument(problem);
    }
    if (const std::string problem = speculation_problem(config, backend); !problem.empty()) {
        throw std::invalid_argument(problem);
    }
    if (config.offload.capacity_blocks > 0) {
        if (!config.prefix_caching) {
            throw std::invalid_argument("the offload tier keeps prefix-cached blocks: it needs "
                                        "prefix caching");
        }
        if (backend.kv_groups().hybrid()) {
            throw std::invalid_argument(
                "the offload tier keeps whole-context blocks, not a hybrid cache's window groups "
                "(run the sliding-window model with a plain cache to offload)");
        }
        if (backend.block_bytes() <= 0) {
            throw std::invalid_argument("the " + backend.name() +
                                        " backend cannot move KV blocks to an offload tier");
        }
        kv::OffloadTierConfig tier = config.offload;
        tier.block_bytes = backend.block_bytes();
        tier_ = std::make_unique<kv::OffloadTier>(tier);
        tier_buffer_.resize(static_cast<std::size_t>(tier.block_bytes));
        kv_.set_tier(this, config.offload_write_through);
    }
    events::emit_now(sink_, events::RunConfig{.blocks = backend.num_blocks(),
                                              .block_size = backend.block_size(),
                                              .settings = describe_config()});
    if (config.record_ops && sink != nullptr) {
        backend.set_op_observer(this);
    }
}

LlmEngine::~LlmEngine() {
    if (config_.record_ops) {
        backend_.set_op_observer(nullptr);
    }
}

void LlmEngine::on_op(std::string_view name, int layer, std::int64_t begin_ns, std::int64_t end_ns,
                      std::int64_t cpu_ns) {
    events::EngineEvent event = events::to_event(events::OpSlice{
        .end_ns = end_ns,
        .layer = layer,
        .step = step_index_ - 1, // step() has counted the step it runs
        .cpu_ns = cpu_ns,
        .op = std::string(name),
    });
    event.time_ns = begin_ns; // stamped when it began, not now
    sink_->on_event(event);
}

void LlmEngine::warn_tier_once(bool& said, const std::string& message) {
    if (!said) {
        std::fprintf(stderr, "kvscope: offload tier: %s\n", message.c_str());
        said = true;
    }
}

bool LlmEngine::offload(std::int64_t request, kv::BlockId block, kv::BlockHash hash) {
    const std::int64_t start = host_now_ns();
    try {
        backend_.read_block(block, tier_buffer_);
    } catch (const std::exception& e) {
        warn_tier_once(said_copy_out_failed_,
                       std::string("could not copy a block out of the pool (") + e.what() +
                           "); such blocks are not offloaded");
        return false;
    }
    std::optional<kv::BlockHash> evicted;
    try {
        evicted = tier_->put(hash, tier_buffer_);
    } catch (const kv::OffloadTier::WriteFailed& e) {
        if (e.evicted) {
            dropped_from_tier(*e.evicted); // gone as well
        }
        // A full disk loses the block, as a pool without a tier would; the
        // run goes on.
        warn_tier_once(said_write_failed_,
                       std::string(e.what()) + "; blocks that do not fit are dropped");
        return false;
    }
    if (evicted) {
        dropped_from_tier(*evicted);
    }
    events::emit_now(sink_, events::BlockOffloaded{.block = block,
                                                   .request = request,
                                                   .hash = hash,
                                                   .nanoseconds = host_now_ns() - start,
                                                   .bytes = tier_->config().block_bytes,
                                                   .tier_blocks = tier_->size()});
    return true;
}

bool LlmEngine::reload(std::int64_t request, kv::BlockId block, kv::BlockHash hash) {
    const std::int64_t start = host_now_ns();
    try {
        if (!tier_->get(hash, tier_buffer_)) {
            kv_.forget_tier_hash(hash); // the tier no longer has it
            return false;
        }
        backend_.write_block(block, tier_buffer_);
    } catch (const std::exception& e) {
        if (!tier_->contains(hash)) { // a block it could not read back: dropped
            dropped_from_tier(hash);
        }
        warn_tier_once(said_reload_failed_,
                       std::string(e.what()) + "; prefixes it cannot load are computed instead");
        return false;
    }
    events::emit_now(sink_, events::BlockReloaded{.block = block,
                                                  .request = request,
                                                  .hash = hash,
                                                  .nanoseconds = host_now_ns() - start,
                                                  .bytes = tier_->config().block_bytes,
                                                  .tier_blocks = tier_->size()});
    return true;
}

void LlmEngine::dropped_from_tier(kv::BlockHash hash) {
    kv_.forget_tier_hash(hash);
    events::emit_now(sink_, events::TierDropped{.hash = hash, .tier_blocks = tier_->size()});
}

void LlmEngine::touch(kv::BlockHash hash) {
    tier_->touch(hash);
}

std::string LlmEngine::describe_config() const {
    const kv::KvCacheFormat format = backend_.cache_format();
    const kv::EvictionConfig& e = config_.eviction;
    const SchedulerConfig& s = config_.scheduler;
    nlohmann::json settings{
        {"backend", backend_.name()},
        {"blocks", backend_.num_blocks()},
        {"block_size", backend_.block_size()},
        {"cache_type_k", kv::kv_format_name(format.key)},
        {"cache_type_v", kv::kv_format_name(format.value)},
        {"prefix_caching", config_.prefix_caching},
        {"cache_policy", kv::cache_policy_name(config_.cache_policy)},
        {"max_num_seqs", s.max_num_seqs},
        {"max_num_batched_tokens", s.max_num_batched_tokens},
        {"max_model_len", s.max_model_len},
        {"chunked_prefill", s.chunked_prefill},
        {"preemption_victim", victim_policy_name(s.victim)},
        {"eviction", kv::eviction_kind_name(e.kind)},
        {"kv_budget", e.budget},
        {"sink_tokens", e.sink_tokens},
        {"recent_window", e.recent_tokens},
        {"snapkv_window", e.snapkv_window},
        {"snapkv_pool", e.snapkv_pool},
        {"speculative",
         spec::draft_method_name(config_.speculative.enabled() ? config_.speculative.method
                                                               : spec::DraftMethod::none)},
        {"draft_tokens", config_.speculative.enabled() ? config_.speculative.draft_tokens : 0},
        {"draft_model", config_.speculative.method == spec::DraftMethod::model},
        {"offload_tier",
         tier_ ? std::string(kv::tier_medium_name(config_.offload.medium)) : std::string("none")},
        {"offload_blocks", tier_ ? config_.offload.capacity_blocks : 0},
        {"offload_write_through", tier_ != nullptr && config_.offload_write_through},
        {"draft_layers", config_.speculative.method == spec::DraftMethod::layers
                             ? config_.speculative.draft_layers
                             : 0},
    };
    if (const kv::KvGroupLayout& groups = kv_layout_; groups.hybrid()) {
        // Which layers each group's blocks hold, and over what window.
        nlohmann::json list = nlohmann::json::array();
        for (const kv::KvGroup& group : groups.groups) {
            list.push_back({{"window", group.window}, {"layers", group.layers}});
        }
        settings["kv_groups"] = std::move(list);
        settings["layers_per_block"] = groups.layers_per_block;
    }
    return settings.dump();
}

std::int64_t LlmEngine::add_request(RequestSpec spec) {
    auto request = std::make_unique<Request>();
    request->id = next_id_++;
    request->tokens = spec.prompt;
    request->sampler = std::make_unique<sampling::Sampler>(spec.sampling);
    request->spec = std::move(spec);
    request->arrival_ns = now_ns();
    Request* r = request.get();
    requests_.emplace(r->id, std::move(request));
    std::string pieces;
    if (config_.token_piece && sink_ != nullptr) {
        std::vector<std::string> prompt;
        prompt.reserve(r->spec.prompt.size());
        for (const std::int32_t id : r->spec.prompt) {
            prompt.push_back(config_.token_piece(id));
        }
        pieces = events::encode_pieces(prompt);
    }
    events::emit_now(sink_, events::RequestArrived{.request = r->id,
                                                   .prompt_tokens = r->prompt_length(),
                                                   .prompt_pieces = std::move(pieces)});
    if (std::string reason = scheduler_.rejection_reason(*r); !reason.empty()) {
        finish(*r, RequestState::rejected, std::move(reason));
    } else if (const std::string problem = r->spec.sampling.problem(); !problem.empty()) {
        finish(*r, RequestState::rejected, "bad sampling parameters: " + problem);
    } else {
        scheduler_.add(r);
    }
    return r->id;
}

std::int64_t LlmEngine::now_ns() const {
    return config_.clock ? config_.clock() : host_now_ns();
}

bool LlmEngine::forget(std::int64_t id) {
    const auto it = requests_.find(id);
    if (it == requests_.end() || !it->second->is_done()) {
        return false;
    }
    requests_.erase(it);
    return true;
}

void LlmEngine::release_blocks(Request& request) {
    const std::vector<kv::BlockId> released = kv_.release(request.id, request.blocks);
    backend_.release_blocks(released);
}

void LlmEngine::finish(Request& request, RequestState state, std::string reason) {
    if (config_.report_ended) {
        ended_.push_back(request.id);
    }
    scheduler_.remove(&request);
    release_blocks(request);
    request.state = state;
    request.finish_reason = std::move(reason);
    request.finish_ns = now_ns();
    switch (state) {
    case RequestState::aborted:
        events::emit_now(sink_, events::RequestAborted{.request = request.id});
        break;
    case RequestState::rejected:
        events::emit_now(
            sink_, events::RequestRejected{.request = request.id, .reason = request.finish_reason});
        break;
    default:
        events::emit_now(sink_, events::RequestFinished{.request = request.id,
                                                        .generated_tokens = request.generated,
                                                        .reason = request.finish_reason});
        break;
    }
}

bool LlmEngine::abort(std::int64_t id) {
    const auto it = requests_.find(id);
    if (it == requests_.end() || it->second->is_done()) {
        return false;
    }
    finish(*it->second, RequestState::aborted, "aborted");
    return true;
}

bool LlmEngine::has_unfinished() const {
    return scheduler_.waiting_count() + scheduler_.running_count() > 0;
}

std::vector<std::int64_t> LlmEngine::request_ids() const {
    std::vector<std::int64_t> ids;
    for (const auto& [id, request] : requests_) {
        ids.push_back(id);
    }
    std::sort(ids.begin(), ids.end());
    return ids;
}

namespace {

// The step's phase: prompt tokens only, one generated token per sequence
// only, or both in one batch (chunked prefill beside decoding sequences).
events::StepPhase step_phase(const ScheduleResult& plan) {
    if (plan.chunks.empty()) {
        return events::StepPhase::idle;
    }
    bool prefill = false;
    bool decode = false;
    for (const ScheduledChunk& chunk : plan.chunks) {
        // One token that completes a sequence past its prompt; a request
        // catching up after a preemption also computes tokens past its
        // prompt, but those are prefill.
        const Request& r = *chunk.request;
        const bool decoding = chunk.tokens == 1 && r.computed >= r.prompt_length() &&
                              r.computed + 1 == static_cast<std::int32_t>(r.tokens.size());
        (decoding ? decode : prefill) = true;
    }
    return prefill && decode ? events::StepPhase::mixed
           : prefill         ? events::StepPhase::prefill
                             : events::StepPhase::decode;
}

} // namespace

// Schedules the step and says so: rejections, preemptions, admissions with
// their prefix hits, then step_begin.
ScheduleResult LlmEngine::schedule(StepStats& stats) {
    ScheduleResult plan = [this] {
        const nvtx::Range range("schedule");
        return scheduler_.schedule();
    }();
    backend_.release_blocks(plan.released_blocks);
    for (Request* r : plan.rejected) {
        finish(*r, RequestState::rejected, r->finish_reason);
    }
    for (Request* r : plan.preempted) {
        events::emit_now(sink_, events::RequestPreempted{.request = r->id,
                                                         .preemptions = r->accounting.preemptions});
    }
    for (Request* r : plan.admitted) {
        stats.admitted.push_back(r->id);
        if (r->admitted_ns < 0) {
            r->admitted_ns = now_ns();
        }
        const RequestAccounting& a = r->accounting;
        const auto tokens = static_cast<std::int64_t>(r->tokens.size());
        events::emit_now(sink_,
                         events::PrefixLookup{.request = r->id,
                                              .hit_tokens = r->computed,
                                              .prompt_tokens = tokens,
                                              .short_of_block_tokens = a.shared_short_tokens});
        events::emit_now(sink_, events::RequestAdmitted{.request = r->id,
                                                        .cached_tokens = r->computed,
                                                        .computed_tokens = tokens - r->computed,
                                                        .blocks_hit = a.blocks_hit,
                                                        .blocks_missed = a.blocks_missed});
    }
    stats.sequences = static_cast<int>(plan.chunks.size());
    stats.preempted = static_cast<int>(plan.preempted.size());
    std::int64_t scheduled_tokens = 0;
    for (const ScheduledChunk& chunk : plan.chunks) {
        scheduled_tokens += chunk.tokens + chunk.draft_slots;
    }
    const events::StepPhase phase = step_phase(plan);
    events::emit_now(sink_, events::StepBegin{.step = stats.step,
                                              .scheduled_tokens = scheduled_tokens,
                                              .sequences = stats.sequences,
                                              .phase = phase});
    return plan;
}

// Runs the model over the scheduled chunks; returns what each sequence
// asked of the pass (postprocess needs to know which produced logits).
std::vector<runner::SequenceStep> LlmEngine::run(const ScheduleResult& plan) {
    propose_drafts(plan);
    std::vector<runner::SequenceStep> steps;
    steps.reserve(plan.chunks.size());
    verify_tokens_.resize(plan.chunks.size());
    bool verifying = false;
    const kv::EvictionConfig& eviction = config_.eviction;
    for (std::size_t i = 0; i < plan.chunks.size(); ++i) {
        const ScheduledChunk& chunk = plan.chunks[i];
        Request& r = *chunk.request;
        const bool completes =
            r.computed + chunk.tokens == static_cast<std::int32_t>(r.tokens.size());
        runner::SequenceStep step{
            &r.blocks,
            std::span<const std::int32_t>(r.tokens).subspan(static_cast<std::size_t>(r.computed),
                                                            static_cast<std::size_t>(chunk.tokens)),
            false, !completes};
        // Positions count tokens; the cache may hold fewer (evicted).
        step.first_position = r.computed;
        if (eviction.kind == kv::EvictionKind::h2o) {
            step.capture_attention_from = 0;
        } else if (eviction.kind == kv::EvictionKind::snapkv && !r.prompt_compressed &&
                   r.computed + chunk.tokens >= r.prompt_length()) {
            // The prompt's last window scores the rest.
            step.capture_attention_from = std::max(0, r.prompt_length() - eviction.snapkv_window);
        }
        if (!r.draft.empty()) {
            // The last sampled token and its draft, each with its logits:
            // row j checks draft token j, the last row gives one more.
            std::vector<std::int32_t>& tokens = verify_tokens_[i];
            tokens.assign(1, r.tokens.back());
            tokens.insert(tokens.end(), r.draft.begin(), r.draft.end());
            step.tokens = tokens;
            step.logits_for_all_tokens = true;
            verifying = true;
        }
        steps.push_back(step);
    }
    const runner::ForwardBatch batch =
        runner::build_forward_batch(steps, backend_.block_size(), backend_.batch_detail());
    // Token j of a chunk attends the entries cached before the chunk and the
    // chunk's first j + 1; in a hybrid cache a sliding group's layers read
    // their window at most, so the count is the layers' average.
    for (const runner::SequenceStep& s : steps) {
        const auto tokens = static_cast<std::int64_t>(s.tokens.size());
        const std::int64_t length = s.blocks->length;
        if (!kv_.hybrid()) {
            step_kv_entries_read_ += tokens * length + tokens * (tokens + 1) / 2;
            continue;
        }
        const kv::KvGroupLayout& layout = kv_layout_;
        double entries = 0;
        for (const kv::KvGroup& group : layout.groups) {
            std::int64_t read = 0;
            for (std::int64_t t = 0; t < tokens; ++t) {
                const std::int64_t context = length + t + 1;
                read += group.window > 0 ? std::min<std::int64_t>(context, group.window) : context;
            }
            entries += static_cast<double>(read) * static_cast<double>(group.layers.size());
        }
        step_kv_entries_read_ +=
            std::llround(entries / static_cast<double>(std::max(1, layout.layers())));
    }
    // A backend that samples where the logits are hands back token ids; the
    // draws still come from each request's generator, one per logit row as
    // on the host. The repetition penalty reads the history on the host, so
    // a step with a request that uses it samples there.
    std::vector<runner::RowSampling> rows;
    // Verification reads whole distributions, so a verifying step samples
    // on the host.
    sampled_on_device_ = backend_.samples_on_device() && !verifying;
    for (std::size_t i = 0; i < steps.size() && sampled_on_device_; ++i) {
        const sampling::SamplingParams& p = plan.chunks[i].request->sampler->params();
        if (p.repetition_penalty != 1.0f && p.repetition_window > 0) {
            sampled_on_device_ = false;
        }
    }
    if (sampled_on_device_) {
        for (std::size_t i = 0; i < steps.size(); ++i) {
            if (steps[i].skip_logits) {
                continue;
            }
            sampling::Sampler& sampler = *plan.chunks[i].request->sampler;
            const sampling::SamplingParams& p = sampler.params();
            rows.push_back({p.temperature, p.top_k, p.top_p, p.min_p,
                            p.temperature > 0.0f ? sampler.draw_uniform() : 0.0});
        }
        sampled_.resize(rows.size());
    } else {
        logits_.resize(batch.logit_tokens.size() * static_cast<std::size_t>(backend_.vocab_size()));
    }
    {
        // A literal: it outlives the NVTX range.
        const nvtx::Range phase_range(events::step_phase_name(step_phase(plan)).data());
        if (sampled_on_device_) {
            backend_.forward_sampled(batch, rows, sampled_.data());
        } else {
            backend_.forward(batch, logits_.data());
        }
    }

    return steps;
}

// Counts `n` more computed tokens of the request as cached (accounting,
// length, prefix-cache registration); whether they completed its prompt.
bool LlmEngine::advance(Request& r, std::int32_t n) {
    const std::int32_t end = r.computed + n;
    // New work above the high-water mark; below it, recomputation.
    const std::int32_t fresh = std::max(0, end - std::max(r.computed, r.high_water));
    r.accounting.computed_tokens += fresh;
    r.accounting.recomputed_tokens += n - fresh;
    r.high_water = std::max(r.high_water, end);
    const bool prompt_done = r.computed < r.prompt_length() && end >= r.prompt_length();
    r.computed = end;
    r.blocks.length += n;
    kv_.cache_full_blocks(r.id, r.blocks, r.tokens, r.blocks.length, r.spec.cache_key);
    return prompt_done;
}

std::span<const float> LlmEngine::logit_row(std::size_t row) const {
    const auto vocab = static_cast<std::size_t>(backend_.vocab_size());
    return std::span<const float>(logits_).subspan(row * vocab, vocab);
}

std::string LlmEngine::append_token(Request& r, std::int32_t token) {
    r.tokens.push_back(token);
    ++r.generated;
    if (config_.token_piece && sink_ != nullptr) {
        events::emit_now(sink_, events::TokenSampled{.request = r.id,
                                                     .token = token,
                                                     .generated = r.generated,
                                                     .piece = config_.token_piece(token)});
    }
    if (r.generated == 1) {
        r.first_token_ns = now_ns();
        events::emit_now(sink_, events::FirstToken{.request = r.id});
    }
    if (!r.spec.ignore_eos && config_.ends_generation && config_.ends_generation(token)) {
        return "end token";
    }
    if (r.generated >= r.spec.max_tokens) {
        return "token limit";
    }
    return {};
}

// Advances each sequence past its chunk: prefix-cache registration,
// eviction, sampling, and finishing those that are done.
void LlmEngine::postprocess(const ScheduleResult& plan,
                            const std::vector<runner::SequenceStep>& steps, StepStats& stats) {
    std::size_t row = 0;
    const std::int64_t capacity = scheduler_.sequence_capacity();
    for (std::size_t i = 0; i < plan.chunks.size(); ++i) {
        Request& r = *plan.chunks[i].request;
        if (!r.draft.empty()) {
            row += verify(r, row, stats);
            continue;
        }
        const std::int32_t n = plan.chunks[i].tokens;
        const bool prompt_done = advance(r, n);
        apply_eviction(r, i, prompt_done);
        if (plan.chunks[i].draft_slots > 0) {
            // Slots reserved for a draft that did not come: give them back.
            release_unused_blocks(r);
        }
        if (steps[i].skip_logits) {
            stats.prefill_tokens += n;
            continue;
        }
        stats.prefill_tokens += n - 1;
        ++stats.decode_tokens;
        const std::int32_t next =
            sampled_on_device_ ? sampled_[row] : r.sampler->sample(logit_row(row), r.tokens);
        ++row;
        std::string reason = append_token(r, next);
        if (reason.empty() && static_cast<std::int64_t>(r.blocks.length) + 2 > capacity) {
            reason = "cache full";
        }
        if (!reason.empty()) {
            finish(r, RequestState::finished, std::move(reason));
        }
    }
    // The step moved every window: sliding groups let go of what they left
    // (after verification, whose rollback needs the draft's blocks no more).
    if (kv_.hybrid()) {
        for (const ScheduledChunk& chunk : plan.chunks) {
            if (!chunk.request->is_done()) {
                backend_.release_blocks(
                    kv_.release_outside_window(chunk.request->id, chunk.request->blocks));
            }
        }
    }
}

// The cache after the step: fill, blocks and bytes.
void LlmEngine::sample_cache() {
    std::int64_t entries = 0;
    std::int64_t slots = 0;
    for (const Request* r : scheduler_.running()) {
        entries += r->blocks.length;
        slots += static_cast<std::int64_t>(r->blocks.block_table.size()) * kv_.block_size();
    }
    events::emit_now(sink_, events::CacheFill{.entries = entries, .capacity = slots});
    const kv::KvManagerStats memory = kv_.stats();
    events::emit_now(sink_, events::MemorySample{.used_blocks = memory.used,
                                                 .cached_blocks = memory.cached,
                                                 .free_blocks = memory.free,
                                                 .total_blocks = memory.total});
    if (kv_.hybrid()) {
        for (int g = 0; g < kv_.groups(); ++g) {
            const auto i = static_cast<std::size_t>(g);
            events::emit_now(sink_,
                             events::GroupBlocks{.group = g,
                                                 .window = kv_.window(g),
                                                 .used_blocks = memory.used_by_group[i],
                                                 .cached_blocks = memory.cached_by_group[i]});
        }
    }
    if (memory.total > 0) {
        const std::int64_t block_bytes = backend_.kv_cache_bytes() / memory.total;
        events::emit_now(sink_, events::KvBytes{.used_bytes = memory.used * block_bytes,
                                                .cached_bytes = memory.cached * block_bytes,
                                                .free_bytes = memory.free * block_bytes,
                                                .bytes_per_block = block_bytes,
                                                .formats = backend_.cache_format().describe()});
    }
    if (const std::optional<runner::DeviceMemory> device = backend_.device_memory()) {
        events::emit_now(sink_,
                         events::DeviceMemory{.weights_bytes = device->weights,
                                              .kv_pool_bytes = device->kv_pool,
                                              .device_used_bytes = device->total - device->free,
                                              .device_total_bytes = device->total,
                                              .device = backend_.name()});
    }
}

StepStats LlmEngine::step() {
    const std::int64_t start = host_now_ns();
    if (sink_ != nullptr && (!counters_ || counters_thread_ != std::this_thread::get_id())) {
        // Hardware counters count the thread that opened them.
        counters_ = std::make_unique<ThreadPerfCounters>();
        counters_thread_ = std::this_thread::get_id();
    }
    // Costs are measured only for someone listening: no clock reads otherwise.
    const std::int64_t cpu_start = sink_ != nullptr ? thread_cpu_ns() : 0;
    const CounterReading counted_start = counters_ ? counters_->read() : CounterReading{};
    step_kv_entries_read_ = 0;
    StepStats stats;
    stats.step = step_index_++;
    const nvtx::Range step_range("step", stats.step);
    draft_before_scheduling();
    const ScheduleResult plan = schedule(stats);
    if (!plan.chunks.empty()) {
        postprocess(plan, run(plan), stats);
    }
    sample_cache();
    if (sink_ != nullptr) {
        const CounterReading counted_end = counters_ ? counters_->read() : CounterReading{};
        const auto difference = [](std::int64_t from, std::int64_t to) {
            return from >= 0 && to >= 0 ? to - from : -1;
        };
        events::emit_now(sink_, events::StepCounters{
                                    .cpu_ns = thread_cpu_ns() - cpu_start,
                                    .instructions = difference(counted_start.instructions,
                                                               counted_end.instructions),
                                    .cycles = difference(counted_start.cycles, counted_end.cycles),
                                    .kv_entries_read = step_kv_entries_read_});
    }
    events::emit_now(sink_, events::StepEnd{.step = stats.step,
                                            .prefill_tokens = stats.prefill_tokens,
                                            .decode_tokens = stats.decode_tokens});
    stats.seconds = static_cast<double>(host_now_ns() - start) * 1e-9;
    return stats;
}

void LlmEngine::apply_eviction(Request& r, std::size_t batch_index, bool prompt_done) {
    const kv::EvictionConfig& eviction = config_.eviction;
    if (!eviction.enabled()) {
        return;
    }
    if (eviction.needs_attention()) {
        const std::span<const float> captured = backend_.captured_attention(batch_index);
        r.attention.resize(static_cast<std::size_t>(r.blocks.length), 0.0f);
        if (eviction.kind == kv::EvictionKind::snapkv) {
            std::fill(r.attention.begin(), r.attention.end(), 0.0f); // this step's scores only
        }
        for (std::size_t j = 0; j < captured.size() && j < r.attention.size(); ++j) {
            r.attention[j] += captured[j];
        }
    }
    std::vector<std::int32_t> kept;
    if (eviction.kind == kv::EvictionKind::snapkv) {
        if (!prompt_done || r.prompt_compressed) {
            return;
        }
        r.prompt_compressed = true;
        kept = kv::select_kept(eviction, r.blocks.length, r.attention);
    } else if (kv::should_evict(eviction, r.blocks.length, kv_.block_size())) {
        kept = kv::select_kept(eviction, r.blocks.length, r.attention);
    } else {
        return;
    }
    const EvictionOutcome outcome =
        compact_sequence(r.id, kept, r.blocks, r.attention, kv_, backend_);
    if (outcome.evicted_tokens > 0) {
        r.accounting.evicted_tokens += outcome.evicted_tokens;
        events::emit_now(sink_, events::TokensEvicted{.request = r.id,
                                                      .tokens = outcome.evicted_tokens,
                                                      .blocks_released = outcome.blocks_released,
                                                      .entries_left = r.blocks.length});
        for (const auto& [block, held] : outcome.rewritten) {
            events::emit_now(
                sink_, events::BlockCompacted{.block = block, .request = r.id, .entries = held});
        }
    }
}

std::string LlmEngine::check_invariants() const {
    std::vector<const kv::SequenceBlocks*> live;
    for (const auto& [id, request] : requests_) {
        live.push_back(&request->blocks);
    }
    if (std::string problem = kv_.check(live); !problem.empty()) {
        return problem;
    }
    if (tier_) {
        // What lookups find in the tier is exactly what it holds.
        const std::vector<kv::BlockHash> indexed = kv_.tier_hashes();
        if (static_cast<std::int64_t>(indexed.size()) != tier_->size()) {
            return "the KV manager indexes " + std::to_string(indexed.size()) +
                   " blocks in the offload tier, which holds " + std::to_string(tier_->size());
        }
        for (const kv::BlockHash hash : indexed) {
            if (!tier_->contains(hash)) {
                return "the KV manager finds a block in the offload tier that it does not hold";
            }
        }
    }
    return {};
}

} // namespace kvscope::sched
