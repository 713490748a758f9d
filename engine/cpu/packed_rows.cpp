#include "engine/cpu/packed_rows.h"

#include "engine/util/half.h"

#include <cstring>
#include <stdexcept>

namespace kvscope::cpu {

std::size_t packed_quant_bytes(gguf::TensorType type) {
    switch (type) {
    case gguf::TensorType::Q4_0:
    case gguf::TensorType::Q4_1:
        return 16;
    case gguf::TensorType::Q8_0:
        return 32;
    default:
        return 0;
    }
}

WeightMatrix pack_rows(const WeightMatrix& w, std::vector<std::byte>& storage) {
    const std::size_t quant = packed_quant_bytes(w.type);
    if (quant == 0 || w.packed || w.cols % 32 != 0) {
        throw std::invalid_argument("pack_rows: not a GGUF-layout Q4_0, Q4_1 or Q8_0 matrix");
    }
    const std::int64_t blocks = w.cols / 32;
    const std::size_t row_bytes = packed_row_bytes(w.type, w.cols);
    storage.assign(row_bytes * static_cast<std::size_t>(w.rows), std::byte{0});
    for (std::int64_t r = 0; r < w.rows; ++r) {
        const std::byte* src = w.data + static_cast<std::size_t>(r) * w.row_bytes;
        std::byte* scales = storage.data() + static_cast<std::size_t>(r) * row_bytes;
        std::byte* offsets = scales + static_cast<std::size_t>(blocks) * 2;
        std::byte* dst = offsets + static_cast<std::size_t>(blocks) * 2;
        for (std::int64_t b = 0; b < blocks; ++b) {
            std::uint16_t d, m = 0;
            std::memcpy(&d, src, 2);
            std::size_t header = 2;
            if (w.type == gguf::TensorType::Q4_1) {
                std::memcpy(&m, src + 2, 2);
                header = 4;
            } else if (w.type == gguf::TensorType::Q4_0) {
                m = fp32_to_fp16(-8.0f * fp16_to_fp32(d));
            }
            std::memcpy(dst + static_cast<std::size_t>(b) * quant, src + header, quant);
            std::memcpy(scales + 2 * b, &d, 2);
            std::memcpy(offsets + 2 * b, &m, 2);
            src += header + quant;
        }
    }
    WeightMatrix packed = w;
    packed.data = storage.data();
    packed.row_bytes = row_bytes;
    packed.packed = true;
    return packed;
}

void unpack_row(const WeightMatrix& w, std::int64_t row, float* out) {
    const std::size_t quant = packed_quant_bytes(w.type);
    const std::int64_t blocks = w.cols / 32;
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
