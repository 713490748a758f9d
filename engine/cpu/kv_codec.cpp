#include "engine/cpu/kv_codec.h"

#include "engine/util/cpu_features.h"
#include "kernels/math/half.h"
#include "kernels/math/kv_codec_math.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace kvscope::cpu {
namespace {

using kv::KvFormat;
constexpr int kGroup = kv::kKvGroupSize;

// The shared math works on unsigned bytes, as device code does.
const std::uint8_t* bytes(const std::byte* p) {
    return reinterpret_cast<const std::uint8_t*>(p);
}
std::uint8_t* bytes(std::byte* p) {
    return reinterpret_cast<std::uint8_t*>(p);
}

// The shared decoder's values, looked up: the CPU decodes whole rows, where a
// table read is cheaper than the bit arithmetic per value.
const std::array<float, 256>& e4m3_table() {
    static const std::array<float, 256> table = [] {
        std::array<float, 256> t{};
        for (int code = 0; code < 256; ++code) {
            t[static_cast<std::size_t>(code)] = math::e4m3_to_fp32(static_cast<std::uint8_t>(code));
        }
        return t;
    }();
    return table;
}

// fp16 rows -> fp32, eight at a time with F16C where the CPU has it.
#if defined(__x86_64__)
__attribute__((target("avx,f16c"))) void fp16_to_fp32_f16c(const std::uint16_t* src, std::int64_t n,
                                                           float* dst) {
    std::int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
    }
    for (; i < n; ++i) {
        dst[i] = fp16_to_fp32(src[i]);
    }
}
__attribute__((target("avx,f16c"))) void fp32_to_fp16_f16c(const float* src, std::int64_t n,
                                                           std::uint16_t* dst) {
    std::int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
    }
    for (; i < n; ++i) {
        dst[i] = fp32_to_fp16(src[i]);
    }
}
bool have_f16c() {
    return cpu_features().f16c;
}
#endif

void fp16_to_fp32_n(const std::byte* src, std::int64_t n, float* dst) {
#if defined(__x86_64__)
    if (have_f16c()) {
        fp16_to_fp32_f16c(reinterpret_cast<const std::uint16_t*>(src), n, dst);
        return;
    }
#endif
    for (std::int64_t i = 0; i < n; ++i) {
        dst[i] = fp16_to_fp32(math::load_u16(bytes(src) + 2 * i));
    }
}

void fp32_to_fp16_n(const float* src, std::int64_t n, std::byte* dst) {
#if defined(__x86_64__)
    if (have_f16c()) {
        fp32_to_fp16_f16c(src, n, reinterpret_cast<std::uint16_t*>(dst));
        return;
    }
#endif
    for (std::int64_t i = 0; i < n; ++i) {
        math::store_u16(bytes(dst) + 2 * i, fp32_to_fp16(src[i]));
    }
}

} // namespace

std::uint8_t fp32_to_e4m3(float value) {
    return math::fp32_to_e4m3(value);
}

float e4m3_to_fp32(std::uint8_t code) {
    return e4m3_table()[code];
}

void encode_kv_row(KvFormat format, const float* src, int head_dim, std::byte* row) {
    if (format == KvFormat::f16) {
        fp32_to_fp16_n(src, head_dim, row); // F16C rounds as math::fp32_to_fp16 does
        return;
    }
    math::encode_row(format, src, head_dim, bytes(row));
}

void decode_kv_rows(KvFormat format, const std::byte* rows, int count, int head_dim, float* out) {
    const std::int64_t row_bytes = kv::kv_row_bytes(format, head_dim, false);
    if (format == KvFormat::f32) {
        std::memcpy(out, rows, static_cast<std::size_t>(count) * head_dim * sizeof(float));
        return;
    }
    if (format == KvFormat::f16) { // rows are contiguous: one run
        fp16_to_fp32_n(rows, static_cast<std::int64_t>(count) * head_dim, out);
        return;
    }
    for (int r = 0; r < count; ++r) {
        const std::uint8_t* row = bytes(rows + r * row_bytes);
        float* x = out + static_cast<std::int64_t>(r) * head_dim;
        switch (format) {
        case KvFormat::bf16:
            for (int i = 0; i < head_dim; ++i) {
                x[i] = bf16_to_fp32(math::load_u16(row + 2 * i));
            }
            break;
        case KvFormat::fp8_e4m3: {
            const float scale = math::load_f32(row);
            const std::array<float, 256>& table = e4m3_table();
            for (int i = 0; i < head_dim; ++i) {
                x[i] = scale * table[row[4 + i]];
            }
            break;
        }
        default: // the grouped formats: head_dim is a multiple of the group
            for (int g = 0; g < head_dim / kGroup; ++g) {
                math::decode_row_group(format, row, head_dim, g, x + g * kGroup);
            }
            break;
        }
    }
}

void encode_kivi_keys(int bits, const float* tile, int block_size, int head_dim,
                      std::byte* head_block) {
    std::uint8_t* out = bytes(head_block);
    for (int c = 0; c < head_dim; ++c) {
        math::encode_kivi_key_channel(bits, tile, block_size, head_dim, c, out);
    }
    const int row_code_bytes = head_dim * bits / 8;
    for (int t = 0; t < block_size; ++t) {
        for (int b = 0; b < row_code_bytes; ++b) {
            math::encode_kivi_key_byte(bits, tile, head_dim, t, b, out);
        }
    }
}

void decode_kivi_keys(int bits, const std::byte* head_block, int /*block_size*/, int head_dim,
                      int first, int count, float* out) {
    const std::uint8_t* codes = bytes(head_block) + static_cast<std::int64_t>(head_dim) * 4;
    const std::int64_t row_code_bytes = static_cast<std::int64_t>(head_dim) * bits / 8;
    // The channels' scales and minimums once per call, then
    // math::decode_kivi_key_element's arithmetic per value.
    thread_local std::vector<float> scale_min;
    scale_min.resize(2 * static_cast<std::size_t>(head_dim));
    fp16_to_fp32_n(head_block, 2 * static_cast<std::int64_t>(head_dim), scale_min.data());
    const float* scale = scale_min.data();
    const float* min = scale + head_dim;
    for (int r = 0; r < count; ++r) {
        const std::uint8_t* row = codes + (first + r) * row_code_bytes;
        float* x = out + static_cast<std::int64_t>(r) * head_dim;
        for (int c = 0; c < head_dim; ++c) {
            x[c] = min[c] + scale[c] * static_cast<float>(math::unpack_code(row, c, bits));
        }
    }
}

} // namespace kvscope::cpu
