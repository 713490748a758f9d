// A block hash as an attached engine publishes it. vLLM sends either the
// hash's raw bytes (sha256: 32 bytes; other hash functions fewer) or, with
// VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES and in older versions, an integer:
// the low 64 bits of those bytes, usually above 2^63 (msgpack uint64).
// SGLang and some adapters send signed 64-bit integers. The form is kept, so
// an integer and a byte string never compare equal (Python's don't either).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>

namespace kvscope::attach {

struct BlockHash {
    enum class Form : std::uint8_t { integer, bytes };
    static constexpr std::size_t kMaxBytes = 32;

    // Big-endian; an integer fills the first 8 (a signed one as its
    // two's-complement bits, as Python's int.to_bytes would print them).
    std::array<std::uint8_t, kMaxBytes> data{};
    std::uint8_t size = 0;
    Form form = Form::integer;

    static BlockHash from_uint(std::uint64_t value);
    static BlockHash from_int(std::int64_t value);
    // False for more than kMaxBytes bytes (the caller reports it).
    static bool from_bytes(std::span<const std::uint8_t> bytes, BlockHash& out);

    // The low 64 bits, what vLLM's integer form of the same hash holds: the
    // key the typed events' 64-bit hash column carries.
    std::uint64_t low64() const;
    // "0x" and 16 hex digits for an integer; plain hex for raw bytes.
    std::string hex() const;
    // The same appended to `out` (no string of its own: one per row read).
    void append_hex(std::string& out) const;

    bool operator==(const BlockHash& other) const;
};

} // namespace kvscope::attach

template <>
struct std::hash<kvscope::attach::BlockHash> {
    std::size_t operator()(const kvscope::attach::BlockHash& value) const noexcept;
};
