#include "engine/cpu/packed_rows.h"

#include "engine/gguf/k_quant_scales.h"
#include "kernels/math/half.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace kvscope::cpu {

std::optional<gguf::TensorType> packed_layout(gguf::TensorType type) {
    switch (type) {
    case gguf::TensorType::Q4_0:
    case gguf::TensorType::Q4_1:
    case gguf::TensorType::Q4_K:
        return gguf::TensorType::Q4_1;
    case gguf::TensorType::Q8_0:
    case gguf::TensorType::Q5_0:
    case gguf::TensorType::Q5_1:
        return gguf::TensorType::Q8_0;
    case gguf::TensorType::Q3_K:
    case gguf::TensorType::Q5_K:
    case gguf::TensorType::Q6_K:
        return gguf::TensorType::Q8_K;
    default:
        return std::nullopt;
    }
}

std::size_t packed_quant_bytes(gguf::TensorType layout) {
    switch (layout) {
    case gguf::TensorType::Q4_1:
        return 16;
    case gguf::TensorType::Q8_0:
    case gguf::TensorType::Q8_K:
        return 32;
    default:
        return 0;
    }
}

namespace {

// One 32-value block in the packed form, before it is spread over the row.
struct PackedBlock {
    std::uint16_t d = 0;
    std::uint16_t m = 0;
    std::uint8_t q[32] = {};
};

std::uint16_t load_u16(const std::byte* p) {
    std::uint16_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

const std::uint8_t* as_u8(const std::byte* p) {
    return reinterpret_cast<const std::uint8_t*>(p);
}

// Nibble codes c[0..31] as the Q4_1 layout holds them: byte j has value j
// low and value j + 16 high.
void put_nibbles(const std::uint8_t* codes, PackedBlock& out) {
    for (int j = 0; j < 16; ++j) {
        out.q[j] = static_cast<std::uint8_t>((codes[j] & 0x0f) | (codes[j + 16] << 4));
    }
}

// Q5_0 and Q5_1: 32 high bits after the header, then 16 bytes of low nibbles
// (value j low, j + 16 high); code = nibble | high bit << 4.
void five_bit_codes(const std::byte* qh_bytes, const std::byte* low, int bias, PackedBlock& out) {
    std::uint32_t qh;
    std::memcpy(&qh, qh_bytes, sizeof qh);
    const std::uint8_t* qs = as_u8(low);
    for (int j = 0; j < 16; ++j) {
        const int high0 = static_cast<int>((qh >> j) & 1u) << 4;
        const int high1 = static_cast<int>((qh >> (j + 16)) & 1u) << 4;
        out.q[j] =
            static_cast<std::uint8_t>(static_cast<std::int8_t>(((qs[j] & 0x0f) | high0) - bias));
        out.q[j + 16] =
            static_cast<std::uint8_t>(static_cast<std::int8_t>(((qs[j] >> 4) | high1) - bias));
    }
}

// The eight 6-bit scales and mins of a Q4_K block (12 packed bytes).
void k4_scale_min(int j, const std::uint8_t* q, int& scale, int& min) {
    if (j < 4) {
        scale = q[j] & 63;
        min = q[j + 4] & 63;
    } else {
        scale = (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4);
        min = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

// The 32-value blocks of one GGUF block of `type` (32 or 256 values).
void pack_block(gguf::TensorType type, const std::byte* src, PackedBlock* out) {
    switch (type) {
    case gguf::TensorType::Q4_0: {
        const std::uint16_t d = load_u16(src);
        out[0].d = d;
        out[0].m = fp32_to_fp16(-8.0f * fp16_to_fp32(d));
        std::memcpy(out[0].q, src + 2, 16);
        return;
    }
    case gguf::TensorType::Q4_1:
        out[0].d = load_u16(src);
        out[0].m = load_u16(src + 2);
        std::memcpy(out[0].q, src + 4, 16);
        return;
    case gguf::TensorType::Q8_0:
        out[0].d = load_u16(src);
        std::memcpy(out[0].q, src + 2, 32);
        return;
    case gguf::TensorType::Q5_0:
        out[0].d = load_u16(src);
        five_bit_codes(src + 2, src + 6, 16, out[0]);
        return;
    case gguf::TensorType::Q5_1:
        out[0].d = load_u16(src);
        out[0].m = load_u16(src + 2);
        five_bit_codes(src + 4, src + 8, 0, out[0]);
        return;
    case gguf::TensorType::Q4_K: {
        // d, dmin, 12 scale bytes, then 128 bytes: each 64 values share 32
        // bytes, the first 32 values low nibbles, the next 32 high.
        const float d = fp16_to_fp32(load_u16(src));
        const float dmin = fp16_to_fp32(load_u16(src + 2));
        const std::uint8_t* scales = as_u8(src + 4);
        const std::uint8_t* q = as_u8(src + 16);
        for (int sub = 0; sub < 8; ++sub) {
            int scale = 0;
            int min = 0;
            k4_scale_min(sub, scales, scale, min);
            out[sub].d = fp32_to_fp16(d * static_cast<float>(scale));
            out[sub].m = fp32_to_fp16(-dmin * static_cast<float>(min));
            const std::uint8_t* bytes = q + (sub / 2) * 32;
            std::uint8_t codes[32];
            for (int l = 0; l < 32; ++l) {
                codes[l] = sub % 2 == 0 ? bytes[l] & 0x0f : bytes[l] >> 4;
            }
            put_nibbles(codes, out[sub]);
        }
        return;
    }
    default: // packed_layout() takes no other type
        throw std::logic_error("pack_block: no packed form for this type");
    }
}

// One 32-value block of the split layout.
struct SplitBlock {
    float scale[2] = {}; // values 0-15, 16-31
    float offset = 0.0f;
    std::int8_t q[32] = {};
};

// A Q3_K, Q5_K or Q6_K block (256 values) as eight split blocks, each value
// scale * q + offset computing exactly what ggml's dequantisation does.
void split_block(gguf::TensorType type, const std::byte* src, SplitBlock* out) {
    if (type == gguf::TensorType::Q3_K) {
        // 32 bytes of high bits, 64 of 2-bit codes, 12 of scales (one per 16
        // values, less 32), then d. Group g (values 16 g ..) of half h takes
        // bits 2j of code byte 16 p + l and high bit 4 h + j, g = 8 h + 2 j + p.
        const std::uint8_t* high = as_u8(src);
        const std::uint8_t* q = as_u8(src + 32);
        const std::uint8_t* scales = as_u8(src + 96);
        const float d = fp16_to_fp32(load_u16(src + 108));
        for (int group = 0; group < 16; ++group) {
            const int half = group / 8;
            const int shift = 2 * ((group % 8) / 2);
            const int part = group % 2;
            const int bit = 4 * half + shift / 2;
            for (int l = 0; l < 16; ++l) {
                const int at = 16 * part + l;
                const int code =
                    ((q[32 * half + at] >> shift) & 3) - (((high[at] >> bit) & 1) != 0 ? 0 : 4);
                const int value = 16 * group + l;
                out[value / 32].q[value % 32] = static_cast<std::int8_t>(code);
            }
            out[group / 2].scale[group % 2] =
                d * static_cast<float>(gguf::q3_k_scale(scales, group) - 32);
        }
        for (int block = 0; block < 8; ++block) {
            out[block].offset = 0.0f;
        }
        return;
    }
    if (type == gguf::TensorType::Q6_K) {
        // 128 bytes of low nibbles, 64 of high bit pairs, 16 int8 scales (one
        // per 16 values), then d. Each half of 128 values: value l + 32 k of
        // it takes nibble k / 2 of ql[l + 32 (k % 2)] and bits 2k of qh[l].
        const std::uint8_t* ql = as_u8(src);
        const std::uint8_t* qh = as_u8(src + 128);
        const auto* sc = reinterpret_cast<const std::int8_t*>(src + 192);
        const float d = fp16_to_fp32(load_u16(src + 208));
        for (int half = 0; half < 2; ++half) {
            for (int l = 0; l < 32; ++l) {
                const int codes[4] = {
                    (ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4),
                    (ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4),
                    (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4),
                    (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4),
                };
                for (int k = 0; k < 4; ++k) {
                    const int value = half * 128 + 32 * k + l; // in the 256
                    out[value / 32].q[value % 32] = static_cast<std::int8_t>(codes[k] - 32);
                }
            }
            ql += 64;
            qh += 32;
        }
        for (int group = 0; group < 16; ++group) {
            out[group / 2].scale[group % 2] = d * static_cast<float>(sc[group]);
        }
        return;
    }
    // Q5_K: d, dmin, 12 scale bytes, 32 bytes of high bits, 128 of nibbles;
    // each 64 values share 32 nibble bytes (low nibbles first) and take high
    // bits 2j and 2j + 1 of qh.
    const float d = fp16_to_fp32(load_u16(src));
    const float dmin = fp16_to_fp32(load_u16(src + 2));
    const std::uint8_t* scales = as_u8(src + 4);
    const std::uint8_t* qh = as_u8(src + 16);
    const std::uint8_t* ql = as_u8(src + 48);
    for (int sub = 0; sub < 8; ++sub) {
        int scale = 0;
        int min = 0;
        k4_scale_min(sub, scales, scale, min);
        out[sub].scale[0] = out[sub].scale[1] = d * static_cast<float>(scale);
        out[sub].offset = -(dmin * static_cast<float>(min));
        const std::uint8_t* bytes = ql + (sub / 2) * 32;
        for (int l = 0; l < 32; ++l) {
            const int low = sub % 2 == 0 ? bytes[l] & 0x0f : bytes[l] >> 4;
            const int high = (qh[l] >> sub) & 1;
            out[sub].q[l] = static_cast<std::int8_t>(low | (high << 4));
        }
    }
}

WeightMatrix pack_split_rows(const WeightMatrix& w, std::vector<std::byte>& storage) {
    const std::int64_t blocks = w.cols / 32;
    const std::size_t row_bytes = packed_row_bytes(gguf::TensorType::Q8_K, w.cols);
    storage.assign(row_bytes * static_cast<std::size_t>(w.rows), std::byte{0});
    SplitBlock unpacked[8];
    const std::uint32_t source_block_bytes =
        gguf::tensor_type_traits(static_cast<std::uint32_t>(w.type))->block_bytes;
    for (std::int64_t r = 0; r < w.rows; ++r) {
        const std::byte* src = w.data + static_cast<std::size_t>(r) * w.row_bytes;
        std::byte* scales = storage.data() + static_cast<std::size_t>(r) * row_bytes;
        std::byte* offsets = scales + static_cast<std::size_t>(blocks) * 8;
        std::byte* dst = offsets + static_cast<std::size_t>(blocks) * 4;
        for (std::int64_t b = 0; b < blocks; b += 8) {
            split_block(w.type, src, unpacked);
            src += source_block_bytes;
            for (std::int64_t k = 0; k < 8; ++k) {
                const SplitBlock& block = unpacked[k];
                std::memcpy(scales + 8 * (b + k), block.scale, 8);
                std::memcpy(offsets + 4 * (b + k), &block.offset, 4);
                std::memcpy(dst + 32 * static_cast<std::size_t>(b + k), block.q, 32);
            }
        }
    }
    WeightMatrix packed = w;
    packed.type = gguf::TensorType::Q8_K;
    packed.data = storage.data();
    packed.row_bytes = row_bytes;
    packed.packed = true;
    return packed;
}

} // namespace

WeightMatrix pack_rows(const WeightMatrix& w, std::vector<std::byte>& storage) {
    const std::optional<gguf::TensorType> layout = packed_layout(w.type);
    const gguf::TensorTypeTraits* traits =
        gguf::tensor_type_traits(static_cast<std::uint32_t>(w.type));
    if (!layout || w.packed || traits == nullptr || w.cols % traits->block_elements != 0) {
        throw std::invalid_argument("pack_rows: not a GGUF-layout matrix of a packed type (Q4_0, "
                                    "Q4_1, Q3_K, Q4_K, Q5_0, Q5_1, Q5_K, Q6_K, Q8_0)");
    }
    if (*layout == gguf::TensorType::Q8_K) {
        return pack_split_rows(w, storage);
    }
    const std::size_t quant = packed_quant_bytes(*layout);
    const std::int64_t blocks = w.cols / 32;
    const std::int64_t per_source = traits->block_elements / 32;
    const std::size_t row_bytes = packed_row_bytes(*layout, w.cols);
    storage.assign(row_bytes * static_cast<std::size_t>(w.rows), std::byte{0});
    std::vector<PackedBlock> unpacked(static_cast<std::size_t>(per_source));
    for (std::int64_t r = 0; r < w.rows; ++r) {
        const std::byte* src = w.data + static_cast<std::size_t>(r) * w.row_bytes;
        std::byte* scales = storage.data() + static_cast<std::size_t>(r) * row_bytes;
        std::byte* offsets = scales + static_cast<std::size_t>(blocks) * 2;
        std::byte* dst = offsets + static_cast<std::size_t>(blocks) * 2;
        for (std::int64_t b = 0; b < blocks; b += per_source) {
            std::fill(unpacked.begin(), unpacked.end(), PackedBlock{});
            pack_block(w.type, src, unpacked.data());
            src += traits->block_bytes;
            for (std::int64_t k = 0; k < per_source; ++k) {
                const PackedBlock& block = unpacked[static_cast<std::size_t>(k)];
                std::memcpy(scales + 2 * (b + k), &block.d, 2);
                std::memcpy(offsets + 2 * (b + k), &block.m, 2);
                std::memcpy(dst + static_cast<std::size_t>(b + k) * quant, block.q, quant);
            }
        }
    }
    WeightMatrix packed = w;
    packed.type = *layout;
    packed.data = storage.data();
    packed.row_bytes = row_bytes;
    packed.packed = true;
    return packed;
}

void unpack_row(const WeightMatrix& w, std::int64_t row, float* out) {
    const std::size_t quant = packed_quant_bytes(w.type);
    const std::int64_t blocks = w.cols / 32;
    if (w.type == gguf::TensorType::Q8_K) {
        const std::byte* scales = w.data + static_cast<std::size_t>(row) * w.row_bytes;
        const std::byte* offsets = scales + static_cast<std::size_t>(blocks) * 8;
        const std::byte* base = offsets + static_cast<std::size_t>(blocks) * 4;
        for (std::int64_t b = 0; b < blocks; ++b) {
            float scale[2];
            float offset;
            std::memcpy(scale, scales + 8 * b, 8);
            std::memcpy(&offset, offsets + 4 * b, 4);
            const auto* q = reinterpret_cast<const std::int8_t*>(base + 32 * b);
            for (int j = 0; j < 32; ++j) {
                out[b * 32 + j] = static_cast<float>(q[j]) * scale[j / 16] + offset;
            }
        }
        return;
    }
    const std::byte* scales = w.data + static_cast<std::size_t>(row) * w.row_bytes;
    const std::byte* offsets = scales + static_cast<std::size_t>(blocks) * 2;
    const std::byte* base = offsets + static_cast<std::size_t>(blocks) * 2;
    for (std::int64_t b = 0; b < blocks; ++b) {
        std::uint16_t d_bits, m_bits;
        std::memcpy(&d_bits, scales + 2 * b, 2);
        std::memcpy(&m_bits, offsets + 2 * b, 2);
        const float d = fp16_to_fp32(d_bits);
        const float m = fp16_to_fp32(m_bits);
        const auto* q =
            reinterpret_cast<const std::uint8_t*>(base + static_cast<std::size_t>(b) * quant);
        float* y = out + b * 32;
        if (quant == 32) {
            for (int j = 0; j < 32; ++j) {
                y[j] = static_cast<float>(static_cast<std::int8_t>(q[j])) * d + m;
            }
        } else {
            for (int j = 0; j < 16; ++j) {
                y[j] = static_cast<float>(q[j] & 0x0f) * d + m;
                y[j + 16] = static_cast<float>(q[j] >> 4) * d + m;
            }
        }
    }
}

} // namespace kvscope::cpu
