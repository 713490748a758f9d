// GPU activity capture through CUPTI's activity API: concurrent kernels,
// memcpy, memset, device memory allocations and releases, CUPTI's own
// overhead, and kvscope's NVTX ranges (CUPTI acting as the NVTX tool). CUPTI
// stamps every record with kvscope's host clock, so GPU records and engine
// events share one timeline. Batches go to a GpuActivitySink (the Recorder)
// from CUPTI's own thread as its buffers fill.
//
// Only one tracer may run at a time in a process. Start it before the engine
// runs: NVTX picks its tool at the first range the process opens.
#pragma once

#include "profiler/gpu/gpu_activity.h"

#include <cstdint>
#include <memory>
#include <string>

namespace kvscope::profiler {

class CuptiTracer {
public:
    struct Started;
    // Starts capture into `sink` or says why it cannot: no GPU, kvscope built
    // without CUDA, CUPTI refused (another profiler such as Nsight Systems
    // holds it, or missing permissions). Never throws for those.
    static Started start(GpuActivitySink& sink);

    ~CuptiTracer(); // stop()s
    CuptiTracer(const CuptiTracer&) = delete;
    CuptiTracer& operator=(const CuptiTracer&) = delete;

    // Hands every record CUPTI holds to the sink (call after the device has
    // synchronised, so the last kernels have completed).
    void flush();
    // Flushes, disables capture and detaches the sink. Idempotent.
    void stop();

    // Records CUPTI reported lost so far (buffers full).
    std::uint64_t dropped_records() const;
    // How NVTX ranges are captured: through CUPTI, or why not.
    const std::string& nvtx_note() const { return nvtx_note_; }

private:
    CuptiTracer() = default;
    // Unused in builds without CUDA (cupti_tracer_unavailable.cpp).
    [[maybe_unused]] bool running_ = false;
    std::string nvtx_note_;
};

struct CuptiTracer::Started {
    std::unique_ptr<CuptiTracer> tracer; // null when capture is unavailable
    std::string unavailable_reason;
    // CUPTI takes one client per process: Nsight Systems, or compute-sanitizer
    // (which checks programs through it) holds it. Tests skip then.
    bool held_by_another_profiler = false;
};

} // namespace kvscope::profiler
