// `kvscope record --gpu-capture auto|on|off`: whether CUPTI records GPU
// activity into the recording, and what the user is told when it cannot.
#pragma once

#include "profiler/cupti_tracer.h"

#include <memory>
#include <string>

namespace kvscope::cli {

// auto: capture when this machine has a CUDA GPU; on: try, and say why not;
// off: never. Capture that cannot start is reported on stderr and the
// recording goes on without it: never a failure.
std::unique_ptr<profiler::CuptiTracer> start_gpu_capture(const std::string& mode,
                                                         profiler::GpuActivitySink& sink);

inline constexpr const char* kGpuCaptureHelp =
    "GPU activity capture through CUPTI (kernels, copies, memory, NVTX ranges): auto (when a "
    "CUDA GPU is present), on, off";

} // namespace kvscope::cli
