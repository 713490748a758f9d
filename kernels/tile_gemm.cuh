// The linear layers of a step of a few dozen tokens (a decode of batch 9 to
// 64) on tensor cores: y (tokens, rows) = x (tokens, cols) · w^T, fp16
// weights and inputs, fp32 sums and output (or, gated, act(gate) * up as
// fp16), as gemv.cuh does for up to 8
// tokens and cuBLAS past 64. A block computes 8 output rows for every token,
// its 8 warps each taking every 8th 32-wide slice of the inputs
// (mma.sync m16n8k16: the tokens as M, 16 at a time, the 8 rows as N), then
// summing their shares in shared memory. Each lane reads 16 contiguous bytes
// of a weight row and of each of its input rows per slice: the slice's 32
// columns are dealt to the instruction's K positions in a lane-wise order
// (kernels/math/mma_fragments.h, slice_column) that A and B share, so the
// dot products are the same. Why: at these sizes a cuBLAS product takes 4
// to 6 us whatever the shape, most of it starting up; this kernel reads the
// weights once, starts loading them before the kernel before it ends
// (dependent_launch.cuh), and its blocks fill the GPU from 8 output rows up.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

namespace kvscope::kernels {

// The fewest and the most tokens the kernel takes.
inline constexpr int kTileGemmMinTokens = 1;
inline constexpr int kTileGemmMaxTokens = 64;
// The largest matrix it takes, in values (8 MiB of fp16): past that a
// product is bound by memory bandwidth, not by starting up, and every block
// reading the whole input for its 8 rows (4 times the weights' bytes at 32
// tokens, from L2) costs more than cuBLAS's tiles (an output head of 49,152
// rows would read 226 MB of inputs for 57 MB of weights).
inline constexpr long long kTileGemmMaxValues = 4ll << 20;

// Whether launch_tile_gemm takes this shape: 1 to kTileGemmMaxTokens tokens,
// rows * cols at most kTileGemmMaxValues, cols a multiple of 32, w and x
// 16-byte aligned, a device of compute capability 8.0 or later.
bool tile_gemm_fits(const __half* w, const __half* x, int tokens, int rows, int cols);

// w: (rows, cols) row-major; x: (tokens, cols); y: (tokens, rows), set, or
// added to where `accumulate`; then `bias` (rows, or null) added to each
// token's row, as launch_add_bias would add it. Throws std::invalid_argument
// where tile_gemm_fits does not hold.
void launch_tile_gemm(const __half* w, int rows, int cols, const __half* x, int tokens, float* y,
                      bool accumulate, cudaStream_t stream, const float* bias = nullptr);

// A gated FFN's product and activation in one kernel, as launch_gemv_gated
// (gemv.cuh) for up to 8 tokens: w_gate_up (2 * ffn, cols), the gate's rows
// then the up's; out (tokens, ffn) = act(x . gate^T) * (x . up^T) as fp16,
// act SiLU or (`gelu_tanh`) GELU-tanh, saturated values counted into
// activation_overflow_counter(). Needs tile_gemm_fits for the whole matrix
// and an `out` apart from `x` (else throws std::invalid_argument).
void launch_tile_gemm_gated(const __half* w_gate_up, int ffn, int cols, const __half* x, int tokens,
                            bool gelu_tanh, __half* out, cudaStream_t stream);

} // namespace kvscope::kernels
