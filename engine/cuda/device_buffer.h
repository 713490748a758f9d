// Owned memory for the CUDA backend: DeviceBuffer<T> (cudaMalloc) and
// PinnedBuffer<T> (cudaMallocHost, page-locked, so cudaMemcpyAsync really is
// asynchronous and one copy moves a whole step's arrays). Move-only; every
// allocation is checked and names its size when it fails.
#pragma once

#include "kernels/cuda_check.cuh"

#include <cstddef>
#include <cuda_runtime_api.h>
#include <string>
#include <type_traits>
#include <utility>

namespace kvscope::cuda {

namespace detail {

// Frees with `release` on destruction; allocates with `allocate`.
template <class T, cudaError_t (*Allocate)(void**, std::size_t), cudaError_t (*Release)(void*)>
class OwnedBuffer {
    static_assert(std::is_trivially_copyable_v<T>, "device memory holds plain data only");

public:
    OwnedBuffer() = default;
    explicit OwnedBuffer(std::size_t count) { allocate(count); }
    ~OwnedBuffer() { reset(); }
    OwnedBuffer(const OwnedBuffer&) = delete;
    OwnedBuffer& operator=(const OwnedBuffer&) = delete;
    OwnedBuffer(OwnedBuffer&& other) noexcept
        : data_(std::exchange(other.data_, nullptr))
        , count_(std::exchange(other.count_, 0)) {}
    OwnedBuffer& operator=(OwnedBuffer&& other) noexcept {
        if (this != &other) {
            reset();
            data_ = std::exchange(other.data_, nullptr);
            count_ = std::exchange(other.count_, 0);
        }
        return *this;
    }

    T* data() const { return data_; }
    std::size_t size() const { return count_; }
    std::size_t bytes() const { return count_ * sizeof(T); }
    bool empty() const { return count_ == 0; }

    // Makes room for at least `count` elements, dropping the contents when
    // it has to reallocate (activations and staging: rewritten every step).
    // Keeps the larger buffer, so a step never shrinks what the next reuses.
    void reserve_discard(std::size_t count) {
        if (count > count_) {
            reset();
            allocate(count);
        }
    }

    void reset() noexcept {
        if (data_ != nullptr) {
            // A destructor cannot throw; a failed free at exit (the runtime
            // already torn down) leaves nothing to recover.
            (void)Release(data_);
            (void)cudaGetLastError(); // and must not poison the next check
            data_ = nullptr;
            count_ = 0;
        }
    }

private:
    void allocate(std::size_t count) {
        if (count == 0) {
            return;
        }
        void* raw = nullptr;
        const cudaError_t code = Allocate(&raw, count * sizeof(T));
        if (code != cudaSuccess) {
            (void)cudaGetLastError(); // out of memory is not sticky: clear it
            throw kernels::CudaError(code, "cannot allocate " + std::to_string(count * sizeof(T)) +
                                               " bytes of " +
                                               (Release == &cudaFree ? "device" : "pinned host") +
                                               " memory: " + cudaGetErrorString(code));
        }
        data_ = static_cast<T*>(raw);
        count_ = count;
    }

    T* data_ = nullptr;
    std::size_t count_ = 0;
};

// cudaMalloc and cudaMallocHost are overloaded templates in the runtime
// header; these give the plain function pointers the template takes.
inline cudaError_t device_malloc(void** p, std::size_t bytes) {
    return cudaMalloc(p, bytes);
}
inline cudaError_t pinned_malloc(void** p, std::size_t bytes) {
    return cudaMallocHost(p, bytes);
}

} // namespace detail

template <class T>
using DeviceBuffer = detail::OwnedBuffer<T, &detail::device_malloc, &cudaFree>;

template <class T>
using PinnedBuffer = detail::OwnedBuffer<T, &detail::pinned_malloc, &cudaFreeHost>;

} // namespace kvscope::cuda
