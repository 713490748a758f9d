// The packed sub-block scales of the K-quants, read the one way both the
// fp32 conversion (dequantize.cpp) and the CPU's repacking
// (cpu/packed_rows.cpp) read them.
#pragma once

#include <cstdint>

namespace kvscope::gguf {

// Q3_K's sixteen 6-bit scales, packed in 12 bytes: the low four bits of
// scale j in byte j (j < 8) or the high nibble of byte j - 8; its top two
// bits in byte 8 + j % 4, at bit 2 (j / 4).
inline int q3_k_scale(const std::uint8_t* packed, int j) {
    const int low = j < 8 ? packed[j] & 0x0f : packed[j - 8] >> 4;
    const int high = (packed[8 + j % 4] >> (2 * (j / 4))) & 3;
    return low | (high << 4);
}

} // namespace kvscope::gguf
