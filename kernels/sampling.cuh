// Picks the next token of each row of logits on the device, so a step copies
// back token ids instead of logits: greedy (argmax), or random after top-k,
// top-p and min-p with a temperature, in the CPU sampler's order
// (engine/sampling/sampler.h). The random draw is given per row.
#pragma once

#include <cstdint>
#include <cuda_runtime_api.h>

namespace kvscope::kernels {

// One row's choice: the filters, and the draw u in [0, 1) from the row's
// request's generator (sampling::Sampler::draw_uniform).
struct DeviceSamplingParams {
    float temperature = 0.0f; // <= 0: argmax
    int top_k = 0;            // <= 0: off
    float top_p = 1.0f;       // >= 1: off
    float min_p = 0.0f;       // <= 0: off
    float uniform = 0.0f;     // the draw; ignored when greedy
};

// logits: (rows, vocab); params: (rows) on the device; tokens: (rows).
// all_greedy (every row's temperature <= 0) skips the sort. Uses `scratch`
// of sampling_scratch_bytes(rows, vocab) unless all_greedy. The rule is
// sampling::pick_token's (engine/sampling/sampler.h).
std::size_t sampling_scratch_bytes(int rows, int vocab);
void launch_sample(const float* logits, int rows, int vocab, const DeviceSamplingParams* params,
                   bool all_greedy, std::int32_t* tokens, void* scratch, cudaStream_t stream);

} // namespace kvscope::kernels
