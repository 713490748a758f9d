#include "engine/gguf/dequantize.h"

#include "engine/gguf/k_quant_scales.h"
#include "kernels/math/half.h"

#include <cstring>
#include <stdexcept>
#include <string>

namespace kvscope::gguf {
namespace {

std::uint16_t load_u16(const std::byte* p) {
    std::uint16_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

float load_fp16(const std::byte* p) {
    return fp16_to_fp32(load_u16(p));
}

const std::uint8_t* as_u8(const std::byte* p) {
    return reinterpret_cast<const std::uint8_t*>(p);
}

// ---- 32-value blocks ----------------------------------------------------------

// Q4_0: fp16 d, 16 bytes of nibbles; x = (q - 8) * d. Low nibbles hold values
// 0..15, high nibbles 16..31.
void q4_0(const std::byte* block, float* y) {
    const float d = load_fp16(block);
    const std::uint8_t* qs = as_u8(block + 2);
    for (int j = 0; j < 16; ++j) {
        y[j] = static_cast<float>((qs[j] & 0x0f) - 8) * d;
        y[j + 16] = static_cast<float>((qs[j] >> 4) - 8) * d;
    }
}

// Q4_1: fp16 d, fp16 m, 16 bytes of nibbles; x = q * d + m.
void q4_1(const std::byte* block, float* y) {
    const float d = load_fp16(block);
    const float m = load_fp16(block + 2);
    const std::uint8_t* qs = as_u8(block + 4);
    for (int j = 0; j < 16; ++j) {
        y[j] = static_cast<float>(qs[j] & 0x0f) * d + m;
        y[j + 16] = static_cast<float>(qs[j] >> 4) * d + m;
    }
}

// Q5_0: fp16 d, 32 high bits, 16 bytes of low nibbles; x = (q - 16) * d.
void q5_0(const std::byte* block, float* y) {
    const float d = load_fp16(block);
    std::uint32_t qh;
    std::memcpy(&qh, block + 2, sizeof qh);
    const std::uint8_t* qs = as_u8(block + 6);
    for (int j = 0; j < 16; ++j) {
        const int high0 = static_cast<int>(((qh >> j) << 4) & 0x10);
        const int high1 = static_cast<int>((qh >> (j + 12)) & 0x10);
        y[j] = static_cast<float>(((qs[j] & 0x0f) | high0) - 16) * d;
        y[j + 16] = static_cast<float>(((qs[j] >> 4) | high1) - 16) * d;
    }
}

// Q5_1: fp16 d, fp16 m, 32 high bits, 16 bytes of low nibbles; x = q * d + m.
void q5_1(const std::byte* block, float* y) {
    const float d = load_fp16(block);
    const float m = load_fp16(block + 2);
    std::uint32_t qh;
    std::memcpy(&qh, block + 4, sizeof qh);
    const std::uint8_t* qs = as_u8(block + 8);
    for (int j = 0; j < 16; ++j) {
        const int high0 = static_cast<int>(((qh >> j) << 4) & 0x10);
        const int high1 = static_cast<int>((qh >> (j + 12)) & 0x10);
        y[j] = static_cast<float>((qs[j] & 0x0f) | high0) * d + m;
        y[j + 16] = static_cast<float>((qs[j] >> 4) | high1) * d + m;
    }
}

// Q8_0: fp16 d, 32 int8; x = q * d.
void q8_0(const std::byte* block, float* y) {
    const float d = load_fp16(block);
    const auto* qs = reinterpret_cast<const std::int8_t*>(block + 2);
    for (int j = 0; j < 32; ++j) {
        y[j] = static_cast<float>(qs[j]) * d;
    }
}

// ---- 256-value super-blocks (k-quants) -------------------------------------------

// The 12 packed bytes of a Q4_K/Q5_K block hold eight 6-bit scales and eight
// 6-bit mins.
void scale_min_k4(int j, const std::uint8_t* q, std::uint8_t& scale, std::uint8_t& min) {
    if (j < 4) {
        scale = q[j] & 63;
        min = q[j + 4] & 63;
    } else {
        scale = static_cast<std::uint8_t>((q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4));
        min = static_cast<std::uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

// Q2_K: 16 bytes of 4-bit scale (low) and min (high) pairs, one per 16
// values; 64 bytes of 2-bit codes; fp16 d, fp16 dmin. x = d * scale * q -
// dmin * min. Each 128 values share 32 code bytes: values 32 j + l take bits
// 2j of byte l (the first 16 of them one scale, the next 16 the next).
void q2_k(const std::byte* block, float* y) {
    const std::uint8_t* scales = as_u8(block);
    const std::uint8_t* q = as_u8(block + 16);
    const float d = load_fp16(block + 80);
    const float dmin = load_fp16(block + 82);
    int group = 0;
    for (int half = 0; half < 2; ++half) {
        for (int shift = 0; shift < 8; shift += 2) {
            for (int part = 0; part < 2; ++part) {
                const std::uint8_t sc = scales[group++];
                const float scale = d * static_cast<float>(sc & 0x0f);
                const float min = dmin * static_cast<float>(sc >> 4);
                for (int l = 0; l < 16; ++l) {
                    *y++ = scale * static_cast<float>((q[16 * part + l] >> shift) & 3) - min;
                }
            }
        }
        q += 32;
    }
}

// Q3_K: 32 bytes of high bits, 64 of 2-bit codes, 12 of scales, fp16 d.
// x = d * (scale - 32) * (q - 4 when the value's high bit is clear). Codes are
// laid out as Q2_K's; value 32 j + l's high bit is bit j of byte l.
void q3_k(const std::byte* block, float* y) {
    const std::uint8_t* high = as_u8(block);
    const std::uint8_t* q = as_u8(block + 32);
    const std::uint8_t* scales = as_u8(block + 96);
    const float d = load_fp16(block + 108);
    int group = 0;
    int bit = 0;
    for (int half = 0; half < 2; ++half) {
        for (int shift = 0; shift < 8; shift += 2, ++bit) {
            for (int part = 0; part < 2; ++part) {
                const float scale = d * static_cast<float>(q3_k_scale(scales, group++) - 32);
                for (int l = 0; l < 16; ++l) {
                    const int at = 16 * part + l;
                    const int code =
                        ((q[at] >> shift) & 3) - (((high[at] >> bit) & 1) != 0 ? 0 : 4);
                    *y++ = scale * static_cast<float>(code);
                }
            }
        }
        q += 32;
    }
}

// Q4_K: fp16 d, fp16 dmin, 12 scale bytes, 128 bytes of nibbles.
void q4_k(const std::byte* block, float* y) {
    const float d = load_fp16(block);
    const float dmin = load_fp16(block + 2);
    const std::uint8_t* scales = as_u8(block + 4);
    const std::uint8_t* q = as_u8(block + 16);
    int is = 0;
    for (int j = 0; j < 256; j += 64) {
        std::uint8_t sc, m;
        scale_min_k4(is, scales, sc, m);
        const float d1 = d * sc, m1 = dmin * m;
        scale_min_k4(is + 1, scales, sc, m);
        const float d2 = d * sc, m2 = dmin * m;
        for (int l = 0; l < 32; ++l) {
            *y++ = d1 * static_cast<float>(q[l] & 0x0f) - m1;
        }
        for (int l = 0; l < 32; ++l) {
            *y++ = d2 * static_cast<float>(q[l] >> 4) - m2;
        }
        q += 32;
        is += 2;
    }
}

// Q5_K: fp16 d, fp16 dmin, 12 scale bytes, 32 bytes of high bits, 128 of nibbles.
void q5_k(const std::byte* block, float* y) {
    const float d = load_fp16(block);
    const float dmin = load_fp16(block + 2);
    const std::uint8_t* scales = as_u8(block + 4);
    const std::uint8_t* qh = as_u8(block + 16);
    const std::uint8_t* ql = as_u8(block + 48);
    int is = 0;
    std::uint8_t u1 = 1, u2 = 2;
    for (int j = 0; j < 256; j += 64) {
        std::uint8_t sc, m;
        scale_min_k4(is, scales, sc, m);
        const float d1 = d * sc, m1 = dmin * m;
        scale_min_k4(is + 1, scales, sc, m);
        const float d2 = d * sc, m2 = dmin * m;
        for (int l = 0; l < 32; ++l) {
            *y++ = d1 * static_cast<float>((ql[l] & 0x0f) + ((qh[l] & u1) ? 16 : 0)) - m1;
        }
        for (int l = 0; l < 32; ++l) {
            *y++ = d2 * static_cast<float>((ql[l] >> 4) + ((qh[l] & u2) ? 16 : 0)) - m2;
        }
        ql += 32;
        is += 2;
        u1 = static_cast<std::uint8_t>(u1 << 2);
        u2 = static_cast<std::uint8_t>(u2 << 2);
    }
}

// Q6_K: 128 bytes of low nibbles, 64 of 2-bit highs, 16 int8 scales, fp16 d.
void q6_k(const std::byte* block, float* y) {
    const std::uint8_t* ql = as_u8(block);
    const std::uint8_t* qh = as_u8(block + 128);
    const auto* sc = reinterpret_cast<const std::int8_t*>(block + 192);
    const float d = load_fp16(block + 208);
    for (int n = 0; n < 256; n += 128) {
        for (int l = 0; l < 32; ++l) {
            const int is = l / 16;
            const int q1 = ((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32;
            const int q2 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32;
            const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
            const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            y[l] = d * sc[is] * static_cast<float>(q1);
            y[l + 32] = d * sc[is + 2] * static_cast<float>(q2);
            y[l + 64] = d * sc[is + 4] * static_cast<float>(q3);
            y[l + 96] = d * sc[is + 6] * static_cast<float>(q4);
        }
        y += 128;
        ql += 64;
        qh += 32;
        sc += 8;
    }
}

using BlockDecoder = void (*)(const std::byte*, float*);

BlockDecoder decoder_for(TensorType type) {
    switch (type) {
    case TensorType::Q4_0:
        return q4_0;
    case TensorType::Q4_1:
        return q4_1;
    case TensorType::Q5_0:
        return q5_0;
    case TensorType::Q5_1:
        return q5_1;
    case TensorType::Q8_0:
        return q8_0;
    case TensorType::Q2_K:
        return q2_k;
    case TensorType::Q3_K:
        return q3_k;
    case TensorType::Q4_K:
        return q4_k;
    case TensorType::Q5_K:
        return q5_k;
    case TensorType::Q6_K:
        return q6_k;
    default:
        return nullptr;
    }
}

} // namespace

bool can_dequantize(TensorType type) {
    const TensorTypeTraits* traits = tensor_type_traits(static_cast<std::uint32_t>(type));
    return traits != nullptr && traits->dequantizable;
}

void dequantize_values(TensorType type, const std::byte* src, float* dst, std::int64_t count) {
    const TensorTypeTraits* traits = tensor_type_traits(static_cast<std::uint32_t>(type));
    if (traits == nullptr || !traits->dequantizable) {
        throw std::invalid_argument("cannot convert tensor type " +
                                    std::string(tensor_type_name(type)) + " to fp32");
    }
    if (count < 0 || count % traits->block_elements != 0) {
        throw std::invalid_argument(std::to_string(count) + " values is not a whole number of " +
                                    std::string(traits->name) + " blocks");
    }
    switch (type) {
    case TensorType::F32:
        std::memcpy(dst, src, static_cast<std::size_t>(count) * sizeof(float));
        return;
    case TensorType::F16:
        for (std::int64_t i = 0; i < count; ++i) {
            dst[i] = load_fp16(src + 2 * i);
        }
        return;
    case TensorType::BF16:
        for (std::int64_t i = 0; i < count; ++i) {
            dst[i] = bf16_to_fp32(load_u16(src + 2 * i));
        }
        return;
    default:
        break;
    }
    const BlockDecoder decode = decoder_for(type);
    const std::int64_t blocks = count / traits->block_elements;
    for (std::int64_t b = 0; b < blocks; ++b) {
        decode(src + b * traits->block_bytes, dst + b * traits->block_elements);
    }
}

} // namespace kvscope::gguf
