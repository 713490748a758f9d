// The linear layers of a step with few tokens (a decode of a small batch):
// y (tokens, rows) = x (tokens, cols) · w^T, fp16 weights and inputs, fp32
// sums and output (or, for a gated FFN, act(gate) * up stored as fp16), a
// warp per output row reading its weights once in 16-byte loads. cuBLAS's matrix-product kernels
// take 3 to 4 us for SmolLM2's layers at batch 1 whatever the size (H100, 2026-11-26); this reads
// the same bytes in about half that. The CUDA backend's linear() picks it where it fits.
//
// At such sizes a kernel's time is mostly its start and its first loads: each
// lane loads the first chunks of its row's weights before it waits for the
// kernel before it (dependent_launch.cuh), so with overlapped launches those
// loads run while that kernel ends. (Folding the RMSNorm before it and the
// gated activation into the GEMV that reads them, each block computing the
// whole input in shared memory, was measured and dropped: 0.88 ms a step at
// batch 1 against 0.81 with overlapped launches alone, and 2.8 against 1.3 at
// batch 8, on an H100, 2026-11-27, bench/results/gpu-2026-11-27-nvidia-h100-
// 80gb-hbm3. The gated activation in the epilogue of the gate/up GEMV that
// writes its operands, launch_gemv_gated, recomputes nothing: each warp
// computes one gate and its up.)
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

namespace kvscope::kernels {

// The most tokens the kernel takes in one pass.
inline constexpr int kGemvMaxTokens = 8;

// Whether launch_gemv takes this shape: 1 to kGemvMaxTokens tokens, cols a
// multiple of 8, and w and x 16-byte aligned.
bool gemv_fits(const __half* w, const __half* x, int tokens, int cols);

// w: (rows, cols) row-major; x: (tokens, cols); y: (tokens, rows), set, or
// added to where `accumulate`; then `bias` (rows, or null) added to each
// token's row, as launch_add_bias would add it (Qwen 2's QKV bias, one
// kernel fewer). Throws std::invalid_argument where gemv_fits does not hold.
void launch_gemv(const __half* w, int rows, int cols, const __half* x, int tokens, float* y,
                 bool accumulate, cudaStream_t stream, const float* bias = nullptr);

// A gated FFN's product and activation in one kernel: w_gate_up (2 * ffn,
// cols) holds the gate's rows then the up's (the fused gate_up layer); out
// (tokens, ffn) = act(x . gate^T) * (x . up^T) as fp16, act SiLU or, where
// `gelu_tanh`, GELU-tanh: the bits launch_gemv then launch_gated_half
// (swiglu.cuh) give, one kernel and no fp32 round trip fewer. Saturated
// values count into activation_overflow_counter(). Needs gemv_fits and an
// `out` apart from `x` (else throws std::invalid_argument).
void launch_gemv_gated(const __half* w_gate_up, int ffn, int cols, const __half* x, int tokens,
                       bool gelu_tanh, __half* out, cudaStream_t stream);

} // namespace kvscope::kernels
