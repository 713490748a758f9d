// The tracer in a build without CUDA: never starts, and says why.
#include "profiler/gpu/cupti_tracer.h"

namespace kvscope::profiler {

CuptiTracer::Started CuptiTracer::start(GpuActivitySink& sink) {
    (void)sink;
    return {nullptr, "this kvscope was built without CUDA (configure with -DKVSCOPE_CUDA=ON)"};
}

CuptiTracer::~CuptiTracer() = default;

void CuptiTracer::flush() {}

void CuptiTracer::stop() {}

std::uint64_t CuptiTracer::dropped_records() const {
    return 0;
}

} // namespace kvscope::profiler
