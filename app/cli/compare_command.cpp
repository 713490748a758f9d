// `kvscope compare BASE NEW`: a metric-by-metric table of two recordings,
// timings judged on their per-step and per-request samples (Mann-Whitney U)
// rather than single numbers. Exit status 1 when a metric regressed past its
// threshold, 0 otherwise: a regression gate for CI.
#include "app/cli/command.h"
#include "profiler/compare.h"

#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

namespace kvscope::cli {
namespace {

struct CompareArgs {
    std::string base;
    std::string now;
    profiler::CompareOptions options;
    double threshold_percent = 10;
    bool json = false;
};

int run_compare(CompareArgs& args) {
    args.options.threshold = args.threshold_percent / 100;
    const profiler::RecordingStats base = profiler::compute_stats(args.base);
    const profiler::RecordingStats now = profiler::compute_stats(args.now);
    const std::vector<profiler::MetricComparison> rows =
        profiler::compare_stats(base, now, args.options);
    bool regressed = false;
    nlohmann::json out = nlohmann::json::array();
    for (const auto& m : rows) {
        regressed = regressed || m.verdict == profiler::Verdict::regressed;
        out.push_back({{"metric", m.name},
                       {"unit", m.unit},
                       {"base", m.base},
                       {"new", m.now},
                       {"change", m.change},
                       {"p_value", m.p_value},
                       {"base_samples", m.base_samples},
                       {"new_samples", m.new_samples},
                       {"verdict", profiler::verdict_name(m.verdict)}});
    }
    if (args.json) {
        std::cout << nlohmann::json{{"base", args.base},
                                    {"new", args.now},
                                    {"threshold", args.options.threshold},
                                    {"alpha", args.options.alpha},
                                    {"regressed", regressed},
                                    {"metrics", out}}
                         .dump(2)
                  << "\n";
    } else {
        std::printf("base: %s\nnew:  %s\n\n", args.base.c_str(), args.now.c_str());
        std::printf("%-28s %12s %12s %9s %10s %9s  %s\n", "metric", "base", "new", "change", "p",
                    "samples", "verdict");
        for (const auto& m : rows) {
            char p[32] = "-";
            if (m.p_value >= 0) {
                std::snprintf(p, sizeof p, "%.2g", m.p_value);
            }
            char samples[32] = "-";
            if (m.base_samples > 0 || m.new_samples > 0) {
                std::snprintf(samples, sizeof samples, "%lld/%lld",
                              static_cast<long long>(m.base_samples),
                              static_cast<long long>(m.new_samples));
            }
            std::printf("%-28s %12.3f %12.3f %+8.1f%% %10s %9s  %s\n",
                        (m.name + (m.unit.empty() ? "" : " (" + m.unit + ")")).c_str(), m.base,
                        m.now, 100 * m.change, p, samples,
                        std::string(profiler::verdict_name(m.verdict)).c_str());
        }
        std::printf("\nTimings (medians) regress when more than %.0f%% slower with p < %.3g "
                    "(one-sided Mann-Whitney U);\nthe prefix hit rate when it drops by more than "
                    "%.0f points.\n",
                    100 * args.options.threshold, args.options.alpha,
                    100 * args.options.hit_rate_drop);
        std::printf("%s\n", regressed ? "REGRESSION" : "no regression");
    }
    return regressed ? exit_failure : exit_ok;
}

} // namespace

Command add_compare_command(CLI::App& app) {
    auto args = std::make_shared<CompareArgs>();
    CLI::App* parser = app.add_subcommand(
        "compare", "Compare two recordings metric by metric; exit 1 when NEW regressed (for CI)");
    parser->add_option("base", args->base, "The baseline recording")->required();
    parser->add_option("new", args->now, "The recording to judge")->required();
    parser
        ->add_option("--threshold", args->threshold_percent,
                     "Smallest change of a timing's median, in percent, that counts")
        ->check(CLI::Range(0.0, 1000.0))
        ->capture_default_str();
    parser->add_option("--alpha", args->options.alpha, "Significance level of the test")
        ->check(CLI::Range(1e-12, 0.5))
        ->capture_default_str();
    parser->add_flag("--json", args->json, "Print the comparison as JSON");
    return {parser, [args] {
                return run_compare(*args);
            }};
}

} // namespace kvscope::cli
