// The attention probabilities H2O and SnapKV score cache entries by: for the
// tokens at or after their sequence's capture_attention_from, each entry's
// probability summed over query heads (and, call by call, layers) into the
// sequence's sums at capture_offsets[s]. Uses the merged maximum and sum the
// attention launcher left in its workspace.
#pragma once

#include "kernels/paged_attention.cuh"

namespace kvscope::kernels {

// sums: (capture_offsets[sequences]) floats, accumulated into (zero them per step).
void launch_attention_capture(const PagedKvView& cache, const DeviceBatchView& batch,
                              const float* q, int heads, float scale, int max_context,
                              const AttentionWorkspace& workspace, float* sums,
                              cudaStream_t stream);

} // namespace kvscope::kernels
