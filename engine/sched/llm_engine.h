// The serving loop: requests in, tokens out, one step at a time as
// schedule -> run -> postprocess. Owns the requests, the KV manager and the
// scheduler; runs the model on a backend it is given; reports everything it
// does to an EventSink.
#pragma once

#include "engine/events/engine_event.h"
#include "engine/kv/eviction_policy.h"
#include "engine/kv/kv_manager.h"
#include "engine/kv/offload_tier.h"
#include "engine/runner/backend.h"
#include "engine/runner/forward_batch.h"
#include "engine/sched/request.h"
#include "engine/sched/scheduler.h"
#include "engine/spec/speculative_config.h"
#include "engine/util/perf_counters.h"

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

namespace kvscope::sched {

struct EngineConfig {
    SchedulerConfig scheduler;
    bool prefix_caching = true;
    kv::CachePolicy cache_policy = kv::CachePolicy::lru; // which cached block goes first
    kv::EvictionConfig eviction;
    // Time every backend op and report it as op_slice events (recordings).
    bool record_ops = false;
    // Which sampled tokens end a request (the tokenizer's end-of-turn
    // tokens); empty: only the token limit does.
    std::function<bool(std::int32_t)> ends_generation;
    // A token's text as raw bytes (the tokenizer's); when set, events carry
    // the prompt's pieces and each sampled token's, so viewers show text.
    std::function<std::string(std::int32_t)> token_piece;
    // The clock request times are read from (arrival, admission, first
    // token, end); the host clock when empty. A simulated run (engine/sim)
    // gives its cost-model clock (its sink restamps the events with it).
    std::function<std::int64_t()> clock;
    // Keep the ids of ended requests for take_ended() (the simulator sums
    // each up as it ends); off, nothing is kept.
    bool report_ended = false;
    // Speculative decoding: decoding requests draft tokens (speculation.cpp)
    // that one pass of the model verifies; off by default.
    spec::SpeculativeConfig speculative;
    // The draft model's backend (DraftMethod::model), not owned: its KV pool
    // has the target's block count and size, and the target's block tables
    // index it too, so the draft's K/V live in the same block ids.
    runner::Backend* draft_backend = nullptr;
    // A second tier for the KV cache (capacity_blocks 0: none): blocks the
    // pool reclaims are saved there, by their prefix hash, and prefix hits
    // in it are loaded back. The engine fills in block_bytes.
    kv::OffloadTierConfig offload;
    bool offload_write_through = false; // save blocks as soon as they are cached
};

struct StepStats {
    std::int64_t step = 0;
    int sequences = 0;
    int prefill_tokens = 0;  // tokens computed that were not the last of their request
    int decode_tokens = 0;   // tokens generated (a verified draft gives several)
    int drafted_tokens = 0;  // speculative decoding: tokens drafted this step
    int accepted_tokens = 0; // and kept by verification
    int preempted = 0;
    double seconds = 0;
    std::vector<std::int64_t> admitted; // requests admitted (first, or again after preemption)
};

class LlmEngine : private runner::OpObserver, private kv::TierMover {
public:
    // `sink` may be null.
    LlmEngine(runner::Backend& backend, const EngineConfig& config,
              events::EventSink* sink = nullptr);
    ~LlmEngine() override;
    LlmEngine(const LlmEngine&) = delete;
    LlmEngine& operator=(const LlmEngine&) = delete;

    // Queues a request; returns its id. It runs when the scheduler admits it,
    // or ends rejected with the reason in finish_reason.
    std::int64_t add_request(RequestSpec spec);
    // Ends a waiting or running request; false when it already ended.
    bool abort(std::int64_t id);

    bool has_unfinished() const;
    // Drops an ended request's record (request() no longer knows it): a
    // replayed trace of thousands of requests keeps only those not ended.
    // False when it has not ended (or is not known).
    bool forget(std::int64_t id);
    // The requests that ended (finished, rejected, aborted) since the last
    // call, in the order they ended, when EngineConfig::report_ended asks
    // for them: a caller that sums up each ended request finds them without
    // scanning every one it holds.
    std::vector<std::int64_t> take_ended() { return std::exchange(ended_, {}); }
    // One step: schedule, run the model over the batch, sample, finish.
    StepStats step();

    const Request& request(std::int64_t id) const { return *requests_.at(id); }
    std::vector<std::int64_t> request_ids() const;
    const kv::KvManager& kv() const { return kv_; }
    // The second tier, or null when there is none.
    const kv::OffloadTier* offload_tier() const { return tier_.get(); }
    const runner::Backend& backend() const { return backend_; }
    const Scheduler& scheduler() const { return scheduler_; }
    const EngineConfig& config() const { return config_; }
    std::int64_t steps() const { return step_index_; }

    // The KV manager's invariants over every live block table; empty when
    // they hold.
    std::string check_invariants() const;

    // The run's settings as a JSON object (also the run_config event's text).
    std::string describe_config() const;

private:
    // step() in its three stages, then the cache's state after it.
    ScheduleResult schedule(StepStats& stats);
    std::vector<runner::SequenceStep> run(const ScheduleResult& plan);
    void postprocess(const ScheduleResult& plan, const std::vector<runner::SequenceStep>& steps,
                     StepStats& stats);
    void sample_cache();
    bool advance(Request& request, std::int32_t tokens);
    // Returns the blocks past the request's cached entries to the pool.
    int release_unused_blocks(Request& request); // how many
    std::int64_t now_ns() const;

    // Speculative decoding (speculation.cpp): fills each decoding request's
    // draft before the pass, and after it keeps what verification accepts,
    // rolling back the rest. verify() returns the logit rows it read.
    void draft_before_scheduling(); // prompt lookup: the scheduler reserves what it found
    void propose_drafts(const ScheduleResult& plan);
    // K passes of a drafter over the drafting sequences, one token each,
    // on the target's backend (self-draft: its first layers) or the draft
    // model's.
    void draft_tokens(std::span<const std::pair<Request*, int>> drafting);
    std::size_t verify(Request& request, std::size_t row, StepStats& stats);

    // Appends a sampled token to the request and says so (token_sampled,
    // first_token); why it ends the request (end token, token limit), or
    // empty.
    std::string append_token(Request& request, std::int32_t token);
    std::span<const float> logit_row(std::size_t row) const;

    void finish(Request& request, RequestState state, std::string reason);
    void release_blocks(Request& request);
    void apply_eviction(Request& request, std::size_t batch_index, bool prompt_done);
    void on_op(std::string_view name, int layer, std::int64_t begin_ns, std::int64_t end_ns,
               std::int64_t cpu_ns) override;
    // kv::TierMover: bytes between the backend's pool and the tier.
    bool offload(std::int64_t request, kv::BlockId block, kv::BlockHash hash) override;
    bool reload(std::int64_t request, kv::BlockId block, kv::BlockHash hash) override;
    void touch(kv::BlockHash hash) override;
    // The tier let `hash` go to make room: lookups stop finding it, and the
    // event says so.
    void dropped_from_tier(kv::BlockHash hash);
    void warn_tier_once(bool& said, const std::string& message);

    runner::Backend& backend_;
    EngineConfig config_;
    events::EventSink* sink_;
    kv::KvGroupLayout kv_layout_; // the backend's: how its layers share the blocks
    kv::KvManager kv_;
    std::vector<std::int64_t> ended_; // since take_ended()
    Scheduler scheduler_;
    std::unordered_map<std::int64_t, std::unique_ptr<Request>> requests_;
    std::int64_t next_id_ = 0;
    std::int64_t step_index_ = 0;
    // What the step running now cost (step_counters).
    std::unique_ptr<ThreadPerfCounters> counters_; // opened by the stepping thread
    std::thread::id counters_thread_;
    std::int64_t step_kv_entries_read_ = 0;
    std::vector<float> logits_;
    std::vector<float> draft_logits_;
    std::unique_ptr<kv::OffloadTier> tier_;
    std::vector<std::byte> tier_buffer_; // one block's bytes
    // Each kind of tier failure is said once, not once per block.
    bool said_copy_out_failed_ = false;
    bool said_write_failed_ = false;
    bool said_reload_failed_ = false;
    // Per chunk of the step: the last token and its draft, the tokens a
    // verifying pass computes.
    std::vector<std::vector<std::int32_t>> verify_tokens_;
    // The step's tokens when the backend sampled them (samples_on_device()):
    // one per logit row; logits_ is then unused.
    std::vector<std::int32_t> sampled_;
    bool sampled_on_device_ = false;
};

} // namespace kvscope::sched
