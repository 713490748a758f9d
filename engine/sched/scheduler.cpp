#include "engine/sched/scheduler.h"

#include <algorithm>
#include <array>

namespace kvscope::sched {
namespace {

struct NamedPolicy {
    VictimPolicy policy;
    std::string_view name;
};
constexpr std::array kPolicies = {NamedPolicy{VictimPolicy::newest, "newest"},
                                  NamedPolicy{VictimPolicy::oldest, "oldest"},
                                  NamedPolicy{VictimPolicy::largest, "largest"}};

} // namespace

std::string_view request_state_name(RequestState state) {
    switch (state) {
    case RequestState::waiting:
        return "waiting";
    case RequestState::running:
        return "running";
    case RequestState::finished:
        return "finished";
    case RequestState::aborted:
        return "aborted";
    case RequestState::rejected:
        return "rejected";
    }
    return "unknown";
}

std::string_view victim_policy_name(VictimPolicy policy) {
    for (const NamedPolicy& p : kPolicies) {
        if (p.policy == policy) {
            return p.name;
        }
    }
    return "unknown";
}

std::optional<VictimPolicy> parse_victim_policy(std::string_view name) {
    for (const NamedPolicy& p : kPolicies) {
        if (p.name == name) {
            return p.policy;
        }
    }
    return std::nullopt;
}

Scheduler::Scheduler(const SchedulerConfig& config, kv::KvManager& kv)
    : config_(config)
    , kv_(kv) {
    config_.max_num_seqs = std::max(1, config_.max_num_seqs);
    config_.max_num_batched_tokens = std::max(1, config_.max_num_batched_tokens);
}

void Scheduler::add(Request* request) {
    request->state = RequestState::waiting;
    waiting_.push_back(request);
}

bool Scheduler::remove(Request* request) {
    if (const auto it = std::find(waiting_.begin(), waiting_.end(), request);
        it != waiting_.end()) {
        waiting_.erase(it);
        return true;
    }
    if (const auto it = std::find(running_.begin(), running_.end(), request);
        it != running_.end()) {
        running_.erase(it);
        return true;
    }
    return false;
}

void Scheduler::finish(Request* request) {
    if (const auto it = std::find(running_.begin(), running_.end(), request);
        it != running_.end()) {
        running_.erase(it);
    }
}

std::string Scheduler::rejection_reason(const Request& request) const {
    if (request.tokens.empty()) {
        return "the prompt is empty";
    }
    if (config_.max_model_len > 0 &&
        static_cast<std::int64_t>(request.tokens.size()) >= config_.max_model_len) {
        return "its " + std::to_string(request.tokens.size()) +
               " prompt tokens leave no room under the model length of " +
               std::to_string(config_.max_model_len) + " (--max-model-len)";
    }
    const std::int64_t capacity = sequence_capacity();
    if (static_cast<std::int64_t>(request.tokens.size()) + 1 > capacity) {
        return "it needs " + std::to_string(request.tokens.size() + 1) +
               " tokens of KV cache, more than the whole cache holds (" + std::to_string(capacity) +
               ")";
    }
    if (!config_.chunked_prefill && request.prompt_length() > config_.max_num_batched_tokens) {
        return "its " + std::to_string(request.prompt_length()) +
               " prompt tokens exceed the step budget of " +
               std::to_string(config_.max_num_batched_tokens) + " and chunked prefill is off";
    }
    return {};
}

bool Scheduler::must_run_whole(const Request& request) const {
    return !config_.chunked_prefill && request.accounting.preemptions == 0;
}

std::int32_t Scheduler::draft_slots(const Request& request, std::int32_t budget) const {
    const auto length = static_cast<std::int32_t>(request.tokens.size());
    const bool decoding = request.generated > 0 && request.computed + 1 == length;
    if (config_.lookahead <= 0 || !decoding) {
        return 0;
    }
    // Drafts past the token limit or the model length would be thrown away.
    std::int32_t slots =
        std::min({config_.lookahead, budget - 1, request.spec.max_tokens - request.generated - 1});
    if (config_.max_model_len > 0) {
        slots = std::min(slots, config_.max_model_len - length - 1);
    }
    if (config_.draft_before_scheduling) {
        // Prompt lookup drafted already: room for what it found, no more.
        slots = std::min(slots, static_cast<std::int32_t>(request.draft.size()));
    }
    return std::max(0, slots);
}

Request* Scheduler::pick_victim(const std::vector<Request*>& candidates) const {
    switch (config_.victim) {
    case VictimPolicy::newest:
        return candidates.back();
    case VictimPolicy::oldest:
        return candidates.front();
    case VictimPolicy::largest:
        return *std::max_element(
            candidates.begin(), candidates.end(), [](const Request* a, const Request* b) {
                return a->blocks.block_table.size() < b->blocks.block_table.size();
            });
    }
    return candidates.back();
}

void Scheduler::preempt(Request* victim, ScheduleResult& result) {
    running_.erase(std::find(running_.begin(), running_.end(), victim));
    const std::vector<kv::BlockId> released = kv_.release(victim->id, victim->blocks);
    result.released_blocks.insert(result.released_blocks.end(), released.begin(), released.end());
    victim->state = RequestState::waiting;
    victim->computed = 0;
    victim->draft_computed = 0;
    ++victim->accounting.preemptions;
    waiting_.push_front(victim);
    result.preempted.push_back(victim);
}

ScheduleResult Scheduler::schedule() {
    ScheduleResult result;
    std::int32_t budget = config_.max_num_batched_tokens;

    // Running requests first, oldest first.
    for (std::size_t i = 0; i < running_.size() && budget > 0;) {
        Request* request = running_[i];
        std::int32_t n = request->remaining_to_compute();
        if (n <= 0 || (must_run_whole(*request) && n > budget)) {
            ++i;
            continue;
        }
        n = std::min(n, budget);
        bool keeps_running = true;
        while (!kv_.grow(request->id, request->blocks, request->blocks.length + n)) {
            // Victims come from the requests not yet given work this step:
            // running_[i..], this one included.
            const std::vector<Request*> candidates(
                running_.begin() + static_cast<std::ptrdiff_t>(i), running_.end());
            Request* victim = pick_victim(candidates);
            preempt(victim, result);
            if (victim == request) {
                keeps_running = false;
                break;
            }
        }
        if (!keeps_running) {
            continue; // running_[i] is now the next request
        }
        result.chunks.push_back({request, n});
        budget -= n;
        ++i;
    }

    // Then waiting requests in arrival order, unless this step had to
    // preempt (no room to grow means no room to admit).
    while (result.preempted.empty() && !waiting_.empty() && budget > 0 &&
           static_cast<int>(running_.size()) < config_.max_num_seqs) {
        Request* request = waiting_.front();
        if (std::string reason = rejection_reason(*request); !reason.empty()) {
            waiting_.pop_front();
            request->state = RequestState::rejected;
            request->finish_reason = std::move(reason);
            result.rejected.push_back(request);
            continue;
        }
        const auto prompt = static_cast<std::int32_t>(request->tokens.size());
        if (must_run_whole(*request) &&
            prompt - kv_.match_prefix(request->tokens, request->spec.cache_key).hit_tokens >
                budget) {
            break; // first come, first served: later requests wait too
        }
        // A hybrid cache takes the blocks of this step's chunk only; the
        // prompt's later chunks grow the tables as running requests' do.
        const std::optional<kv::PrefixMatch> match =
            kv_.admit(request->id, request->blocks, request->tokens, request->spec.cache_key,
                      budget, config_.max_num_batched_tokens);
        if (!match) {
            break;
        }
        const std::int32_t to_compute = prompt - match->hit_tokens;
        if (must_run_whole(*request) && to_compute > budget) {
            // A hit in the offload tier was lost while loading: the prompt
            // no longer fits this step whole, so it waits for the next.
            const std::vector<kv::BlockId> released = kv_.release(request->id, request->blocks);
            result.released_blocks.insert(result.released_blocks.end(), released.begin(),
                                          released.end());
            break;
        }
        waiting_.pop_front();
        request->state = RequestState::running;
        request->computed = match->hit_tokens;
        request->draft_computed = 0;
        RequestAccounting& a = request->accounting;
        a.tier_hit_tokens += std::int64_t{match->tier_blocks_hit} * kv_.block_size();
        if (a.preemptions == 0) {
            a.prefix_hit_tokens = match->hit_tokens;
            a.blocks_hit = match->blocks_hit;
            a.blocks_missed = match->blocks_missed;
            a.shared_short_tokens = match->shared_short_tokens;
        } else {
            a.resumed_hit_tokens += match->hit_tokens;
        }
        running_.push_back(request);
        result.admitted.push_back(request);
        const std::int32_t n = std::min(to_compute, budget);
        result.chunks.push_back({request, n});
        budget -= n;
    }
    // Last, slots for drafts (speculative decoding) from what is left:
    // every running and admitted request has had its tokens, and only free
    // blocks are taken, so a draft never preempts a request, delays an
    // admission or evicts a cached prefix.
    for (ScheduledChunk& chunk : result.chunks) {
        Request& request = *chunk.request;
        const std::int32_t slots = draft_slots(request, budget + 1);
        if (slots <= 0) {
            continue;
        }
        const std::int32_t length = request.blocks.length + chunk.tokens + slots;
        if (kv_.blocks_needed(request.blocks, length) > kv_.free_blocks() ||
            !kv_.grow(request.id, request.blocks, length)) {
            continue;
        }
        chunk.draft_slots = slots;
        budget -= slots;
    }
    return result;
}

} // namespace kvscope::sched
