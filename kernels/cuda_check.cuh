// Error checking shared by every launcher: a failed CUDA call becomes a
// CudaError exception that names the call site, never a silent wrong result.
#pragma once

#include <cuda_runtime_api.h>
#include <stdexcept>
#include <string>

namespace kvscope::kernels {

class CudaError : public std::runtime_error {
public:
    CudaError(cudaError_t code, const std::string& what)
        : std::runtime_error(what)
        , code_(code) {}
    cudaError_t code() const noexcept { return code_; }

private:
    cudaError_t code_;
};

// Throws CudaError when `code` is not cudaSuccess.
void check_cuda(cudaError_t code, const char* expression, const char* file, int line);

// Checks the last kernel launch (bad configuration, missing device, ...).
void check_launch(const char* kernel, const char* file, int line);

} // namespace kvscope::kernels

#define KVSCOPE_CUDA_CHECK(expr) ::kvscope::kernels::check_cuda((expr), #expr, __FILE__, __LINE__)
#define KVSCOPE_CHECK_LAUNCH(name) ::kvscope::kernels::check_launch((name), __FILE__, __LINE__)
