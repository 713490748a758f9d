// y = x · Wᵀ with W stored in any dequantizable GGUF type and x, y in fp32:
// the linear layers of the CPU backend. Weights stay in their file format
// (read in place from the memory map) and are expanded a row at a time into
// a small buffer that stays in L1, then reused for a tile of tokens.
#pragma once

#include "engine/cpu/thread_pool.h"
#include "engine/gguf/tensor_type.h"
#include "engine/model/tensor_view.h"

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace kvscope::cpu {

// A matrix as the kernels read it: the GGUF's view of it, or its rows
// repacked for the fused kernels.
struct WeightMatrix : model::TensorView {
    bool packed = false; // rows in the fused kernels' layout (packed_rows.h), not GGUF's
};

// The matrix in the layout this CPU's kernels run fastest: packed rows
// (packed_rows.h: Q4_0, Q4_1, Q3_K, Q4_K, Q5_0, Q5_1, Q5_K, Q6_K, Q8_0) where the
// fused kernels run (the copy goes to `storage`), else `gguf_layout` itself.
WeightMatrix prepare_for_matmul(const WeightMatrix& gguf_layout, std::vector<std::byte>& storage);

// x: (tokens, cols) row-major; y: (tokens, rows) row-major.
void matmul(const WeightMatrix& w, const float* x, std::int64_t tokens, float* y, ThreadPool& pool);

// Several matrices applied to the same input (Q, K and V; gate and up): the
// input is prepared once and all their rows are shared out in one parallel
// loop, which saves a synchronisation per matrix. All must have x's width.
struct MatmulOutput {
    const WeightMatrix* weights;
    float* y; // (tokens, weights->rows)
};
void matmul_shared_input(std::span<const MatmulOutput> outputs, const float* x, std::int64_t tokens,
                         ThreadPool& pool);

// Expands row `row` of `w` to fp32 (used by matmul and by embedding look-ups).
void dequantize_row(const WeightMatrix& w, std::int64_t row, float* out);

} // namespace kvscope::cpu
