// Continuous batching: each step takes running requests first (a decode
// token, or the next chunk of their prefill), then admits waiting requests in
// arrival order while the step's token budget, the sequence limit and the
// cache allow. When a running request cannot get a block, a victim chosen by
// policy is preempted: its blocks are freed and it goes back to the front of
// the queue, to be recomputed later (vLLM's recompute preemption). Pure
// policy over the KV manager's bookkeeping; the engine runs the model.
#pragma once

#include "engine/kv/kv_manager.h"
#include "engine/sched/request.h"

#include <deque>
#include <optional>
#include <string_view>
#include <vector>

namespace kvscope::sched {

enum class VictimPolicy {
    newest,  // the most recently admitted (vLLM's choice: least work lost)
    oldest,  // the longest running
    largest, // the one holding the most blocks (frees the most at once)
};

std::string_view victim_policy_name(VictimPolicy policy);
std::optional<VictimPolicy> parse_victim_policy(std::string_view name);

struct SchedulerConfig {
    int max_num_seqs = 64;             // sequences in one step (vLLM --max-num-seqs)
    int max_num_batched_tokens = 1024; // tokens in one step (vLLM --max-num-batched-tokens)
    bool chunked_prefill = true;       // split prompts longer than the budget over steps
    VictimPolicy victim = VictimPolicy::newest;
    int max_model_len = 0; // longest prompt + output (vLLM --max-model-len); 0: no limit
    // Slots a decoding request reserves past its next token for a draft to
    // be verified in the same pass (speculative decoding's lookahead); 0: off.
    int lookahead = 0;
    // The engine proposes drafts before scheduling (prompt lookup, which
    // costs nothing): slots are reserved for the draft's length only.
    bool draft_before_scheduling = false;
};

struct ScheduledChunk {
    Request* request = nullptr;
    std::int32_t tokens = 0; // computed this step, from request->computed on
    // Slots after them reserved for a draft (lookahead), from the budget and
    // free blocks left once every request has its tokens: the step may
    // compute that many more tokens, which verification keeps or rolls back.
    std::int32_t draft_slots = 0;
};

struct ScheduleResult {
    std::vector<ScheduledChunk> chunks;
    std::vector<Request*> admitted;           // first admitted (or re-admitted) this step
    std::vector<Request*> preempted;          // sent back to the queue this step
    std::vector<Request*> rejected;           // can never run, with the reason set
    std::vector<kv::BlockId> released_blocks; // by preemption: free or cached now
};

class Scheduler {
public:
    Scheduler(const SchedulerConfig& config, kv::KvManager& kv);

    const SchedulerConfig& config() const { return config_; }
    // Tokens one sequence may hold with this cache and step budget (a
    // request that would need more is rejected, one that reaches it ends).
    std::int64_t sequence_capacity() const {
        return kv_.tokens_per_sequence(config_.max_num_batched_tokens);
    }

    // Queues a request (state waiting).
    void add(Request* request);
    // Takes a request out of the queue or the running set; the caller frees
    // its blocks. False when it is not here.
    bool remove(Request* request);

    ScheduleResult schedule();

    // Moves a request the engine finished out of the running set.
    void finish(Request* request);

    std::size_t waiting_count() const { return waiting_.size(); }
    std::size_t running_count() const { return running_.size(); }
    const std::vector<Request*>& running() const { return running_; }
    const std::deque<Request*>& waiting() const { return waiting_; }

    // Why `request` can never run with this cache and budget, or empty.
    std::string rejection_reason(const Request& request) const;

private:
    // Without chunked prefill a prompt is computed in one step. A request
    // resumed after a preemption recomputes its prompt and what it had
    // generated, which may exceed the step budget; it catches up in chunks
    // rather than being refused mid-generation.
    bool must_run_whole(const Request& request) const;
    // The draft slots a request decoding its next token can use this step,
    // within `budget` tokens (its next token included); 0 when not decoding.
    std::int32_t draft_slots(const Request& request, std::int32_t budget) const;
    Request* pick_victim(const std::vector<Request*>& candidates) const;
    void preempt(Request* victim, ScheduleResult& result);

    SchedulerConfig config_;
    kv::KvManager& kv_;
    std::deque<Request*> waiting_;
    std::vector<Request*> running_; // in admission order
};

} // namespace kvscope::sched
