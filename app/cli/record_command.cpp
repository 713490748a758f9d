// `kvscope record`: serves a workload like run and records every engine
// event (and, on a GPU, CUPTI activity) into an SQLite recording.
#include "app/cli/command.h"
#include "app/cli/serve_workload.h"

namespace kvscope::cli {
namespace {

constexpr const char* kGpuCaptureHelp =
    "GPU activity capture through CUPTI (kernels, copies, memory, NVTX ranges): auto (when a "
    "CUDA GPU is present), on, off";

} // namespace

Command add_record_command(CLI::App& app) {
    auto options = std::make_shared<ServeWorkloadOptions>();
    CLI::App* parser = app.add_subcommand(
        "record", "Serve a workload like run and record every engine event into an SQLite "
                  "recording");
    parser->add_option("-o,--out", options->out_path, "The recording to write (.sqlite)")
        ->required();
    options->command = "record";
    parser->add_flag("--force", options->overwrite, "Replace the file if it exists");
    parser->add_option("--gpu-capture", options->gpu_capture, kGpuCaptureHelp)
        ->check(CLI::IsMember({"auto", "on", "off"}))
        ->capture_default_str();
    parser
        ->add_option("--on-write-error", options->on_write_error,
                     "When writing the recording fails (a full disk, a file-size limit, the file "
                     "deleted): stop the run, or continue it unrecorded. Either way the file keeps "
                     "everything committed before, and kvscope exits with status 1 (130 when "
                     "interrupted)")
        ->check(CLI::IsMember({"stop", "continue"}))
        ->capture_default_str();
    add_workload_options(parser, options);
    return {parser, [options] {
                return serve_workload(*options);
            }};
}

} // namespace kvscope::cli
