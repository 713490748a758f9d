#include "kernels/cuda_check.cuh"

namespace kvscope::kernels {

void check_cuda(cudaError_t code, const char* expression, const char* file, int line) {
    if (code == cudaSuccess) {
        return;
    }
    throw CudaError(code, std::string(file) + ":" + std::to_string(line) + ": " + expression +
                              " failed: " + cudaGetErrorName(code) + " (" +
                              cudaGetErrorString(code) + ")");
}

void check_launch(const char* kernel, const char* file, int line) {
    const cudaError_t code = cudaGetLastError();
    if (code == cudaSuccess) {
        return;
    }
    throw CudaError(code, std::string(file) + ":" + std::to_string(line) + ": launch of " + kernel +
                              " failed: " + cudaGetErrorName(code) + " (" +
                              cudaGetErrorString(code) + ")");
}

} // namespace kvscope::kernels
