// The linear layers of a step with few tokens (a decode of a small batch):
// y (tokens, rows) = x (tokens, cols) · w^T, fp16 weights and inputs, fp32
// sums and output, a warp per output row reading its weights once in 16-byte
// loads. cuBLAS's matrix-product kernels take 3 to 4 us for SmolLM2's layers
// at batch 1 whatever the size (H100, 2026-11-26); this reads the same bytes
// in about half that. The CUDA backend's linear() picks it where it fits.
//
// At such sizes a kernel's time is mostly its start and its first loads, so
// two variants also make their fp16 input themselves, in shared memory, from
// what the kernel before them would have written it from: the RMSNorm of the
// residual stream (the layer's norm fused into the QKV or gate/up product)
// and the gated activation of a gate/up row (fused into the down product).
// Each block computes the whole input (a few thousand values), as the
// separate kernel would have, with the same arithmetic.
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
// added to where `accumulate`. Throws std::invalid_argument where gemv_fits
// does not hold.
void launch_gemv(const __half* w, int rows, int cols, const __half* x, int tokens, float* y,
                 bool accumulate, cudaStream_t stream);

// The input of launch_gemv_normed: the fp16 rows launch_rms_norm_half would
// write from x (tokens, cols) and the norm's weight (cols).
struct GemvNormedInput {
    const float* x = nullptr;
    const float* weight = nullptr;
    float eps = 0.0f;
};

// The input of launch_gemv_gated: the fp16 rows launch_gated_half would write
// from gate_up (tokens, 2 * cols: the gate's cols, then the up's).
struct GemvGatedInput {
    const float* gate_up = nullptr;
    bool gelu_tanh = false; // GeGLU (Gemma), else SwiGLU
};

// Whether the fused variants take this shape: gemv_fits's conditions on w,
// tokens and cols, and the tokens' fp16 rows fit the kernel's shared memory
// (tokens * cols <= 24576).
bool gemv_fused_fits(const __half* w, int tokens, int cols);

// launch_gemv over the normalised rows, without writing them anywhere.
// Throws std::invalid_argument where gemv_fused_fits does not hold.
void launch_gemv_normed(const __half* w, int rows, int cols, const GemvNormedInput& input,
                        int tokens, float* y, bool accumulate, cudaStream_t stream);

// launch_gemv over the gated activations, without writing them anywhere.
// Throws std::invalid_argument where gemv_fused_fits does not hold.
void launch_gemv_gated(const __half* w, int rows, int cols, const GemvGatedInput& input, int tokens,
                       float* y, bool accumulate, cudaStream_t stream);

} // namespace kvscope::kernels
