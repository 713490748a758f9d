#include "app/cli/run_report.h"

#include "engine/tokenizer/printable_text.h"

#include <cstdio>

namespace kvscope::cli {
namespace {

// Characters of each request's output in the --per-request table.
constexpr std::size_t kOutputChars = 72;

} // namespace

std::string speculation_text(const spec::SpeculativeConfig& config,
                             const spec::SpeculationTotals& totals) {
    char line[256];
    std::snprintf(line, sizeof line,
                  ": %lld tokens drafted, %lld kept (%.1f%%), %.2f tokens per verifying pass",
                  static_cast<long long>(totals.drafted), static_cast<long long>(totals.accepted),
                  100 * totals.acceptance_rate(), totals.tokens_per_verify());
    return config.describe() + line;
}

void print_summary(const session::RunSummary& s, const session::RunConfig& config,
                   bool per_request) {
    const auto ll = [](std::int64_t v) {
        return static_cast<long long>(v);
    };
    std::printf("requests        %zu: %d finished, %d aborted, %d rejected\n", s.requests.size(),
                s.finished, s.aborted, s.rejected);
    // Prompt tokens split three ways that add up: taken from the prefix
    // cache, computed, and never run (rejected requests, unreached rests of
    // aborted ones).
    std::printf("prompt tokens   %lld: %lld from the prefix cache (%.1f%%), %lld computed",
                ll(s.prompt_tokens), ll(s.prefix_hit_tokens), 100 * s.prefix_hit_rate(),
                ll(s.prompt_computed_tokens));
    if (s.prompt_not_run_tokens > 0) {
        std::printf(", %lld never run", ll(s.prompt_not_run_tokens));
    }
    std::printf("\n                %lld shared with a cached block but fewer than a block\n",
                ll(s.shared_short_tokens));
    std::printf("preemptions     %d: %lld tokens recomputed, %lld found cached again\n",
                s.preemptions, ll(s.recomputed_tokens), ll(s.resumed_hit_tokens));
    if (config.eviction.enabled()) {
        std::printf("eviction        %lld tokens dropped (%s)\n", ll(s.evicted_tokens),
                    config.eviction.describe().c_str());
    }
    if (config.speculative.enabled()) {
        std::printf("speculation     %s\n",
                    speculation_text(config.speculative, s.speculation).c_str());
    }
    if (config.offload.capacity_blocks > 0) {
        const kv::OffloadTierStats& t = s.tier;
        const double mib = 1024.0 * 1024.0;
        std::printf("offload tier    %s, %lld blocks: %lld prompt tokens loaded back instead of "
                    "computed; %lld blocks written (%.1f MiB, %.1f ms), %lld read (%.1f MiB, "
                    "%.1f ms)\n",
                    std::string(kv::tier_medium_name(config.offload.medium)).c_str(),
                    ll(config.offload.capacity_blocks), ll(s.tier_hit_tokens), ll(t.writes),
                    static_cast<double>(t.bytes_written) / mib, t.write_seconds * 1e3, ll(t.reads),
                    static_cast<double>(t.bytes_read) / mib, t.read_seconds * 1e3);
    }
    std::printf("generated       %lld tokens in %.2f s (%.1f tokens/s), %lld steps\n",
                ll(s.generated_tokens), s.seconds, s.output_tokens_per_second(), ll(s.steps));
    std::printf("first token     p50 %.0f ms, p99 %.0f ms after arrival\n", s.ttft_ms_p50,
                s.ttft_ms_p99);
    std::printf("KV blocks       peak %d of %d in use\n", s.peak_blocks_used, s.total_blocks);
    if (s.activation_overflows > 0) {
        std::printf(
            "fp16 overflow   %lld times an activation past fp16's range was saturated on its "
            "way into a linear layer: this model's numbers outgrow fp16 there, so expect its "
            "output to differ from the CPU backend's\n",
            ll(s.activation_overflows));
    }
    if (!per_request) {
        return;
    }
    // Each request's output on the line below its row, shortened to one
    // line (--json has it whole): reasons and text are too long for columns.
    std::printf("\n%6s %-9s %7s %7s %8s %8s %6s %8s  %s\n", "id", "state", "prompt", "cached",
                "computed", "recomp", "out", "ttft ms", "reason");
    for (const session::RequestSummary& r : s.requests) {
        std::printf("%6lld %-9s %7lld %7lld %8lld %8lld %6lld %8.0f  %s\n", ll(r.id),
                    r.state.c_str(), ll(r.prompt_tokens), ll(r.accounting.prefix_hit_tokens),
                    ll(r.accounting.computed_tokens), ll(r.accounting.recomputed_tokens),
                    ll(r.generated_tokens), r.ttft_ms, r.reason.c_str());
        if (!r.output.empty()) {
            std::printf("%6s \"%s\"\n", "",
                        tokenizer::printable_text(r.output, kOutputChars).c_str());
        }
    }
}

} // namespace kvscope::cli
