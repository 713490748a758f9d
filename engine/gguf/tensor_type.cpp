#include "engine/gguf/tensor_type.h"

#include <array>

namespace kvscope::gguf {
namespace {

struct Entry {
    std::uint32_t id;
    TensorTypeTraits traits;
};

// Block geometry as ggml lays the types out. The IQ/TQ types are listed so
// their tensors can be sized and named in errors, even though kvscope cannot
// dequantize them.
constexpr std::array kTypes{
    Entry{0, {"F32", 1, 4, true}},          Entry{1, {"F16", 1, 2, true}},
    Entry{2, {"Q4_0", 32, 18, true}},       Entry{3, {"Q4_1", 32, 20, true}},
    Entry{6, {"Q5_0", 32, 22, true}},       Entry{7, {"Q5_1", 32, 24, true}},
    Entry{8, {"Q8_0", 32, 34, true}},       Entry{9, {"Q8_1", 32, 36, false}},
    Entry{10, {"Q2_K", 256, 84, true}},     Entry{11, {"Q3_K", 256, 110, true}},
    Entry{12, {"Q4_K", 256, 144, true}},    Entry{13, {"Q5_K", 256, 176, true}},
    Entry{14, {"Q6_K", 256, 210, true}},    Entry{15, {"Q8_K", 256, 292, false}},
    Entry{16, {"IQ2_XXS", 256, 66, false}}, Entry{17, {"IQ2_XS", 256, 74, false}},
    Entry{18, {"IQ3_XXS", 256, 98, false}}, Entry{19, {"IQ1_S", 256, 50, false}},
    Entry{20, {"IQ4_NL", 32, 18, false}},   Entry{21, {"IQ3_S", 256, 110, false}},
    Entry{22, {"IQ2_S", 256, 82, false}},   Entry{23, {"IQ4_XS", 256, 136, false}},
    Entry{24, {"I8", 1, 1, false}},         Entry{25, {"I16", 1, 2, false}},
    Entry{26, {"I32", 1, 4, false}},        Entry{27, {"I64", 1, 8, false}},
    Entry{28, {"F64", 1, 8, false}},        Entry{29, {"IQ1_M", 256, 56, false}},
    Entry{30, {"BF16", 1, 2, true}},        Entry{34, {"TQ1_0", 256, 54, false}},
    Entry{35, {"TQ2_0", 256, 66, false}},
};

} // namespace

const TensorTypeTraits* tensor_type_traits(std::uint32_t id) {
    for (const Entry& entry : kTypes) {
        if (entry.id == id) {
            return &entry.traits;
        }
    }
    return nullptr;
}

std::string_view tensor_type_name(TensorType type) {
    const TensorTypeTraits* traits = tensor_type_traits(static_cast<std::uint32_t>(type));
    return traits != nullptr ? traits->name : std::string_view("unknown");
}

} // namespace kvscope::gguf
