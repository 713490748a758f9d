// Eight values of a quantised KV row at a time, as the GPU's vector attention
// reads them (kernels/vector_attention.cu: a lane takes values [8c, 8c + 8) of
// a row, its "chunk" c). The results are decode_row_element's, bit for bit
// (tst_kv_formats checks every chunk against it), computed with fewer and
// cheaper instructions:
//  - a chunk lies inside one 32-value group, so its scale is read once;
//  - the codes come in as two 32-bit words, not byte by byte;
//  - a code becomes a float through the mantissa (math::byte_minus) instead
//    of an integer-to-float conversion, which NVIDIA GPUs run at a quarter of
//    their float rate or less (a code was one conversion each before).
#pragma once

#include "kernels/math/half.h"
#include "kernels/math/host_device.h"
#include "kernels/math/kv_codec_math.h"

#include <cstdint>

namespace kvscope::math {

// Values in a chunk: a lane's 16 bytes of a 16-bit row.
inline constexpr int kChunkValues = 8;

// Whether decode_row_chunk has a decoder for the format.
KVSCOPE_HD constexpr bool has_chunk_decoder(KvFormat format) {
    return format == KvFormat::q8_0 || format == KvFormat::q4_0 || format == KvFormat::fp8_e4m3;
}

// A little-endian 16-bit value at an even address (one load on the device).
KVSCOPE_HD inline std::uint32_t load_even_u16(const std::uint8_t* p) {
#if defined(__CUDA_ARCH__)
    return *reinterpret_cast<const std::uint16_t*>(p);
#else
    return static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8);
#endif
}

// Bytes [0, 8) at p, an even address, as two little-endian words.
KVSCOPE_HD inline void load_8_bytes(const std::uint8_t* p, std::uint32_t (&words)[2]) {
    words[0] = load_even_u16(p) | (load_even_u16(p + 2) << 16);
    words[1] = load_even_u16(p + 4) | (load_even_u16(p + 6) << 16);
}

// Values [8 chunk, 8 chunk + 8) of a row in `Format` (has_chunk_decoder).
// `row` is 4-byte aligned (the ring's rows are; fp8's fp32 scale needs it),
// so every offset read below is even: q8_0's groups are 34 bytes and q4_0's
// 18, each code run starting 2 past its group's start plus a multiple of 8.
template <KvFormat Format>
KVSCOPE_HD inline void decode_row_chunk(const std::uint8_t* row, int chunk,
                                        float (&out)[kChunkValues]) {
    static_assert(has_chunk_decoder(Format), "no chunk decoder for this format");
    constexpr int kChunksPerGroup = kGroup / kChunkValues;
    std::uint32_t words[2];
    if constexpr (Format == KvFormat::q8_0) {
        // scale * int8: the sign bit flipped makes the code code + 128.
        const std::uint8_t* group = row + (chunk / kChunksPerGroup) * group_bytes(Format);
        const float scale = fp16_to_fp32(static_cast<std::uint16_t>(load_even_u16(group)));
        load_8_bytes(group + 2 + (chunk % kChunksPerGroup) * kChunkValues, words);
        for (int w = 0; w < 2; ++w) {
            const std::uint32_t biased = words[w] ^ 0x80808080u;
            for (int b = 0; b < 4; ++b) {
                out[4 * w + b] = scale * byte_minus((biased >> (8 * b)) & 0xffu, kTwo23 + 128.0f);
            }
        }
    } else if constexpr (Format == KvFormat::q4_0) {
        // Byte j of a group holds value j (low nibble) and j + 16 (high): a
        // chunk's 8 values are the low or the high nibbles of 8 bytes.
        const int in_group = chunk % kChunksPerGroup;
        const std::uint8_t* group = row + (chunk / kChunksPerGroup) * group_bytes(Format);
        const float scale = fp16_to_fp32(static_cast<std::uint16_t>(load_even_u16(group)));
        load_8_bytes(group + 2 + (in_group % 2) * kChunkValues, words);
        const int shift = (in_group / 2) * 4;
        for (int w = 0; w < 2; ++w) {
            const std::uint32_t codes = (words[w] >> shift) & 0x0f0f0f0fu;
            for (int b = 0; b < 4; ++b) {
                out[4 * w + b] = scale * byte_minus((codes >> (8 * b)) & 0xffu, kTwo23 + 8.0f);
            }
        }
    } else { // fp8 e4m3: the row's fp32 scale, then a byte a value
        const float scale = load_f32(row);
        load_8_bytes(row + 4 + chunk * kChunkValues, words);
        for (int w = 0; w < 2; ++w) {
            for (int b = 0; b < 4; ++b) {
                out[4 * w + b] =
                    scale * e4m3_to_fp32(static_cast<std::uint8_t>((words[w] >> (8 * b)) & 0xffu));
            }
        }
    }
}

} // namespace kvscope::math
