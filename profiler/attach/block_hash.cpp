#include "profiler/attach/block_hash.h"

#include <algorithm>
#include <bit>
#include <cstring>

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
    if (size >= 8) {
        // One load of the last 8 bytes, big-endian: every lookup of the
        // resident blocks hashes this (libstdc++ hashes nodes again as it
        // walks a bucket), so no loop over bytes.
        std::uint64_t word = 0;
        std::memcpy(&word, data.data() + size - 8, sizeof word);
        return std::endian::native == std::endian::little ? __builtin_bswap64(word) : word;
    }
    std::uint64_t value = 0;
    for (std::size_t i = 0; i < size; ++i) {
        value = (value << 8) | data[i];
    }
    return value;
}

std::string BlockHash::hex() const {
    std::string text;
    append_hex(text);
    return text;
}

void BlockHash::append_hex(std::string& out) const {
    static constexpr char kDigits[] = "0123456789abcdef";
    if (form == Form::integer) {
        out += "0x";
    }
    for (std::size_t i = 0; i < size; ++i) {
        out += kDigits[data[i] >> 4];
        out += kDigits[data[i] & 0xF];
    }
}

bool BlockHash::operator==(const BlockHash& other) const {
    return form == other.form && size == other.size &&
           std::memcmp(data.data(), other.data.data(), size) == 0;
}

} // namespace kvscope::attach

std::size_t std::hash<kvscope::attach::BlockHash>::operator()(
    const kvscope::attach::BlockHash& value) const noexcept {
    // Hashes are already random: the last 8 bytes (what vLLM's integer form
    // keeps) with form and size, the bytes before them folded in 8 at a time
    // (so a stream of byte hashes sharing their ends cannot make every
    // lookup collide), and one multiply and shift to mix.
    std::uint64_t h = value.low64() ^ (static_cast<std::uint64_t>(value.form) << 63) ^
                      (static_cast<std::uint64_t>(value.size) << 56);
    for (std::size_t i = 0; i + 8 < value.size; i += 8) {
        std::uint64_t word = 0;
        std::memcpy(&word, value.data.data() + i, sizeof word);
        h = (h ^ word) * 0x9E3779B97F4A7C15ull;
    }
    h *= 0x9E3779B97F4A7C15ull;
    h ^= h >> 32;
    return static_cast<std::size_t>(h);
}
