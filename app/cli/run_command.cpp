// `kvscope run`: serves a workload and reports prefix hits, preemptions,
// recomputation, evictions and time to first token.
#include "app/cli/command.h"
#include "app/cli/serve_workload.h"

namespace kvscope::cli {

Command add_run_command(CLI::App& app) {
    auto options = std::make_shared<ServeWorkloadOptions>();
    CLI::App* parser = app.add_subcommand(
        "run", "Serve a workload with continuous batching and report prefix hits, preemptions "
               "and latency");
    add_workload_options(parser, options);
    return {parser, [options] {
                return serve_workload(*options);
            }};
}

} // namespace kvscope::cli
