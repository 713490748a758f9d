#include "profiler/attach/block_hash.h"

#include <algorithm>

namespace kvscope::attach {

BlockHash BlockHash::from_uint(std::uint64_t value) {
    BlockHash hash;
    hash.form = Form::integer;
    hash.size = 8;
    for (int i = 7; i >= 0; --i) {
        hash.data[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(value & 0xFF);
        value >>= 8;
    }
    return hash;
}

BlockHash BlockHash::from_int(std::int64_t value) {
    return from_uint(static_cast<std::uint64_t>(value));
}

bool BlockHash::from_bytes(std::span<const std::uint8_t> bytes, BlockHash& out) {
    if (bytes.size() > kMaxBytes) {
        return false;
    }
    out = BlockHash{};
    out.form = Form::bytes;
    out.size = static_cast<std::uint8_t>(bytes.size());
    std::copy(bytes.begin(), bytes.end(), out.data.begin());
    return true;
}

std::uint64_t BlockHash::low64() const {
    std::uint64_t value = 0;
    const std::size_t first = size > 8 ? size - 8u : 0u;
    for (std::size_t i = first; i < size; ++i) {
        value = (value << 8) | data[i];
    }
    return value;
}

std::string BlockHash::hex() const {
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string text = form == Form::integer ? "0x" : "";
    for (std::size_t i = 0; i < size; ++i) {
        text += kDigits[data[i] >> 4];
        text += kDigits[data[i] & 0xF];
    }
    return text;
}

bool BlockHash::operator==(const BlockHash& other) const {
    return form == other.form && size == other.size &&
           std::equal(data.begin(), data.begin() + size, other.data.begin());
}

} // namespace kvscope::attach

std::size_t std::hash<kvscope::attach::BlockHash>::operator()(
    const kvscope::attach::BlockHash& value) const noexcept {
    // FNV-1a over form, size and bytes: cheap, and hashes are already random.
    std::uint64_t h = 1469598103934665603ull;
    const auto mix = [&](std::uint8_t byte) {
        h ^= byte;
        h *= 1099511628211ull;
    };
    mix(static_cast<std::uint8_t>(value.form));
    mix(value.size);
    for (std::size_t i = 0; i < value.size; ++i) {
        mix(value.data[i]);
    }
    return static_cast<std::size_t>(h);
}
