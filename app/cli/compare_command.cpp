// `kvscope compare BASE NEW`: a metric-by-metric table of two recordings, or
// of two folders of repetitions (each run one sample, the change a ratio with
// its rank interval). Exit status 1 when a metric regressed past its
// threshold, 0 otherwise: a regression gate for CI.
#include "app/cli/command.h"
#include "app/cli/comparison_report.h"

namespace kvscope::cli {
namespace {

struct CompareArgs {
    std::string base;
    std::string now;
    ComparisonFlags flags;
};

int run_compare(CompareArgs& args) {
    return report_comparison(args.base, args.base, args.now, args.now, args.flags);
}

} // namespace

Command add_compare_command(CLI::App& app) {
    auto args = std::make_shared<CompareArgs>();
    CLI::App* parser = app.add_subcommand(
        "compare", "Compare two recordings (or two folders of repetitions) metric by metric; exit "
                   "1 when NEW regressed (for CI)");
    parser->add_option("base", args->base, "The baseline: a recording, or a folder of them")
        ->required();
    parser->add_option("new", args->now, "What to judge: a recording, or a folder of them")
        ->required();
    add_comparison_flags(*parser, args->flags);
    return {parser, [args] {
                return run_compare(*args);
            }};
}

} // namespace kvscope::cli
