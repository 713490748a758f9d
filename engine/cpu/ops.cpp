#include "engine/cpu/ops.h"

#include "engine/cpu/activation_kernels.h"
#include "engine/cpu/kernel_set.h"
#include "kernels/math/activation_math.h"
#include "kernels/math/rope_math.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kvscope::cpu {

void rms_norm(const float* x, const float* weight, float* out, std::int64_t tokens,
              std::int64_t dim, float eps) {
    for (std::int64_t t = 0; t < tokens; ++t) {
        const float* row = x + t * dim;
        float* dst = out + t * dim;
        float sum_sq = 0.0f;
        for (std::int64_t i = 0; i < dim; ++i) {
            sum_sq += row[i] * row[i];
        }
        const float scale = 1.0f / std::sqrt(sum_sq / static_cast<float>(dim) + eps);
        for (std::int64_t i = 0; i < dim; ++i) {
            dst[i] = row[i] * scale * weight[i];
        }
    }
}

void rope_tables(const std::int32_t* positions, std::int64_t tokens, int head_dim, float theta_base,
                 const float* divisors, float* cos_out, float* sin_out) {
    const int pairs = head_dim / 2;
    for (std::int64_t t = 0; t < tokens; ++t) {
        for (int i = 0; i < pairs; ++i) {
            const math::RopeCosSin angle = math::rope_cos_sin(positions[t], i, head_dim, theta_base,
                                                              math::rope_divisor(divisors, i));
            cos_out[t * pairs + i] = angle.cos;
            sin_out[t * pairs + i] = angle.sin;
        }
    }
}

void rope(float* x, const float* cos, const float* sin, std::int64_t tokens, int heads,
          int head_dim, model::RopePairing pairing) {
    const int pairs = head_dim / 2;
    const bool halves = pairing == model::RopePairing::halves;
    for (std::int64_t t = 0; t < tokens; ++t) {
        const float* c = cos + t * pairs;
        const float* s = sin + t * pairs;
        for (int h = 0; h < heads; ++h) {
            float* head = x + (t * heads + h) * head_dim;
            for (int i = 0; i < pairs; ++i) {
                const math::RopePairDims dims = math::rope_pair_dims(halves, i, head_dim);
                math::rope_rotate(head[dims.first], head[dims.second], {c[i], s[i]});
            }
        }
    }
}

void gated_activation(float* gate, const float* up, std::int64_t count,
                      model::GateActivation activation) {
#if defined(__x86_64__)
    if (kernel_set() != KernelSet::scalar) {
        detail::gated_activation_avx2(gate, up, count,
                                      activation == model::GateActivation::gelu_tanh);
        return;
    }
#endif
    if (activation == model::GateActivation::gelu_tanh) {
        for (std::int64_t i = 0; i < count; ++i) {
            gate[i] = math::gelu_tanh(gate[i]) * up[i];
        }
        return;
    }
    for (std::int64_t i = 0; i < count; ++i) {
        const float g = gate[i];
        gate[i] = g / (1.0f + std::exp(-g)) * up[i];
    }
}

void add_bias(float* x, const float* bias, std::int64_t tokens, std::int64_t width) {
    for (std::int64_t t = 0; t < tokens; ++t) {
        add_in_place(x + t * width, bias, width);
    }
}

void add_in_place(float* x, const float* y, std::int64_t count) {
    for (std::int64_t i = 0; i < count; ++i) {
        x[i] += y[i];
    }
}

} // namespace kvscope::cpu
