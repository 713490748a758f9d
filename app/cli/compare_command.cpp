// `kvscope compare BASE NEW`: a metric-by-metric table of two recordings,
// timings judged on their per-step and per-request samples (Mann-Whitney U)
// rather than single numbers. Exit status 1 when a metric regressed past its
// threshold, 0 otherwise: a regression gate for CI.
#include "app/cli/command.h"
#include "engine/util/json_text.h"
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
        std::cout << json_text(nlohmann::json{{"base", args.base},
                                              {"new", args.now},
                                              {"threshold", args.options.threshold},
                                              {"alpha", args.options.alpha},
                                              {"regressed", regressed},
                                              {"metrics", out}},
                               2)
                  << "\n";
    } else {
        std::printf("base: %s\nnew:  %s\n\n", args.base.c_str(), args.now.c_str());
        std::printf("%-28s %12s %12s %9s %10s %9s  %s\n", "metric", "base", "new", "change", "p",
                    "samples", "verdict");
        // The same cells the app's compare view shows.
        for (const auto& m : rows) {
            const profiler::MetricCells c = profiler::format_metric(m);
            std::printf("%-28s %12s %12s %9s %10s %9s  %s\n",
                        (c.metric + (c.unit.empty() ? "" : " (" + c.unit + ")")).c_str(),
                        c.base.c_str(), c.now.c_str(), c.change.c_str(), c.p_value.c_str(),
                        c.samples.c_str(), c.verdict.c_str());
        }
        std::printf("\n%s\n", profiler::compare_criteria(args.options).c_str());
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
