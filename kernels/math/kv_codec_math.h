// The KV formats' bytes, element by element: layouts, encoders and decoders
// written once for the CPU codec (engine/cpu/kv_codec.cpp) and the CUDA
// kernels (kernels/kv_append.cu, kernels/paged_attention.cu). The CPU tests of
// the formats therefore check the very code the GPU runs.
//
// A "row" is one token's head_dim values for one KV head; a "head block" one
// head's slice of one cache block (block_size rows, or KIVI's key layout).
#pragma once

#include "kernels/math/half.h"
#include "kernels/math/host_device.h"
#include "kernels/math/kv_format_kind.h"

#include <cmath>
#include <cstdint>
#include <math.h> // nearbyintf, fabsf: the names both compilers know in device code

namespace kvscope::math {

using kv::KvFormat;
inline constexpr int kGroup = kv::kKvGroupSize;
inline constexpr float kE4m3Max = 448.0f;

// ---- Layout --------------------------------------------------------------------

// Bytes of one 32-value group of q8_0, q4_0, q4_1; 0 for other formats.
KVSCOPE_HD constexpr int group_bytes(KvFormat format) {
    return format == KvFormat::q8_0   ? 2 + kGroup
           : format == KvFormat::q4_0 ? 2 + kGroup / 2
           : format == KvFormat::q4_1 ? 4 + kGroup / 2
                                      : 0;
}

KVSCOPE_HD constexpr bool quantises_whole_blocks(KvFormat format) {
    return format == KvFormat::kivi4 || format == KvFormat::kivi2;
}

KVSCOPE_HD constexpr int kivi_bits(KvFormat format) {
    return format == KvFormat::kivi4 ? 4 : format == KvFormat::kivi2 ? 2 : 0;
}

// Bytes of one token's row in a per-token format; KIVI keys have none (0).
KVSCOPE_HD constexpr std::int64_t row_bytes(KvFormat format, int head_dim, bool is_key) {
    const std::int64_t d = head_dim;
    switch (format) {
    case KvFormat::f32:
        return 4 * d;
    case KvFormat::f16:
    case KvFormat::bf16:
        return 2 * d;
    case KvFormat::fp8_e4m3:
        return 4 + d; // fp32 scale, then one byte per value
    case KvFormat::q8_0:
    case KvFormat::q4_0:
    case KvFormat::q4_1:
        return d / kGroup * group_bytes(format);
    case KvFormat::kivi4:
    case KvFormat::kivi2:
        // Values: every group's fp16 scale and minimum first, then the codes.
        return is_key ? 0 : d / kGroup * 4 + d * math::kivi_bits(format) / 8;
    }
    return 0;
}

// Bytes of one head block. KIVI keys: per channel an fp16 scale, then per
// channel an fp16 minimum, then each token's packed codes.
KVSCOPE_HD constexpr std::int64_t head_block_bytes(KvFormat format, int block_size, int head_dim,
                                                   bool is_key) {
    if (math::quantises_whole_blocks(format) && is_key) {
        return static_cast<std::int64_t>(head_dim) * 4 +
               static_cast<std::int64_t>(block_size) * head_dim * math::kivi_bits(format) / 8;
    }
    return static_cast<std::int64_t>(block_size) * row_bytes(format, head_dim, is_key);
}

// ---- Scalars -------------------------------------------------------------------

// fp8 E4M3, the OCP "FN" variant (no infinities, largest finite 448), rounded
// to nearest even and saturated.
KVSCOPE_HD inline std::uint8_t fp32_to_e4m3(float value) {
    const std::uint32_t bits = float_to_bits(value);
    const auto sign = static_cast<std::uint8_t>((bits >> 24) & 0x80u);
    const std::uint32_t abs_bits = bits & 0x7fffffffu;
    if (abs_bits > 0x7f800000u) { // NaN
        return static_cast<std::uint8_t>(sign | 0x7f);
    }
    const float magnitude = bits_to_float(abs_bits);
    if (magnitude >= kE4m3Max) { // saturate (also infinities)
        return static_cast<std::uint8_t>(sign | 0x7e);
    }
    if (magnitude < 0.015625f) { // below 2^-6: subnormal steps of 2^-9
        // Round half to even; a result of 8 is the smallest normal.
        return static_cast<std::uint8_t>(sign | static_cast<int>(nearbyintf(magnitude * 512.0f)));
    }
    int exponent = static_cast<int>(abs_bits >> 23) - 127;
    std::uint32_t mantissa = (abs_bits & 0x7fffffu) >> 20;
    const std::uint32_t rest = abs_bits & 0xfffffu;
    if (rest > 0x80000u || (rest == 0x80000u && (mantissa & 1u))) {
        if (++mantissa == 8) {
            mantissa = 0;
            ++exponent;
        }
    }
    const int code = ((exponent + 7) << 3) | static_cast<int>(mantissa);
    return static_cast<std::uint8_t>(sign | (code < 0x7e ? code : 0x7e));
}

// byte - offset, exactly, for byte in [0, 256) and offset in [0, 256]: the
// float whose bits are 2^23's with `byte` as its low mantissa bits is
// 2^23 + byte, and both it and 2^23 + offset are exact, so their difference
// is too. No integer-to-float conversion, which NVIDIA GPUs run at a quarter
// of their float rate or less.
inline constexpr float kTwo23 = 8388608.0f;
KVSCOPE_HD inline float byte_minus(std::uint32_t byte, float two_23_plus_offset) {
    return bits_to_float(0x4b000000u | byte) - two_23_plus_offset;
}

// Without branches (the GPU's attention decodes one value per key and value
// element): a normal code's exponent and mantissa bits, moved into fp32's
// places, need only the bias added (127 - 7); a subnormal one is its 3
// mantissa bits times 2^-9, exact in fp32 (no fp32 subnormal is formed).
KVSCOPE_HD inline float e4m3_to_fp32(std::uint8_t code) {
    const std::uint32_t sign = static_cast<std::uint32_t>(code & 0x80u) << 24;
    const std::uint32_t magnitude = code & 0x7fu;
    const float normal = bits_to_float((magnitude << 20) + (120u << 23));
    const float subnormal = byte_minus(magnitude, kTwo23) * (1.0f / 512.0f);
    const std::uint32_t bits = magnitude == 0x7fu ? 0x7fc00000u
                               : magnitude >= 8u  ? float_to_bits(normal)
                                                  : float_to_bits(subnormal);
    return bits_to_float(sign | bits);
}

// Asymmetric codes (q4_1, KIVI): x ~= min + code * scale, code in [0, 2^bits).
KVSCOPE_HD inline std::uint8_t asymmetric_code(float x, float scale, float min, int bits) {
    const float inverse = scale > 0.0f ? 1.0f / scale : 0.0f;
    return static_cast<std::uint8_t>(
        clamp_i(static_cast<int>(nearbyintf((x - min) * inverse)), 0, (1 << bits) - 1));
}

// Scale and minimum of n values x[0], x[stride], ... for codes of `bits`
// bits, both rounded to fp16 as they are stored.
struct HalfScaleMin {
    std::uint16_t scale;
    std::uint16_t min;
};
KVSCOPE_HD inline HalfScaleMin fit_scale_min(const float* x, int n, std::int64_t stride, int bits) {
    float lo = x[0];
    float hi = x[0];
    for (int i = 1; i < n; ++i) {
        lo = min_f(lo, x[i * stride]);
        hi = max_f(hi, x[i * stride]);
    }
    return {fp32_to_fp16((hi - lo) / static_cast<float>((1 << bits) - 1)), fp32_to_fp16(lo)};
}

// A code of 2 or 4 bits at `index`, packed little end first within bytes.
KVSCOPE_HD inline int unpack_code(const std::uint8_t* codes, int index, int bits) {
    const int per_byte = 8 / bits;
    return (codes[index / per_byte] >> ((index % per_byte) * bits)) & ((1 << bits) - 1);
}

// ---- Per-token rows --------------------------------------------------------------

// One 32-value group of q8_0: fp16 scale amax / 127, then 32 int8 codes.
KVSCOPE_HD inline void encode_q8_0_group(const float* x, std::uint8_t* out) {
    float amax = 0.0f;
    for (int i = 0; i < kGroup; ++i) {
        amax = max_f(amax, fabsf(x[i]));
    }
    const std::uint16_t scale_half = fp32_to_fp16(amax / 127.0f);
    const float scale = fp16_to_fp32(scale_half);
    const float inverse = scale > 0.0f ? 1.0f / scale : 0.0f;
    store_u16(out, scale_half);
    for (int i = 0; i < kGroup; ++i) {
        const int q = clamp_i(static_cast<int>(nearbyintf(x[i] * inverse)), -127, 127);
        out[2 + i] = static_cast<std::uint8_t>(static_cast<std::int8_t>(q));
    }
}

// q4_0: the value of largest magnitude maps to -8, so the scale keeps its
// sign and the whole range [-8, 7] is used (GGUF's rounding). Byte j holds
// value j (low nibble) and value j + 16 (high nibble), as in GGUF.
KVSCOPE_HD inline void encode_q4_0_group(const float* x, std::uint8_t* out) {
    float extreme = 0.0f;
    for (int i = 0; i < kGroup; ++i) {
        if (fabsf(x[i]) > fabsf(extreme)) {
            extreme = x[i];
        }
    }
    const std::uint16_t scale_half = fp32_to_fp16(extreme / -8.0f);
    const float scale = fp16_to_fp32(scale_half);
    const float inverse = scale != 0.0f ? 1.0f / scale : 0.0f;
    store_u16(out, scale_half);
    for (int j = 0; j < kGroup / 2; ++j) {
        const int lo = clamp_i(static_cast<int>(nearbyintf(x[j] * inverse)) + 8, 0, 15);
        const int hi =
            clamp_i(static_cast<int>(nearbyintf(x[j + kGroup / 2] * inverse)) + 8, 0, 15);
        out[2 + j] = static_cast<std::uint8_t>(lo | (hi << 4));
    }
}

KVSCOPE_HD inline void encode_q4_1_group(const float* x, std::uint8_t* out) {
    const HalfScaleMin fit = fit_scale_min(x, kGroup, 1, 4);
    store_u16(out, fit.scale);
    store_u16(out + 2, fit.min);
    const float scale = fp16_to_fp32(fit.scale);
    const float min = fp16_to_fp32(fit.min);
    for (int j = 0; j < kGroup / 2; ++j) {
        const int lo = asymmetric_code(x[j], scale, min, 4);
        const int hi = asymmetric_code(x[j + kGroup / 2], scale, min, 4);
        out[4 + j] = static_cast<std::uint8_t>(lo | (hi << 4));
    }
}

// KIVI values, one token: per group fp16 scale and minimum (all groups'
// first), then codes of `bits` bits.
KVSCOPE_HD inline void encode_kivi_value_row(int bits, const float* x, int head_dim,
                                             std::uint8_t* out) {
    const int groups = head_dim / kGroup;
    const int per_byte = 8 / bits;
    std::uint8_t* code_bytes = out + groups * 4;
    for (int g = 0; g < groups; ++g) {
        const float* group = x + g * kGroup;
        const HalfScaleMin fit = fit_scale_min(group, kGroup, 1, bits);
        store_u16(out + g * 4, fit.scale);
        store_u16(out + g * 4 + 2, fit.min);
        const float scale = fp16_to_fp32(fit.scale);
        const float min = fp16_to_fp32(fit.min);
        std::uint8_t* codes = code_bytes + g * kGroup * bits / 8;
        for (int b = 0; b < kGroup / per_byte; ++b) {
            int byte = 0;
            for (int k = 0; k < per_byte; ++k) {
                byte |= asymmetric_code(group[b * per_byte + k], scale, min, bits) << (k * bits);
            }
            codes[b] = static_cast<std::uint8_t>(byte);
        }
    }
}

// Encodes one row of head_dim values in a per-token format (KIVI values
// included; KIVI keys are encoded per block, below).
KVSCOPE_HD inline void encode_row(KvFormat format, const float* x, int head_dim,
                                  std::uint8_t* row) {
    switch (format) {
    case KvFormat::f32:
        for (int i = 0; i < head_dim; ++i) {
            store_f32(row + 4 * i, x[i]);
        }
        return;
    case KvFormat::f16:
        for (int i = 0; i < head_dim; ++i) {
            store_u16(row + 2 * i, fp32_to_fp16(x[i]));
        }
        return;
    case KvFormat::bf16:
        for (int i = 0; i < head_dim; ++i) {
            store_u16(row + 2 * i, fp32_to_bf16(x[i]));
        }
        return;
    case KvFormat::fp8_e4m3: {
        float amax = 0.0f;
        for (int i = 0; i < head_dim; ++i) {
            amax = max_f(amax, fabsf(x[i]));
        }
        const float scale = amax > 0.0f ? amax / kE4m3Max : 1.0f;
        store_f32(row, scale);
        for (int i = 0; i < head_dim; ++i) {
            row[4 + i] = fp32_to_e4m3(x[i] / scale);
        }
        return;
    }
    case KvFormat::q8_0:
        for (int g = 0; g < head_dim / kGroup; ++g) {
            encode_q8_0_group(x + g * kGroup, row + g * group_bytes(format));
        }
        return;
    case KvFormat::q4_0:
        for (int g = 0; g < head_dim / kGroup; ++g) {
            encode_q4_0_group(x + g * kGroup, row + g * group_bytes(format));
        }
        return;
    case KvFormat::q4_1:
        for (int g = 0; g < head_dim / kGroup; ++g) {
            encode_q4_1_group(x + g * kGroup, row + g * group_bytes(format));
        }
        return;
    case KvFormat::kivi4:
    case KvFormat::kivi2:
        encode_kivi_value_row(math::kivi_bits(format), x, head_dim, row);
        return;
    }
}

// Value i of a row in a per-token format. Every decoder of rows, the CPU's
// and the GPU's, computes exactly this.
KVSCOPE_HD inline float decode_row_element(KvFormat format, const std::uint8_t* row, int head_dim,
                                           int i) {
    switch (format) {
    case KvFormat::f32:
        return load_f32(row + 4 * i);
    case KvFormat::f16:
        return fp16_to_fp32(load_u16(row + 2 * i));
    case KvFormat::bf16:
        return bf16_to_fp32(load_u16(row + 2 * i));
    case KvFormat::fp8_e4m3:
        return load_f32(row) * e4m3_to_fp32(row[4 + i]);
    case KvFormat::q8_0: {
        const std::uint8_t* group = row + (i / kGroup) * group_bytes(format);
        return fp16_to_fp32(load_u16(group)) *
               static_cast<float>(static_cast<std::int8_t>(group[2 + i % kGroup]));
    }
    case KvFormat::q4_0:
    case KvFormat::q4_1: {
        const bool has_min = format == KvFormat::q4_1;
        const std::uint8_t* group = row + (i / kGroup) * group_bytes(format);
        const int j = i % kGroup;
        const std::uint8_t byte = group[(has_min ? 4 : 2) + j % (kGroup / 2)];
        const int code = j < kGroup / 2 ? (byte & 0xf) : (byte >> 4);
        const float scale = fp16_to_fp32(load_u16(group));
        return has_min ? mul_add_unfused(scale, static_cast<float>(code),
                                         fp16_to_fp32(load_u16(group + 2)))
                       : scale * static_cast<float>(code - 8);
    }
    case KvFormat::kivi4:
    case KvFormat::kivi2: {
        const int bits = math::kivi_bits(format);
        const int g = i / kGroup;
        const std::uint8_t* codes = row + head_dim / kGroup * 4 + g * kGroup * bits / 8;
        return mul_add_unfused(fp16_to_fp32(load_u16(row + g * 4)),
                               static_cast<float>(unpack_code(codes, i % kGroup, bits)),
                               fp16_to_fp32(load_u16(row + g * 4 + 2)));
    }
    }
    return 0.0f;
}

// Values [32 g, 32 g + 32) of a row in a per-token format into out[0..32):
// decode_row_element's arithmetic with each group's scales loaded once, for
// decoders that read whole rows (the CPU's tiles). Any format whose head_dim
// is a multiple of 32; the grouped ones always are.
KVSCOPE_HD inline void decode_row_group(KvFormat format, const std::uint8_t* row, int head_dim,
                                        int g, float* out) {
    const int first = g * kGroup;
    switch (format) {
    case KvFormat::q8_0: {
        const std::uint8_t* group = row + g * group_bytes(format);
        const float scale = fp16_to_fp32(load_u16(group));
        for (int j = 0; j < kGroup; ++j) {
            out[j] = scale * static_cast<float>(static_cast<std::int8_t>(group[2 + j]));
        }
        return;
    }
    case KvFormat::q4_0: {
        const std::uint8_t* group = row + g * group_bytes(format);
        const float scale = fp16_to_fp32(load_u16(group));
        for (int j = 0; j < kGroup / 2; ++j) {
            out[j] = scale * static_cast<float>((group[2 + j] & 0xf) - 8);
            out[j + kGroup / 2] = scale * static_cast<float>((group[2 + j] >> 4) - 8);
        }
        return;
    }
    case KvFormat::q4_1: {
        const std::uint8_t* group = row + g * group_bytes(format);
        const float scale = fp16_to_fp32(load_u16(group));
        const float min = fp16_to_fp32(load_u16(group + 2));
        for (int j = 0; j < kGroup / 2; ++j) {
            out[j] = mul_add_unfused(scale, static_cast<float>(group[4 + j] & 0xf), min);
            out[j + kGroup / 2] =
                mul_add_unfused(scale, static_cast<float>(group[4 + j] >> 4), min);
        }
        return;
    }
    case KvFormat::kivi4:
    case KvFormat::kivi2: {
        const int bits = math::kivi_bits(format);
        const float scale = fp16_to_fp32(load_u16(row + g * 4));
        const float min = fp16_to_fp32(load_u16(row + g * 4 + 2));
        const std::uint8_t* codes = row + head_dim / kGroup * 4 + g * kGroup * bits / 8;
        for (int j = 0; j < kGroup; ++j) {
            out[j] = mul_add_unfused(scale, static_cast<float>(unpack_code(codes, j, bits)), min);
        }
        return;
    }
    default:
        for (int j = 0; j < kGroup; ++j) {
            out[j] = decode_row_element(format, row, head_dim, first + j);
        }
        return;
    }
}

// ---- KIVI keys: one head block, quantised per channel over its tokens -----------

// Channel c's scale and minimum over the block's tokens, tile (block_size,
// head_dim), stored in the head block's header.
KVSCOPE_HD inline void encode_kivi_key_channel(int bits, const float* tile, int block_size,
                                               int head_dim, int c, std::uint8_t* head_block) {
    const HalfScaleMin fit = fit_scale_min(tile + c, block_size, head_dim, bits);
    store_u16(head_block + 2 * c, fit.scale);
    store_u16(head_block + 2 * head_dim + 2 * c, fit.min);
}

// Byte b of token t's packed codes, from the header encode_kivi_key_channel
// wrote for the channels it covers.
KVSCOPE_HD inline void encode_kivi_key_byte(int bits, const float* tile, int head_dim, int t, int b,
                                            std::uint8_t* head_block) {
    const int per_byte = 8 / bits;
    int byte = 0;
    for (int k = 0; k < per_byte; ++k) {
        const int c = b * per_byte + k;
        const float scale = fp16_to_fp32(load_u16(head_block + 2 * c));
        const float min = fp16_to_fp32(load_u16(head_block + 2 * head_dim + 2 * c));
        byte |= asymmetric_code(tile[static_cast<std::int64_t>(t) * head_dim + c], scale, min, bits)
                << (k * bits);
    }
    const std::int64_t row_code_bytes = static_cast<std::int64_t>(head_dim) * bits / 8;
    head_block[static_cast<std::int64_t>(head_dim) * 4 + t * row_code_bytes + b] =
        static_cast<std::uint8_t>(byte);
}

KVSCOPE_HD inline float decode_kivi_key_element(int bits, const std::uint8_t* head_block,
                                                int head_dim, int t, int c) {
    const std::int64_t row_code_bytes = static_cast<std::int64_t>(head_dim) * bits / 8;
    const std::uint8_t* codes =
        head_block + static_cast<std::int64_t>(head_dim) * 4 + t * row_code_bytes;
    return mul_add_unfused(fp16_to_fp32(load_u16(head_block + 2 * c)),
                           static_cast<float>(unpack_code(codes, c, bits)),
                           fp16_to_fp32(load_u16(head_block + 2 * head_dim + 2 * c)));
}

} // namespace kvscope::math
