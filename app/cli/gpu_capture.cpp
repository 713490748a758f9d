#include "app/cli/gpu_capture.h"

#include <cstdio>

namespace kvscope::cli {

std::unique_ptr<profiler::CuptiTracer> start_gpu_capture(const std::string& mode,
                                                         profiler::GpuActivitySink& sink) {
    if (mode == "off") {
        return nullptr;
    }
    profiler::CuptiTracer::Started started = profiler::CuptiTracer::start(sink);
    if (started.tracer) {
        std::fprintf(stderr, "GPU capture: CUPTI (kernels, copies, memsets, memory); %s\n",
                     started.tracer->nvtx_note().c_str());
    } else if (mode == "on") {
        std::fprintf(stderr,
                     "kvscope record: GPU capture unavailable: %s; recording engine events and "
                     "CPU op slices only\n",
                     started.unavailable_reason.c_str());
    } else {
        std::fprintf(stderr, "GPU capture: off (%s)\n", started.unavailable_reason.c_str());
    }
    return std::move(started.tracer);
}

} // namespace kvscope::cli
