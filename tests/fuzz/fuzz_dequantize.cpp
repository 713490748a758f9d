// Every dequantiser on arbitrary block bytes (a GGUF's tensor data is
// whatever the file says): the first byte picks the tensor type, the rest is
// as many whole blocks as fit. Any bytes must convert without reading past
// the blocks or tripping undefined behaviour (shifts, signed overflow).
#include "engine/gguf/dequantize.h"
#include "engine/gguf/tensor_type.h"

#include <vector>

using namespace kvscope;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) {
        return 0;
    }
    static const std::vector<std::uint32_t> types = [] {
        std::vector<std::uint32_t> ids;
        for (std::uint32_t id = 0; id < 64; ++id) {
            if (const auto* traits = gguf::tensor_type_traits(id);
                traits && traits->dequantizable) {
                ids.push_back(id);
            }
        }
        return ids;
    }();
    const std::uint32_t id = types[data[0] % types.size()];
    const gguf::TensorTypeTraits& traits = *gguf::tensor_type_traits(id);
    const std::size_t blocks = (size - 1) / traits.block_bytes;
    if (blocks == 0) {
        return 0;
    }
    // A copy of exactly the blocks, so reading a byte past them is caught.
    const std::vector<std::byte> bytes(reinterpret_cast<const std::byte*>(data) + 1,
                                       reinterpret_cast<const std::byte*>(data) + 1 +
                                           blocks * traits.block_bytes);
    std::vector<float> values(blocks * traits.block_elements);
    gguf::dequantize_values(static_cast<gguf::TensorType>(id), bytes.data(), values.data(),
                            static_cast<std::int64_t>(values.size()));
    return 0;
}
