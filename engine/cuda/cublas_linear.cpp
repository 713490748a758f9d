#include "engine/cuda/cublas_linear.h"

#include "kernels/gemv.cuh"
#include "kernels/residual_add.cuh"
#include "kernels/swiglu.cuh"
#include "kernels/tile_gemm.cuh"

namespace kvscope::cuda {

void check_cublas(cublasStatus_t status, const std::string& what) {
    if (status == CUBLAS_STATUS_SUCCESS) {
        return;
    }
    throw CublasError(status, what + " failed: " + cublasGetStatusName(status) + " (" +
                                  cublasGetStatusString(status) + ")");
}

CublasHandle::CublasHandle(cudaStream_t stream)
    : stream_(stream) {
    check_cublas(cublasCreate(&handle_), "cublasCreate");
    try {
        check_cublas(cublasSetStream(handle_, stream), "cublasSetStream");
        // A workspace of our own: cuBLAS must not allocate one while a
        // decode step is being captured into a CUDA graph.
        const cudaError_t allocated = cudaMalloc(&workspace_, kWorkspaceBytes);
        if (allocated != cudaSuccess) {
            (void)cudaGetLastError();
            throw std::runtime_error(std::string("cuBLAS workspace: ") +
                                     cudaGetErrorString(allocated));
        }
        check_cublas(cublasSetWorkspace(handle_, workspace_, kWorkspaceBytes),
                     "cublasSetWorkspace");
    } catch (...) {
        if (workspace_ != nullptr) {
            (void)cudaFree(workspace_);
        }
        (void)cublasDestroy(handle_);
        throw;
    }
}

CublasHandle::~CublasHandle() {
    if (handle_ != nullptr) {
        (void)cublasDestroy(handle_); // cannot throw here; nothing to recover
    }
    if (workspace_ != nullptr) {
        (void)cudaFree(workspace_);
    }
}

HalfMatrix matrix_rows(const HalfMatrix& w, int first, int count) {
    if (first < 0 || count < 0 || first + count > w.rows) {
        throw std::invalid_argument("matrix_rows: rows [" + std::to_string(first) + ", " +
                                    std::to_string(first + count) + ") of a matrix of " +
                                    std::to_string(w.rows));
    }
    return {w.data + static_cast<std::ptrdiff_t>(first) * w.cols, count, w.cols};
}

void linear(const CublasHandle& cublas, const __half* x, int tokens, const HalfMatrix& w, float* y,
            bool accumulate, const float* bias) {
    if (tokens <= 0) {
        return;
    }
    if (kernels::gemv_fits(w.data, x, tokens, w.cols)) {
        kernels::launch_gemv(w.data, w.rows, w.cols, x, tokens, y, accumulate, cublas.stream(),
                             bias);
        return;
    }
    if (cublas.tile_gemm() && kernels::tile_gemm_fits(w.data, x, tokens, w.rows, w.cols)) {
        kernels::launch_tile_gemm(w.data, w.rows, w.cols, x, tokens, y, accumulate, cublas.stream(),
                                  bias);
        return;
    }
    // cuBLAS is column-major. Row-major y (tokens, out) is column-major
    // y^T (out, tokens) = w (out, in) · x^T (in, tokens); row-major w (out, in)
    // reads as column-major (in, out), hence OP_T on it, and row-major x
    // (tokens, in) reads as column-major (in, tokens), OP_N.
    const float alpha = 1.0f;
    const float beta = accumulate ? 1.0f : 0.0f;
    const cublasStatus_t status = cublasGemmEx(
        cublas.get(), CUBLAS_OP_T, CUBLAS_OP_N, /*m=*/w.rows, /*n=*/tokens, /*k=*/w.cols, &alpha,
        w.data, CUDA_R_16F, /*lda=*/w.cols, x, CUDA_R_16F, /*ldb=*/w.cols, &beta, y, CUDA_R_32F,
        /*ldc=*/w.rows, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (status != CUBLAS_STATUS_SUCCESS) {
        check_cublas(status, "cublasGemmEx for y (" + std::to_string(tokens) + ", " +
                                 std::to_string(w.rows) + ") = x (" + std::to_string(tokens) +
                                 ", " + std::to_string(w.cols) + ") . w^T (" +
                                 std::to_string(w.rows) + ", " + std::to_string(w.cols) + ")");
    }
    if (bias != nullptr) {
        kernels::launch_add_bias(y, bias, tokens, w.rows, cublas.stream());
    }
}

void gated_linear(const CublasHandle& cublas, const __half* x, int tokens,
                  const HalfMatrix& w_gate_up, bool gelu_tanh, float* gate_up, __half* out) {
    if (tokens <= 0) {
        return;
    }
    const int ffn = w_gate_up.rows / 2;
    if (kernels::gemv_fits(w_gate_up.data, x, tokens, w_gate_up.cols)) {
        kernels::launch_gemv_gated(w_gate_up.data, ffn, w_gate_up.cols, x, tokens, gelu_tanh, out,
                                   cublas.stream());
        return;
    }
    if (cublas.tile_gemm() &&
        kernels::tile_gemm_fits(w_gate_up.data, x, tokens, w_gate_up.rows, w_gate_up.cols)) {
        kernels::launch_tile_gemm_gated(w_gate_up.data, ffn, w_gate_up.cols, x, tokens, gelu_tanh,
                                        out, cublas.stream());
        return;
    }
    linear(cublas, x, tokens, w_gate_up, gate_up);
    kernels::launch_gated_half(gate_up, tokens, ffn, gelu_tanh, out, cublas.stream());
}

} // namespace kvscope::cuda
