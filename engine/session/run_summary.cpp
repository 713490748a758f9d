#include "engine/session/run_summary.h"

#include "engine/util/json_text.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace kvscope::session {

double percentile(std::vector<double> values, double p) {
    if (values.empty()) {
        return 0;
    }
    std::sort(values.begin(), values.end());
    const auto index = static_cast<std::size_t>(p * static_cast<double>(values.size() - 1) + 0.5);
    return values[std::min(index, values.size() - 1)];
}

double RunSummary::prefix_hit_rate() const {
    return prompt_tokens > 0
               ? static_cast<double>(prefix_hit_tokens) / static_cast<double>(prompt_tokens)
               : 0.0;
}

double RunSummary::output_tokens_per_second() const {
    return seconds > 0 ? static_cast<double>(generated_tokens) / seconds : 0.0;
}

RunSummary summarize_run(const sched::LlmEngine& engine, const std::vector<std::int64_t>& ids,
                         const std::string& workload, double seconds, int peak_blocks_used,
                         double kv_bytes_per_token, const tokenizer::Tokenizer* tokenizer) {
    RunSummary s;
    s.workload = workload;
    std::vector<double> ttft_ms;
    for (const std::int64_t id : ids) {
        const sched::Request& r = engine.request(id);
        const sched::RequestAccounting& a = r.accounting;
        RequestSummary row;
        row.id = id;
        row.state = std::string(sched::request_state_name(r.state));
        row.reason = r.finish_reason;
        row.prompt_tokens = r.prompt_length();
        // A prompt token's K/V was computed when the request got past it
        // (high_water) and it was not a prefix hit; a rejected request's
        // prompt never ran.
        const std::int64_t reached = std::min<std::int64_t>(r.prompt_length(), r.high_water);
        row.prompt_computed_tokens = std::max<std::int64_t>(0, reached - a.prefix_hit_tokens);
        row.accounting = a;
        row.generated_tokens = r.generated;
        if (r.first_token_ns >= 0) {
            row.ttft_ms = static_cast<double>(r.first_token_ns - r.arrival_ns) * 1e-6;
            ttft_ms.push_back(row.ttft_ms);
        }
        if (tokenizer != nullptr) {
            const auto prompt = std::min(r.tokens.size(), r.spec.prompt.size());
            const std::vector<std::int32_t> generated(
                r.tokens.begin() + static_cast<std::ptrdiff_t>(prompt), r.tokens.end());
            row.output = tokenizer->decode(generated, true);
        }
        s.prompt_tokens += row.prompt_tokens;
        s.prompt_computed_tokens += row.prompt_computed_tokens;
        s.prompt_not_run_tokens += r.prompt_length() - std::max(reached, a.prefix_hit_tokens);
        s.prefix_hit_tokens += a.prefix_hit_tokens;
        s.tier_hit_tokens += a.tier_hit_tokens;
        s.shared_short_tokens += a.shared_short_tokens;
        s.computed_tokens += a.computed_tokens;
        s.recomputed_tokens += a.recomputed_tokens;
        s.resumed_hit_tokens += a.resumed_hit_tokens;
        s.generated_tokens += r.generated;
        s.evicted_tokens += a.evicted_tokens;
        s.preemptions += a.preemptions;
        s.speculation.add(a.drafted_tokens, a.accepted_tokens, a.verify_steps);
        s.finished += r.state == sched::RequestState::finished;
        s.aborted += r.state == sched::RequestState::aborted;
        s.rejected += r.state == sched::RequestState::rejected;
        s.requests.push_back(std::move(row));
    }
    s.steps = engine.steps();
    s.seconds = seconds;
    s.ttft_ms_p50 = percentile(ttft_ms, 0.5);
    s.ttft_ms_p99 = percentile(ttft_ms, 0.99);
    s.peak_blocks_used = peak_blocks_used;
    s.total_blocks = engine.kv().total_blocks();
    s.kv_bytes_per_token = kv_bytes_per_token;
    s.activation_overflows = engine.backend().activation_overflows();
    if (const kv::OffloadTier* tier = engine.offload_tier()) {
        s.tier = tier->stats();
    }
    return s;
}

std::string RunSummary::to_json(bool per_request, int indent) const {
    nlohmann::json j{
        {"workload", workload},
        {"requests", requests.size()},
        {"finished", finished},
        {"aborted", aborted},
        {"rejected", rejected},
        {"prompt_tokens", prompt_tokens},
        {"prompt_computed_tokens", prompt_computed_tokens},
        {"prompt_not_run_tokens", prompt_not_run_tokens},
        {"prefix_hit_tokens", prefix_hit_tokens},
        {"prefix_hit_rate", prefix_hit_rate()},
        {"shared_short_tokens", shared_short_tokens},
        {"computed_tokens", computed_tokens},
        {"recomputed_tokens", recomputed_tokens},
        {"resumed_hit_tokens", resumed_hit_tokens},
        {"preemptions", preemptions},
        {"evicted_tokens", evicted_tokens},
        {"drafted_tokens", speculation.drafted},
        {"accepted_tokens", speculation.accepted},
        {"verify_steps", speculation.verifies},
        {"tier_hit_tokens", tier_hit_tokens},
        {"tier_blocks_written", tier.writes},
        {"tier_blocks_read", tier.reads},
        {"tier_bytes_written", tier.bytes_written},
        {"tier_bytes_read", tier.bytes_read},
        {"tier_write_seconds", tier.write_seconds},
        {"tier_read_seconds", tier.read_seconds},
        {"acceptance_rate", speculation.acceptance_rate()},
        {"tokens_per_verify", speculation.tokens_per_verify()},
        {"generated_tokens", generated_tokens},
        {"steps", steps},
        {"seconds", seconds},
        {"output_tokens_per_second", output_tokens_per_second()},
        {"ttft_ms_p50", ttft_ms_p50},
        {"ttft_ms_p99", ttft_ms_p99},
        {"peak_blocks_used", peak_blocks_used},
        {"total_blocks", total_blocks},
        {"kv_bytes_per_token", kv_bytes_per_token},
        {"activation_overflows", activation_overflows},
    };
    if (per_request) {
        nlohmann::json rows = nlohmann::json::array();
        for (const RequestSummary& r : requests) {
            const sched::RequestAccounting& a = r.accounting;
            rows.push_back({{"id", r.id},
                            {"state", r.state},
                            {"reason", r.reason},
                            {"prompt_tokens", r.prompt_tokens},
                            {"prompt_computed_tokens", r.prompt_computed_tokens},
                            {"prefix_hit_tokens", a.prefix_hit_tokens},
                            {"blocks_hit", a.blocks_hit},
                            {"blocks_missed", a.blocks_missed},
                            {"shared_short_tokens", a.shared_short_tokens},
                            {"computed_tokens", a.computed_tokens},
                            {"recomputed_tokens", a.recomputed_tokens},
                            {"resumed_hit_tokens", a.resumed_hit_tokens},
                            {"preemptions", a.preemptions},
                            {"evicted_tokens", a.evicted_tokens},
                            {"drafted_tokens", a.drafted_tokens},
                            {"accepted_tokens", a.accepted_tokens},
                            {"generated_tokens", r.generated_tokens},
                            {"ttft_ms", r.ttft_ms},
                            {"output", r.output}});
        }
        j["per_request"] = rows;
    }
    return json_text(j, indent);
}

} // namespace kvscope::session
