// Which format K or V is stored in, and the group size of the grouped
// formats: all the kernels need to know of a format. The names, parsing and
// sizes the engine and front ends use are in engine/kv/kv_format.h.
#pragma once

namespace kvscope::kv {

enum class KvFormat {
    f32,
    f16,
    bf16,
    fp8_e4m3, // one fp32 scale per (token, head): amax / 448
    q8_0,     // groups of 32 values: fp16 scale + 32 int8
    q4_0,     // groups of 32 values: fp16 scale + 32 4-bit codes (offset 8)
    q4_1,     // groups of 32 values: fp16 scale and minimum + 32 4-bit codes
    kivi4,    // KIVI, 4 bits: keys per channel across a block, values per token
    kivi2,    // KIVI, 2 bits
};

// Values per quantisation group of the grouped formats (q8_0, q4_*, KIVI's
// per-token values): head_dim must be a multiple of it.
inline constexpr int kKvGroupSize = 32;

} // namespace kvscope::kv
