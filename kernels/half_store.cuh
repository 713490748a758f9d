// fp32 activations to fp16, the input type of the cuBLAS linear layers:
// saturated at fp16's largest finite value, so an activation past its range
// stays a large number instead of becoming an infinity that poisons every
// later layer; NaN stays NaN. Device-only, shared by the kernels that write
// the linear layers' inputs (to_half, rms_norm, the gated activation, the
// attention merge and the tile attention's direct write).
#pragma once

#include <cuda_fp16.h>

namespace kvscope::kernels {

inline constexpr float kHalfMax = 65504.0f;

__device__ inline __half to_half_saturated(float x) {
    const float clamped = fminf(fmaxf(x, -kHalfMax), kHalfMax);
    return __float2half_rn(isnan(x) ? x : clamped);
}

// The smallest magnitude fp16 rounds to infinity: what saturation changes.
inline constexpr float kHalfOverflow = 65520.0f;

// The same, counting into `overflows` (activation_overflow.h; null: no
// count) each value saturation changed. An atomic only when one does.
__device__ inline __half to_half_saturated(float x, unsigned int* overflows) {
    if (overflows != nullptr && fabsf(x) >= kHalfOverflow) { // infinities too, not NaN
        atomicAdd(overflows, 1u);
    }
    return to_half_saturated(x);
}

// Stores `value` as the output type: as it is into fp32, saturated into
// fp16 (counted into `overflows` where not null).
__device__ inline void store_activation(float* out, float value, unsigned int* = nullptr) {
    *out = value;
}
__device__ inline void store_activation(__half* out, float value,
                                        unsigned int* overflows = nullptr) {
    *out = to_half_saturated(value, overflows);
}

} // namespace kvscope::kernels
