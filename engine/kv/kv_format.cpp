#include "engine/kv/kv_format.h"

#include "kernels/math/kv_codec_math.h"

#include <array>

namespace kvscope::kv {
namespace {

struct NamedFormat {
    KvFormat format;
    std::string_view name;
};

constexpr std::array kNames = {
    NamedFormat{KvFormat::f32, "f32"},     NamedFormat{KvFormat::f16, "f16"},
    NamedFormat{KvFormat::bf16, "bf16"},   NamedFormat{KvFormat::fp8_e4m3, "fp8"},
    NamedFormat{KvFormat::q8_0, "q8_0"},   NamedFormat{KvFormat::q4_0, "q4_0"},
    NamedFormat{KvFormat::q4_1, "q4_1"},   NamedFormat{KvFormat::kivi4, "kivi4"},
    NamedFormat{KvFormat::kivi2, "kivi2"},
};

} // namespace

std::string_view kv_format_name(KvFormat format) {
    for (const NamedFormat& named : kNames) {
        if (named.format == format) {
            return named.name;
        }
    }
    return "?";
}

std::optional<KvFormat> parse_kv_format(std::string_view name) {
    for (const NamedFormat& named : kNames) {
        if (named.name == name) {
            return named.format;
        }
    }
    if (name == "fp8_e4m3") { // vLLM's spelling
        return KvFormat::fp8_e4m3;
    }
    return std::nullopt;
}

const std::vector<KvFormat>& all_kv_formats() {
    static const std::vector<KvFormat> formats = [] {
        std::vector<KvFormat> list;
        for (const NamedFormat& named : kNames) {
            list.push_back(named.format);
        }
        return list;
    }();
    return formats;
}

std::string kv_format_names() {
    std::string names;
    for (const NamedFormat& named : kNames) {
        names += (names.empty() ? "" : ", ") + std::string(named.name);
    }
    return names;
}

// The layouts themselves live in kernels/math/kv_codec_math.h, shared with the
// CUDA kernels.
bool quantises_whole_blocks(KvFormat format) {
    return math::quantises_whole_blocks(format);
}

int kivi_bits(KvFormat format) {
    return math::kivi_bits(format);
}

std::string kv_format_problem(KvFormat format, int head_dim) {
    if (head_dim <= 0) {
        return "head dimension " + std::to_string(head_dim) + " is not positive";
    }
    const bool grouped = math::group_bytes(format) > 0 || quantises_whole_blocks(format);
    if (grouped && head_dim % kKvGroupSize != 0) {
        return "KV format " + std::string(kv_format_name(format)) + " needs a head dimension " +
               "that is a multiple of " + std::to_string(kKvGroupSize) + ", this model's is " +
               std::to_string(head_dim);
    }
    return {};
}

std::int64_t kv_row_bytes(KvFormat format, int head_dim, bool is_key) {
    return math::row_bytes(format, head_dim, is_key);
}

std::int64_t kv_head_block_bytes(KvFormat format, int block_size, int head_dim, bool is_key) {
    return math::head_block_bytes(format, block_size, head_dim, is_key);
}

std::string KvCacheFormat::describe() const {
    if (key == value) {
        return std::string(kv_format_name(key));
    }
    return "K " + std::string(kv_format_name(key)) + ", V " + std::string(kv_format_name(value));
}

double kv_bytes_per_token(const KvCacheFormat& format, int layers, int kv_heads, int head_dim,
                          int block_size) {
    const std::int64_t per_block = kv_head_block_bytes(format.key, block_size, head_dim, true) +
                                   kv_head_block_bytes(format.value, block_size, head_dim, false);
    return static_cast<double>(per_block) * layers * kv_heads / block_size;
}

} // namespace kvscope::kv
