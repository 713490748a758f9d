// One GGUF metadata value: any of the format's thirteen value types, arrays
// (of any type, nested) included. The stored type is kept so a file can be
// described exactly as written.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace kvscope::gguf {

enum class ValueType : std::uint32_t {
    UINT8 = 0,
    INT8 = 1,
    UINT16 = 2,
    INT16 = 3,
    UINT32 = 4,
    INT32 = 5,
    FLOAT32 = 6,
    BOOL = 7,
    STRING = 8,
    ARRAY = 9,
    UINT64 = 10,
    INT64 = 11,
    FLOAT64 = 12,
};

std::string_view value_type_name(ValueType type);

struct MetadataValue;

struct MetadataArray {
    ValueType element_type = ValueType::UINT8;
    std::vector<MetadataValue> items;
};

struct MetadataValue {
    ValueType type = ValueType::UINT8;
    // Unsigned types as uint64, signed as int64, floats as double.
    std::variant<std::uint64_t, std::int64_t, double, bool, std::string, MetadataArray> value;

    // Conversions that succeed only when the stored value fits exactly.
    std::optional<std::uint64_t> as_uint() const;
    std::optional<std::int64_t> as_int() const;
    std::optional<double> as_float() const; // any numeric type
    std::optional<bool> as_bool() const;
    const std::string* as_string() const;
    const MetadataArray* as_array() const;

    // Short human-readable form: arrays show their type, length and first items.
    std::string describe(std::size_t max_items = 8) const;
};

struct MetadataEntry {
    std::string key;
    MetadataValue value;
};

} // namespace kvscope::gguf
