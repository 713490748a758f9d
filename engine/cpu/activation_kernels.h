// The gated FFN activations over whole rows at once (ops.h's
// gated_activation picks these where the CPU has AVX2): the scalar loop's
// libm tanh and exp took as long as the FFN's matrices at batch 16 on
// Gemma 3 270M (a tanh per FFN value).
#pragma once

#include <cstdint>

namespace kvscope::cpu::detail {

// gate <- gate / (1 + exp(-k(gate))) * up over `count` values, eight at a
// time: k(x) = 2 sqrt(2/pi) (x + 0.044715 x^3) gives GELU-tanh (x sigmoid(2u)
// = 0.5 x (1 + tanh u)), k(x) = x gives SiLU. exp to about 2 ulp (a Cephes
// polynomial) on [-87.3, 88.3]; below, the sigmoid's denominator is taken
// as at -87.3, above as infinite (the activation is 0).
void gated_activation_avx2(float* gate, const float* up, std::int64_t count, bool gelu_tanh);

} // namespace kvscope::cpu::detail
