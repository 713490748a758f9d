// The ggml tensor types a GGUF file can hold: ids as the format defines them,
// block geometry, and which ones kvscope can turn into fp32.
#pragma once

#include <cstdint>
#include <string_view>

namespace kvscope::gguf {

enum class TensorType : std::uint32_t {
    F32 = 0,
    F16 = 1,
    Q4_0 = 2,
    Q4_1 = 3,
    Q5_0 = 6,
    Q5_1 = 7,
    Q8_0 = 8,
    Q8_1 = 9,
    Q2_K = 10,
    Q3_K = 11,
    Q4_K = 12,
    Q5_K = 13,
    Q6_K = 14,
    Q8_K = 15,
    IQ2_XXS = 16,
    IQ2_XS = 17,
    IQ3_XXS = 18,
    IQ1_S = 19,
    IQ4_NL = 20,
    IQ3_S = 21,
    IQ2_S = 22,
    IQ4_XS = 23,
    I8 = 24,
    I16 = 25,
    I32 = 26,
    I64 = 27,
    F64 = 28,
    IQ1_M = 29,
    BF16 = 30,
    TQ1_0 = 34,
    TQ2_0 = 35,
};

struct TensorTypeTraits {
    std::string_view name;
    std::uint32_t block_elements; // values per block (1 for plain types)
    std::uint32_t block_bytes;    // bytes per block
    bool dequantizable;           // kvscope can convert it to fp32
};

// nullptr when `id` is not a type kvscope knows the layout of.
const TensorTypeTraits* tensor_type_traits(std::uint32_t id);

std::string_view tensor_type_name(TensorType type);

} // namespace kvscope::gguf
