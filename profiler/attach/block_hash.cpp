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
    const std::size_t prefix = form == Form::integer ? 2 : 0;
    std::string text(prefix + 2u * size, '0');
    if (prefix != 0) {
        text[1] = 'x';
    }
    for (std::size_t i = 0; i < size; ++i) {
        text[prefix + 2 * i] = kDigits[data[i] >> 4];
        text[prefix + 2 * i + 1] = kDigits[data[i] & 0xF];
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
    // Hashes are already random: fold the bytes 8 at a time with form and
    // size, and mix once (one row per block looks them up several times).
    std::uint64_t h = (static_cast<std::uint64_t>(value.form) << 8) | value.size;
    for (std::size_t i = 0; i < value.size; i += 8) {
        std::uint64_t word = 0;
        for (std::size_t j = i; j < i + 8 && j < value.size; ++j) {
            word = (word << 8) | value.data[j];
        }
        h = (h ^ word) * 0x9E3779B97F4A7C15ull;
        h ^= h >> 29;
    }
    return static_cast<std::size_t>(h);
}
