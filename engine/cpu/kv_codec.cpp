#include "engine/cpu/kv_codec.h"

#include "engine/util/half.h"

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
constexpr float kE4m3Max = 448.0f;

std::uint16_t load_u16(const std::byte* p) {
    std::uint16_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
}
void store_u16(std::byte* p, std::uint16_t v) {
    std::memcpy(p, &v, sizeof v);
}

const std::array<float, 256>& e4m3_table() {
    static const std::array<float, 256> table = [] {
        std::array<float, 256> t{};
        for (int code = 0; code < 256; ++code) {
            const int exponent = (code >> 3) & 0xf;
            const int mantissa = code & 7;
            float magnitude;
            if ((code & 0x7f) == 0x7f) {
                magnitude = std::nanf("");
            } else if (exponent == 0) {
                magnitude = std::ldexp(static_cast<float>(mantissa), -9);
            } else {
                magnitude = std::ldexp(1.0f + mantissa / 8.0f, exponent - 7);
            }
            t[static_cast<std::size_t>(code)] = (code & 0x80) ? -magnitude : magnitude;
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
    static const bool have = __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
    return have;
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
        dst[i] = fp16_to_fp32(load_u16(src + 2 * i));
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
        store_u16(dst + 2 * i, fp32_to_fp16(src[i]));
    }
}

// One 32-value group of q8_0: fp16 scale, then 32 int8 codes.
void encode_q8_0(const float* x, std::byte* out) {
    float amax = 0.0f;
    for (int i = 0; i < kGroup; ++i) {
        amax = std::max(amax, std::fabs(x[i]));
    }
    const std::uint16_t scale_half = fp32_to_fp16(amax / 127.0f);
    const float scale = fp16_to_fp32(scale_half);
    const float inverse = scale > 0.0f ? 1.0f / scale : 0.0f;
    store_u16(out, scale_half);
    for (int i = 0; i < kGroup; ++i) {
        const float q = std::clamp(std::nearbyint(x[i] * inverse), -127.0f, 127.0f);
        out[2 + i] = static_cast<std::byte>(static_cast<std::int8_t>(q));
    }
}

void decode_q8_0(const std::byte* in, float* x) {
    const float scale = fp16_to_fp32(load_u16(in));
    for (int i = 0; i < kGroup; ++i) {
        x[i] = scale * static_cast<float>(static_cast<std::int8_t>(in[2 + i]));
    }
}

// 4-bit codes of a 32-value group: byte j holds value j (low nibble) and
// value j + 16 (high nibble), as in GGUF's Q4 blocks.
void pack_nibbles(const std::uint8_t* codes, std::byte* out) {
    for (int j = 0; j < kGroup / 2; ++j) {
        out[j] = static_cast<std::byte>(codes[j] | (codes[j + kGroup / 2] << 4));
    }
}
void unpack_nibbles(const std::byte* in, std::uint8_t* codes) {
    for (int j = 0; j < kGroup / 2; ++j) {
        const auto byte = static_cast<std::uint8_t>(in[j]);
        codes[j] = byte & 0xf;
        codes[j + kGroup / 2] = byte >> 4;
    }
}

// q4_0: the value of largest magnitude maps to -8, so the scale keeps its sign
// and the full range [-8, 7] is used (GGUF's rounding).
void encode_q4_0(const float* x, std::byte* out) {
    float extreme = 0.0f;
    for (int i = 0; i < kGroup; ++i) {
        if (std::fabs(x[i]) > std::fabs(extreme)) {
            extreme = x[i];
        }
    }
    const std::uint16_t scale_half = fp32_to_fp16(extreme / -8.0f);
    const float scale = fp16_to_fp32(scale_half);
    const float inverse = scale != 0.0f ? 1.0f / scale : 0.0f;
    store_u16(out, scale_half);
    std::uint8_t codes[kGroup];
    for (int i = 0; i < kGroup; ++i) {
        codes[i] = static_cast<std::uint8_t>(
            std::clamp(static_cast<int>(std::nearbyint(x[i] * inverse)) + 8, 0, 15));
    }
    pack_nibbles(codes, out + 2);
}

void decode_q4_0(const std::byte* in, float* x) {
    const float scale = fp16_to_fp32(load_u16(in));
    std::uint8_t codes[kGroup];
    unpack_nibbles(in + 2, codes);
    for (int i = 0; i < kGroup; ++i) {
        x[i] = scale * static_cast<float>(codes[i] - 8);
    }
}

// Asymmetric groups (q4_1, KIVI values): fp16 scale and minimum, then codes
// of `bits` bits, x ~= min + code * scale.
struct ScaleMin {
    float scale;
    float min;
};

ScaleMin fit_scale_min(const float* x, int n, std::int64_t stride, int bits) {
    float lo = x[0];
    float hi = x[0];
    for (int i = 1; i < n; ++i) {
        lo = std::min(lo, x[i * stride]);
        hi = std::max(hi, x[i * stride]);
    }
    return {(hi - lo) / static_cast<float>((1 << bits) - 1), lo};
}

std::uint8_t asymmetric_code(float x, float scale, float min, int bits) {
    const float inverse = scale > 0.0f ? 1.0f / scale : 0.0f;
    return static_cast<std::uint8_t>(
        std::clamp(static_cast<int>(std::nearbyint((x - min) * inverse)), 0, (1 << bits) - 1));
}

void encode_q4_1(const float* x, std::byte* out) {
    const ScaleMin fit = fit_scale_min(x, kGroup, 1, 4);
    const std::uint16_t scale_half = fp32_to_fp16(fit.scale);
    const std::uint16_t min_half = fp32_to_fp16(fit.min);
    store_u16(out, scale_half);
    store_u16(out + 2, min_half);
    const float scale = fp16_to_fp32(scale_half);
    const float min = fp16_to_fp32(min_half);
    std::uint8_t codes[kGroup];
    for (int i = 0; i < kGroup; ++i) {
        codes[i] = asymmetric_code(x[i], scale, min, 4);
    }
    pack_nibbles(codes, out + 4);
}

void decode_q4_1(const std::byte* in, float* x) {
    const float scale = fp16_to_fp32(load_u16(in));
    const float min = fp16_to_fp32(load_u16(in + 2));
    std::uint8_t codes[kGroup];
    unpack_nibbles(in + 4, codes);
    for (int i = 0; i < kGroup; ++i) {
        x[i] = min + scale * static_cast<float>(codes[i]);
    }
}

// Codes of 2 or 4 bits, packed little end first within each byte.
void pack_bits(const std::uint8_t* codes, int n, int bits, std::byte* out) {
    const int per_byte = 8 / bits;
    for (int i = 0; i < n / per_byte; ++i) {
        unsigned byte = 0;
        for (int k = 0; k < per_byte; ++k) {
            byte |= static_cast<unsigned>(codes[i * per_byte + k]) << (k * bits);
        }
        out[i] = static_cast<std::byte>(byte);
    }
}
std::uint8_t unpack_bits(const std::byte* in, int index, int bits) {
    const int per_byte = 8 / bits;
    const auto byte = static_cast<unsigned>(in[index / per_byte]);
    return static_cast<std::uint8_t>((byte >> ((index % per_byte) * bits)) & ((1u << bits) - 1));
}

// KIVI values, one token: per 32-value group fp16 scale and minimum (all the
// groups' scales first), then the codes.
void encode_kivi_value_row(int bits, const float* x, int head_dim, std::byte* out) {
    const int groups = head_dim / kGroup;
    std::uint8_t codes[kGroup];
    std::byte* code_bytes = out + groups * 4;
    for (int g = 0; g < groups; ++g) {
        const float* group = x + g * kGroup;
        const ScaleMin fit = fit_scale_min(group, kGroup, 1, bits);
        const std::uint16_t scale_half = fp32_to_fp16(fit.scale);
        const std::uint16_t min_half = fp32_to_fp16(fit.min);
        store_u16(out + g * 4, scale_half);
        store_u16(out + g * 4 + 2, min_half);
        for (int i = 0; i < kGroup; ++i) {
            codes[i] =
                asymmetric_code(group[i], fp16_to_fp32(scale_half), fp16_to_fp32(min_half), bits);
        }
        pack_bits(codes, kGroup, bits, code_bytes + g * kGroup * bits / 8);
    }
}

void decode_kivi_value_row(int bits, const std::byte* in, int head_dim, float* x) {
    const int groups = head_dim / kGroup;
    const std::byte* code_bytes = in + groups * 4;
    for (int g = 0; g < groups; ++g) {
        const float scale = fp16_to_fp32(load_u16(in + g * 4));
        const float min = fp16_to_fp32(load_u16(in + g * 4 + 2));
        const std::byte* codes = code_bytes + g * kGroup * bits / 8;
        for (int i = 0; i < kGroup; ++i) {
            x[g * kGroup + i] = min + scale * static_cast<float>(unpack_bits(codes, i, bits));
        }
    }
}

} // namespace

std::uint8_t fp32_to_e4m3(float value) {
    const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
    const std::uint8_t sign = static_cast<std::uint8_t>((bits >> 24) & 0x80u);
    const float magnitude = std::fabs(value);
    if (std::isnan(value)) {
        return static_cast<std::uint8_t>(sign | 0x7f);
    }
    if (magnitude >= kE4m3Max) { // saturate (also infinities)
        return static_cast<std::uint8_t>(sign | 0x7e);
    }
    if (magnitude < 0.015625f) { // below 2^-6: subnormal steps of 2^-9
        // nearbyint rounds half to even; a result of 8 is the smallest normal.
        return static_cast<std::uint8_t>(sign |
                                         static_cast<int>(std::nearbyint(magnitude * 512.0f)));
    }
    const std::uint32_t abs_bits = bits & 0x7fffffffu;
    int exponent = static_cast<int>(abs_bits >> 23) - 127;
    std::uint32_t mantissa = (abs_bits & 0x7fffffu) >> 20;
    const std::uint32_t rest = abs_bits & 0xfffffu;
    if (rest > 0x80000u || (rest == 0x80000u && (mantissa & 1u))) {
        if (++mantissa == 8) {
            mantissa = 0;
            ++exponent;
        }
    }
    const int code = std::min(((exponent + 7) << 3) | static_cast<int>(mantissa), 0x7e);
    return static_cast<std::uint8_t>(sign | code);
}

float e4m3_to_fp32(std::uint8_t code) {
    return e4m3_table()[code];
}

void encode_kv_row(KvFormat format, const float* src, int head_dim, std::byte* row) {
    switch (format) {
    case KvFormat::f32:
        std::memcpy(row, src, static_cast<std::size_t>(head_dim) * sizeof(float));
        return;
    case KvFormat::f16:
        fp32_to_fp16_n(src, head_dim, row);
        return;
    case KvFormat::bf16:
        for (int i = 0; i < head_dim; ++i) {
            store_u16(row + 2 * i, fp32_to_bf16(src[i]));
        }
        return;
    case KvFormat::fp8_e4m3: {
        float amax = 0.0f;
        for (int i = 0; i < head_dim; ++i) {
            amax = std::max(amax, std::fabs(src[i]));
        }
        const float scale = amax > 0.0f ? amax / kE4m3Max : 1.0f;
        std::memcpy(row, &scale, sizeof scale);
        for (int i = 0; i < head_dim; ++i) {
            row[4 + i] = static_cast<std::byte>(fp32_to_e4m3(src[i] / scale));
        }
        return;
    }
    case KvFormat::q8_0:
        for (int g = 0; g < head_dim / kGroup; ++g) {
            encode_q8_0(src + g * kGroup, row + g * (2 + kGroup));
        }
        return;
    case KvFormat::q4_0:
        for (int g = 0; g < head_dim / kGroup; ++g) {
            encode_q4_0(src + g * kGroup, row + g * (2 + kGroup / 2));
        }
        return;
    case KvFormat::q4_1:
        for (int g = 0; g < head_dim / kGroup; ++g) {
            encode_q4_1(src + g * kGroup, row + g * (4 + kGroup / 2));
        }
        return;
    case KvFormat::kivi4:
    case KvFormat::kivi2:
        encode_kivi_value_row(kv::kivi_bits(format), src, head_dim, row);
        return;
    }
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
        const std::byte* row = rows + r * row_bytes;
        float* x = out + static_cast<std::int64_t>(r) * head_dim;
        switch (format) {
        case KvFormat::bf16:
            for (int i = 0; i < head_dim; ++i) {
                x[i] = bf16_to_fp32(load_u16(row + 2 * i));
            }
            break;
        case KvFormat::fp8_e4m3: {
            float scale;
            std::memcpy(&scale, row, sizeof scale);
            const std::array<float, 256>& table = e4m3_table();
            for (int i = 0; i < head_dim; ++i) {
                x[i] = scale * table[static_cast<std::uint8_t>(row[4 + i])];
            }
            break;
        }
        case KvFormat::q8_0:
            for (int g = 0; g < head_dim / kGroup; ++g) {
                decode_q8_0(row + g * (2 + kGroup), x + g * kGroup);
            }
            break;
        case KvFormat::q4_0:
            for (int g = 0; g < head_dim / kGroup; ++g) {
                decode_q4_0(row + g * (2 + kGroup / 2), x + g * kGroup);
            }
            break;
        case KvFormat::q4_1:
            for (int g = 0; g < head_dim / kGroup; ++g) {
                decode_q4_1(row + g * (4 + kGroup / 2), x + g * kGroup);
            }
            break;
        case KvFormat::kivi4:
        case KvFormat::kivi2:
            decode_kivi_value_row(kv::kivi_bits(format), row, head_dim, x);
            break;
        default:
            break;
        }
    }
}

void encode_kivi_keys(int bits, const float* tile, int block_size, int head_dim,
                      std::byte* head_block) {
    std::byte* codes_out = head_block + static_cast<std::int64_t>(head_dim) * 4;
    const std::int64_t row_code_bytes = static_cast<std::int64_t>(head_dim) * bits / 8;
    std::vector<std::uint8_t> codes(static_cast<std::size_t>(block_size) * head_dim);
    for (int c = 0; c < head_dim; ++c) {
        const ScaleMin fit = fit_scale_min(tile + c, block_size, head_dim, bits);
        const std::uint16_t scale_half = fp32_to_fp16(fit.scale);
        const std::uint16_t min_half = fp32_to_fp16(fit.min);
        store_u16(head_block + 2 * c, scale_half);
        store_u16(head_block + 2 * head_dim + 2 * c, min_half);
        for (int t = 0; t < block_size; ++t) {
            codes[static_cast<std::size_t>(t) * head_dim + c] =
                asymmetric_code(tile[static_cast<std::int64_t>(t) * head_dim + c],
                                fp16_to_fp32(scale_half), fp16_to_fp32(min_half), bits);
        }
    }
    for (int t = 0; t < block_size; ++t) {
        pack_bits(codes.data() + static_cast<std::size_t>(t) * head_dim, head_dim, bits,
                  codes_out + t * row_code_bytes);
    }
}

void decode_kivi_keys(int bits, const std::byte* head_block, int /*block_size*/, int head_dim,
                      int first, int count, float* out) {
    const std::byte* codes = head_block + static_cast<std::int64_t>(head_dim) * 4;
    const std::int64_t row_code_bytes = static_cast<std::int64_t>(head_dim) * bits / 8;
    thread_local std::vector<float> scale_min;
    scale_min.resize(2 * static_cast<std::size_t>(head_dim));
    fp16_to_fp32_n(head_block, 2 * static_cast<std::int64_t>(head_dim), scale_min.data());
    const float* scale = scale_min.data();
    const float* min = scale + head_dim;
    for (int r = 0; r < count; ++r) {
        const std::byte* row = codes + (first + r) * row_code_bytes;
        float* x = out + static_cast<std::int64_t>(r) * head_dim;
        for (int c = 0; c < head_dim; ++c) {
            x[c] = min[c] + scale[c] * static_cast<float>(unpack_bits(row, c, bits));
        }
    }
}

} // namespace kvscope::cpu
