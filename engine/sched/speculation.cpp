// Speculative decoding in the serving loop: a decoding request drafts up to
// its reserved slots (the scheduler's lookahead), one pass of the target
// computes the last token and the draft with logits for each, and
// verification keeps the longest accepted run plus one token of the
// target's own. The K/V of rejected draft tokens is rolled back: the
// sequence's length stops after the kept tokens, blocks past it go back
// to the pool, and no prefix-cache hash is ever registered for them
// (registration reads only the kept length).
#include "engine/events/typed_events.h"
#include "engine/sched/llm_engine.h"
#include "engine/spec/ngram_proposer.h"
#include "engine/spec/rejection_sampling.h"
#include "kernels/nvtx_range.h"

namespace kvscope::sched {

void LlmEngine::draft_before_scheduling() {
    const spec::SpeculativeConfig& s = config_.speculative;
    if (!s.enabled() || s.method != spec::DraftMethod::ngram) {
        return;
    }
    for (Request* r : scheduler_.running()) {
        const bool decoding =
            r->generated > 0 && r->computed + 1 == static_cast<std::int32_t>(r->tokens.size());
        r->draft = decoding
                       ? spec::propose_ngram(r->tokens, s.ngram_min, s.ngram_max, s.draft_tokens)
                       : std::vector<std::int32_t>{};
    }
}

void LlmEngine::propose_drafts(const ScheduleResult& plan) {
    const spec::SpeculativeConfig& s = config_.speculative;
    std::vector<std::pair<Request*, int>> by_model;
    for (const ScheduledChunk& chunk : plan.chunks) {
        Request& r = *chunk.request;
        r.draft_q.clear();
        if (chunk.draft_slots <= 0) {
            r.draft.clear();
            continue;
        }
        if (s.method == spec::DraftMethod::ngram) {
            // Drafted before scheduling; the slots may have cut it short.
            r.draft.resize(std::min(r.draft.size(), static_cast<std::size_t>(chunk.draft_slots)));
        } else {
            r.draft.clear();
            by_model.emplace_back(&r, chunk.draft_slots);
        }
    }
    if (!by_model.empty()) {
        draft_tokens(by_model);
    }
}

// K passes of the drafter over the drafting sequences, one token each: the
// last sampled token, then each drafted one.
//
// A self-draft runs the target's first draft_layers layers, whose K/V for
// the sequence so far are the target's own; it writes those layers' K/V
// into the draft's slots, which the verifying pass overwrites with the same
// values (and the other layers').
//
// A draft model keeps K/V of its own, in its pool under the same block ids.
// Its first pass catches up on the tokens it has not seen (after admission:
// the whole prompt; after a verify that kept every draft: the last draft
// token), so each pass computes from draft_computed on.
void LlmEngine::draft_tokens(std::span<const std::pair<Request*, int>> drafting) {
    const nvtx::Range range("draft");
    const bool own_model = config_.speculative.method == spec::DraftMethod::model;
    runner::Backend& drafter = own_model ? *config_.draft_backend : backend_;
    const auto vocab = static_cast<std::size_t>(drafter.vocab_size());
    std::vector<Request*> active;
    std::vector<kv::SequenceBlocks> views;
    std::vector<runner::SequenceStep> steps;
    std::vector<std::int32_t> history;
    for (int j = 0; j < config_.speculative.draft_tokens; ++j) {
        active.clear();
        for (const auto& [r, slots] : drafting) {
            if (j < slots && static_cast<int>(r->draft.size()) == j) {
                active.push_back(r);
            }
        }
        if (active.empty()) {
            break;
        }
        views.clear();
        views.reserve(active.size()); // the steps point into it
        steps.clear();
        for (Request* r : active) {
            // The first pass computes from what the drafter last saw.
            const std::int32_t from =
                own_model && j == 0 ? std::min(r->draft_computed, r->computed) : r->computed + j;
            kv::SequenceBlocks& view = views.emplace_back(r->blocks);
            view.length = from;
            const std::span<const std::int32_t> tokens =
                j == 0
                    ? std::span<const std::int32_t>(r->tokens).subspan(
                          static_cast<std::size_t>(from))
                    : std::span<const std::int32_t>(&r->draft[static_cast<std::size_t>(j) - 1], 1);
            runner::SequenceStep step{&view, tokens};
            step.first_position = from;
            steps.push_back(step);
        }
        runner::ForwardBatch batch = runner::build_forward_batch(steps, drafter.block_size());
        batch.layers = own_model ? 0 : config_.speculative.draft_layers;
        draft_logits_.resize(active.size() * vocab);
        drafter.forward(batch, draft_logits_.data());
        for (std::size_t a = 0; a < active.size(); ++a) {
            Request& r = *active[a];
            const std::span<const float> row =
                std::span<const float>(draft_logits_).subspan(a * vocab, vocab);
            history.assign(r.tokens.begin(), r.tokens.end());
            history.insert(history.end(), r.draft.begin(), r.draft.end());
            sampling::Sampler& sampler = *r.sampler;
            if (sampler.params().temperature <= 0.0f) {
                r.draft.push_back(sampler.sample(row, history));
                continue;
            }
            sampling::Distribution q = sampler.distribution(row, history);
            r.draft.push_back(sampling::draw_from(q, sampler.draw_uniform()));
            r.draft_q.push_back(std::move(q));
        }
    }
    for (const auto& [r, slots] : drafting) {
        // Its passes saw the last token and every draft token but the last.
        r->draft_computed = r->computed + static_cast<std::int32_t>(r->draft.size());
    }
}

std::size_t LlmEngine::verify(Request& r, std::size_t row, StepStats& stats) {
    const std::size_t drafted = r.draft.size();
    sampling::Sampler& sampler = *r.sampler;
    const bool greedy = sampler.params().temperature <= 0.0f;
    const std::int64_t capacity = scheduler_.sequence_capacity();
    std::vector<std::int32_t> history = r.tokens;
    std::vector<std::int32_t> out;
    std::size_t kept = 0; // draft tokens accepted, whose K/V stay
    for (std::size_t k = 0; k <= drafted; ++k) {
        const std::span<const float> logits = logit_row(row + k);
        std::int32_t token = 0;
        bool accepted = false;
        if (k == drafted) {
            token = sampler.sample(logits, history); // every draft held: one more
        } else if (greedy) {
            token = sampler.sample(logits, history);
            accepted = token == r.draft[k];
        } else {
            const sampling::Distribution p = sampler.distribution(logits, history);
            const sampling::Distribution none;
            const double accept_u = sampler.draw_uniform();
            const spec::DraftCheck check =
                spec::check_draft(p, r.draft_q.empty() ? none : r.draft_q[k], r.draft[k], accept_u,
                                  sampler.draw_uniform());
            token = check.token;
            accepted = check.accepted;
        }
        out.push_back(token);
        history.push_back(token);
        if (!accepted) {
            break;
        }
        kept = k + 1;
        // Stop where plain decoding would have: an end token, the token
        // limit, or a cache too full for the next token.
        const bool ends =
            !r.spec.ignore_eos && config_.ends_generation && config_.ends_generation(token);
        if (ends || r.generated + static_cast<int>(out.size()) >= r.spec.max_tokens ||
            static_cast<std::int64_t>(history.size()) + 1 > capacity) {
            break;
        }
    }
    std::string reason;
    for (const std::int32_t token : out) {
        reason = append_token(r, token);
    }
    // The last sampled token and the kept draft hold their K/V; the draft's
    // other slots roll back (registration hashes the kept length only), in
    // the draft model's pool as in the target's.
    advance(r, static_cast<std::int32_t>(1 + kept));
    r.draft_computed = std::min(r.draft_computed, r.computed);
    const int released = release_unused_blocks(r);
    r.accounting.drafted_tokens += static_cast<std::int64_t>(drafted);
    r.accounting.accepted_tokens += static_cast<std::int64_t>(kept);
    ++r.accounting.verify_steps;
    stats.drafted_tokens += static_cast<int>(drafted);
    stats.accepted_tokens += static_cast<int>(kept);
    stats.decode_tokens += static_cast<int>(out.size());
    events::emit_now(sink_, events::DraftVerified{.request = r.id,
                                                  .drafted = static_cast<std::int64_t>(drafted),
                                                  .accepted = static_cast<std::int64_t>(kept),
                                                  .blocks_released = released,
                                                  .entries = r.blocks.length});
    r.draft.clear();
    r.draft_q.clear();
    if (reason.empty() && static_cast<std::int64_t>(r.blocks.length) + 2 > capacity) {
        reason = "cache full";
    }
    if (!reason.empty()) {
        finish(r, RequestState::finished, std::move(reason));
    }
    return drafted + 1;
}

int LlmEngine::release_unused_blocks(Request& r) {
    const int needed = (r.blocks.length + kv_.block_size() - 1) / kv_.block_size();
    if (static_cast<int>(r.blocks.block_table.size()) <= needed) {
        return 0;
    }
    const int dropped = static_cast<int>(r.blocks.block_table.size()) - needed;
    const std::vector<kv::BlockId> released = kv_.truncate(r.id, r.blocks, needed);
    backend_.release_blocks(released);
    return dropped; // table entries, as many in every group of a hybrid cache
}

} // namespace kvscope::sched
