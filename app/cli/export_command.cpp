// `kvscope export FILE --chrome-trace OUT.json`: a recording as a Chrome
// trace for Perfetto (ui.perfetto.dev) or chrome://tracing.
#include "app/cli/command.h"
#include "profiler/export/chrome_trace.h"

#include <cstdio>
#include <fstream>
#include <stdexcept>

namespace kvscope::cli {
namespace {

struct ExportArgs {
    std::string recording;
    std::string chrome_trace;
};

int run_export(const ExportArgs& args) {
    // Write beside the target and rename, so a failed export leaves no
    // half-written file behind.
    const std::string partial = args.chrome_trace + ".partial";
    profiler::ChromeTraceSummary summary;
    {
        std::ofstream out(partial, std::ios::trunc);
        if (!out) {
            throw std::runtime_error("cannot write " + args.chrome_trace);
        }
        try {
            summary = profiler::export_chrome_trace(args.recording, out);
        } catch (...) {
            out.close();
            std::remove(partial.c_str());
            throw;
        }
    }
    if (std::rename(partial.c_str(), args.chrome_trace.c_str()) != 0) {
        std::remove(partial.c_str());
        throw std::runtime_error("cannot write " + args.chrome_trace);
    }
    std::fprintf(stderr,
                 "wrote %s: %lld steps, %lld op slices, %lld request lanes, %lld counter samples, "
                 "%lld GPU kernels and copies, %lld NVTX ranges\n",
                 args.chrome_trace.c_str(), static_cast<long long>(summary.steps),
                 static_cast<long long>(summary.ops), static_cast<long long>(summary.requests),
                 static_cast<long long>(summary.counters), static_cast<long long>(summary.kernels),
                 static_cast<long long>(summary.nvtx_ranges));
    return exit_ok;
}

} // namespace

Command add_export_command(CLI::App& app) {
    auto args = std::make_shared<ExportArgs>();
    CLI::App* parser = app.add_subcommand(
        "export", "Export a recording: --chrome-trace for Perfetto or chrome://tracing");
    parser->add_option("recording", args->recording, "A recording made by kvscope record")
        ->required();
    parser
        ->add_option("--chrome-trace", args->chrome_trace,
                     "Write a Chrome trace (JSON): steps, request lanes, occupancy counters")
        ->required();
    return {parser, [args] {
                return run_export(*args);
            }};
}

} // namespace kvscope::cli
