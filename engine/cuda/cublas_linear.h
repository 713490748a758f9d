// The linear layers of the CUDA backend, through cuBLAS: fp16 weights and
// activations in, fp32 accumulation and output, as llama.cpp and vLLM run
// fp16 models. One handle per backend, bound to the backend's stream.
#pragma once

#include <cstddef>
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <stdexcept>
#include <string>

namespace kvscope::cuda {

// A weight matrix on the device in the GGUF/PyTorch orientation.
struct HalfMatrix {
    const __half* data = nullptr; // (rows, cols) row-major
    int rows = 0;                 // output features
    int cols = 0;                 // input features
};

// Thrown when a cuBLAS call fails; says which call and shape.
class CublasError : public std::runtime_error {
public:
    CublasError(cublasStatus_t status, const std::string& what)
        : std::runtime_error(what)
        , status_(status) {}
    cublasStatus_t status() const noexcept { return status_; }

private:
    cublasStatus_t status_;
};

// Throws CublasError naming `what` when `status` is not CUBLAS_STATUS_SUCCESS.
void check_cublas(cublasStatus_t status, const std::string& what);

// An owned cuBLAS handle whose work goes to `stream`.
class CublasHandle {
public:
    explicit CublasHandle(cudaStream_t stream);
    ~CublasHandle();
    CublasHandle(const CublasHandle&) = delete;
    CublasHandle& operator=(const CublasHandle&) = delete;

    cublasHandle_t get() const { return handle_; }
    cudaStream_t stream() const { return stream_; }
    // Whether linear() computes 9 to 64 tokens with the tensor-core kernel
    // of our own (kernels/tile_gemm.cuh) instead of cuBLAS.
    bool tile_gemm() const { return tile_gemm_; }
    void set_tile_gemm(bool on) { tile_gemm_ = on; }

private:
    // cuBLAS's recommendation for Hopper (32 MiB); enough for earlier GPUs.
    static constexpr std::size_t kWorkspaceBytes = std::size_t{32} << 20;
    cublasHandle_t handle_ = nullptr;
    cudaStream_t stream_ = nullptr;
    void* workspace_ = nullptr;
    bool tile_gemm_ = true;
};

// y = x · w^T: x (tokens, w.cols) fp16, y (tokens, w.rows) fp32, row-major,
// accumulated in fp32. With `accumulate`, y += x · w^T instead (the residual
// add done by the matrix product's epilogue). `bias` (w.rows fp32 on the
// device, or null) is then added to each row: in the GEMV's and the tile
// GEMM's epilogue, after cuBLAS by kernels::launch_add_bias (the same sums). Up to 8 tokens run as
// a GEMV of our own (kernels/gemv.cuh) where the shape fits, up to 64 on tensor cores
// (kernels/tile_gemm.cuh) unless the handle says otherwise, more through cuBLAS. Runs on the
// handle's stream; tokens == 0 does nothing.
void linear(const CublasHandle& cublas, const __half* x, int tokens, const HalfMatrix& w, float* y,
            bool accumulate = false, const float* bias = nullptr);

// A gated FFN's first half: out (tokens, ffn) = act(x . gate^T) * (x . up^T)
// as fp16 (saturated and counted), w_gate_up's rows the gate's ffn then the
// up's, act SiLU or (`gelu_tanh`) GELU-tanh. Where linear() would take the
// GEMV or the tile GEMM, one kernel with the activation in its epilogue
// (kernels::launch_gemv_gated, launch_tile_gemm_gated); through cuBLAS, the
// product into gate_up (tokens, 2 * ffn fp32, scratch), then
// kernels::launch_gated_half. The same bits as the product then the
// activation, whichever kernel computes the product.
void gated_linear(const CublasHandle& cublas, const __half* x, int tokens,
                  const HalfMatrix& w_gate_up, bool gelu_tanh, float* gate_up, __half* out);

// Rows [first, first + count) of w: one layer of a stacked matrix.
HalfMatrix matrix_rows(const HalfMatrix& w, int first, int count);

} // namespace kvscope::cuda
