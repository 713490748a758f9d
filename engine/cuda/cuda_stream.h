// Owned CUDA streams and events: created checked, destroyed on scope exit.
#pragma once

#include "kernels/cuda_check.cuh"

#include <cuda_runtime_api.h>
#include <utility>

namespace kvscope::cuda {

// A non-blocking stream: it does not wait on the legacy default stream, so
// other libraries' work on stream 0 never serialises a step.
class CudaStream {
public:
    CudaStream() { KVSCOPE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
    ~CudaStream() {
        if (stream_ != nullptr) {
            (void)cudaStreamDestroy(stream_); // cannot throw here; nothing to recover
        }
    }
    CudaStream(const CudaStream&) = delete;
    CudaStream& operator=(const CudaStream&) = delete;
    CudaStream(CudaStream&& other) noexcept
        : stream_(std::exchange(other.stream_, nullptr)) {}
    CudaStream& operator=(CudaStream&&) = delete;

    cudaStream_t get() const { return stream_; }
    void synchronize() const { KVSCOPE_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

private:
    cudaStream_t stream_ = nullptr;
};

class CudaEvent {
public:
    // `timing`: false makes a lighter event for ordering only.
    explicit CudaEvent(bool timing = true) {
        KVSCOPE_CUDA_CHECK(
            cudaEventCreateWithFlags(&event_, timing ? cudaEventDefault : cudaEventDisableTiming));
    }
    ~CudaEvent() {
        if (event_ != nullptr) {
            (void)cudaEventDestroy(event_);
        }
    }
    CudaEvent(const CudaEvent&) = delete;
    CudaEvent& operator=(const CudaEvent&) = delete;
    CudaEvent(CudaEvent&& other) noexcept
        : event_(std::exchange(other.event_, nullptr)) {}
    CudaEvent& operator=(CudaEvent&&) = delete;

    cudaEvent_t get() const { return event_; }
    void record(cudaStream_t stream) const { KVSCOPE_CUDA_CHECK(cudaEventRecord(event_, stream)); }
    void synchronize() const { KVSCOPE_CUDA_CHECK(cudaEventSynchronize(event_)); }

private:
    cudaEvent_t event_ = nullptr;
};

} // namespace kvscope::cuda
