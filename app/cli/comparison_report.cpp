#include "app/cli/comparison_report.h"

#include "app/cli/command.h"
#include "engine/util/json_text.h"
#include "profiler/recording/recording_set.h"

#include <cmath>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

namespace kvscope::cli {
namespace {

std::string described(const std::string& name, std::size_t runs) {
    return runs == 1 ? name : name + " (" + std::to_string(runs) + " runs)";
}

// JSON has no infinity: an unbounded end is null.
nlohmann::json bound(double value) {
    return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json();
}

} // namespace

const profiler::CompareOptions& ComparisonFlags::resolved() {
    options.threshold = threshold_percent / 100;
    options.robust_threshold = robust_threshold_percent / 100;
    return options;
}

void add_comparison_flags(CLI::App& parser, ComparisonFlags& flags) {
    parser
        .add_option("--threshold", flags.threshold_percent,
                    "Smallest change of a wall-clock timing, in percent, that counts")
        ->check(CLI::Range(0.0, 1000.0))
        ->capture_default_str();
    parser
        .add_option("--robust-threshold", flags.robust_threshold_percent,
                    "Smallest change of CPU time or instructions, in percent, that counts")
        ->check(CLI::Range(0.0, 1000.0))
        ->capture_default_str();
    parser
        .add_option("--alpha", flags.options.alpha,
                    "One-sided significance level; intervals are 1 - 2 alpha")
        ->check(CLI::Range(1e-12, 0.5))
        ->capture_default_str();
    parser.add_flag("--json", flags.json, "Print the comparison as JSON");
}

int report_comparison(const std::string& base_name, const std::filesystem::path& base_path,
                      const std::string& new_name, const std::filesystem::path& new_path,
                      ComparisonFlags& flags) {
    const std::vector<profiler::RecordingStats> base = profiler::compute_run_set_stats(base_path);
    const std::vector<profiler::RecordingStats> now = profiler::compute_run_set_stats(new_path);
    const profiler::CompareOptions& options = flags.resolved();
    const bool json = flags.json;
    const std::vector<profiler::MetricComparison> rows = profiler::compare_runs(base, now, options);
    const bool regressed = profiler::count_regressions(rows) > 0;
    const std::size_t runs_a_side = std::min(base.size(), now.size());
    if (json) {
        nlohmann::json metrics = nlohmann::json::array();
        for (const auto& m : rows) {
            nlohmann::json row = {{"metric", m.name},
                                  {"unit", m.unit},
                                  {"base", m.base},
                                  {"new", m.now},
                                  {"change", m.change},
                                  {"p_value", m.p_value},
                                  {"base_samples", m.base_samples},
                                  {"new_samples", m.new_samples},
                                  {"basis", profiler::basis_name(m.basis)},
                                  {"noise_robust", m.noise_robust},
                                  {"verdict", profiler::verdict_name(m.verdict)}};
            if (m.high > 0) {
                row["interval"] = {
                    {"low", bound(m.low)}, {"high", bound(m.high)}, {"confidence", m.confidence}};
            }
            metrics.push_back(std::move(row));
        }
        std::cout << json_text(nlohmann::json{{"base", base_name},
                                              {"new", new_name},
                                              {"base_runs", base.size()},
                                              {"new_runs", now.size()},
                                              {"threshold", options.threshold},
                                              {"robust_threshold", options.robust_threshold},
                                              {"alpha", options.alpha},
                                              {"regressed", regressed},
                                              {"metrics", metrics}},
                               2)
                  << "\n";
    } else {
        std::printf("base: %s\nnew:  %s\n\n", described(base_name, base.size()).c_str(),
                    described(new_name, now.size()).c_str());
        std::printf("%-33s %14s %14s %8s %15s %8s %12s %6s  %s\n", "metric", "base", "new",
                    "change", "interval", "p", "samples", "robust", "verdict");
        // The same cells the app's compare view shows.
        for (const auto& m : rows) {
            const profiler::MetricCells c = profiler::format_metric(m);
            std::printf("%-33s %14s %14s %8s %15s %8s %12s %6s  %s\n",
                        (c.metric + (c.unit.empty() ? "" : " (" + c.unit + ")")).c_str(),
                        c.base.c_str(), c.now.c_str(), c.change.c_str(), c.interval.c_str(),
                        c.p_value.c_str(), c.samples.c_str(), c.robust.c_str(), c.verdict.c_str());
        }
        std::printf("\n%s\n", profiler::compare_criteria(options, runs_a_side).c_str());
        std::printf("%s\n", regressed ? "REGRESSION" : "no regression");
    }
    return regressed ? exit_failure : exit_ok;
}

} // namespace kvscope::cli
