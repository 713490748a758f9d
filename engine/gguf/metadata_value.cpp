#include "engine/gguf/metadata_value.h"

#include <array>
#include <limits>
#include <sstream>

namespace kvscope::gguf {

std::string_view value_type_name(ValueType type) {
    static constexpr std::array<std::string_view, 13> names{
        "uint8", "int8",   "uint16", "int16",  "uint32", "int32",  "float32",
        "bool",  "string", "array",  "uint64", "int64",  "float64"};
    const auto index = static_cast<std::size_t>(type);
    return index < names.size() ? names[index] : std::string_view("unknown");
}

std::optional<std::uint64_t> MetadataValue::as_uint() const {
    if (const auto* u = std::get_if<std::uint64_t>(&value)) {
        return *u;
    }
    if (const auto* i = std::get_if<std::int64_t>(&value); i != nullptr && *i >= 0) {
        return static_cast<std::uint64_t>(*i);
    }
    return std::nullopt;
}

std::optional<std::int64_t> MetadataValue::as_int() const {
    if (const auto* i = std::get_if<std::int64_t>(&value)) {
        return *i;
    }
    if (const auto* u = std::get_if<std::uint64_t>(&value);
        u != nullptr &&
        *u <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        return static_cast<std::int64_t>(*u);
    }
    return std::nullopt;
}

std::optional<double> MetadataValue::as_float() const {
    if (const auto* d = std::get_if<double>(&value)) {
        return *d;
    }
    if (const auto* u = std::get_if<std::uint64_t>(&value)) {
        return static_cast<double>(*u);
    }
    if (const auto* i = std::get_if<std::int64_t>(&value)) {
        return static_cast<double>(*i);
    }
    return std::nullopt;
}

std::optional<bool> MetadataValue::as_bool() const {
    if (const auto* b = std::get_if<bool>(&value)) {
        return *b;
    }
    return std::nullopt;
}

const std::string* MetadataValue::as_string() const {
    return std::get_if<std::string>(&value);
}

const MetadataArray* MetadataValue::as_array() const {
    return std::get_if<MetadataArray>(&value);
}

std::string MetadataValue::describe(std::size_t max_items) const {
    std::ostringstream out;
    std::visit(
        [&](const auto& v) {
            using T = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<T, std::string>) {
                out << '"' << (v.size() > 80 ? v.substr(0, 77) + "..." : v) << '"';
            } else if constexpr (std::is_same_v<T, MetadataArray>) {
                out << "array<" << value_type_name(v.element_type) << ">[" << v.items.size() << "]";
                if (!v.items.empty() && max_items > 0) {
                    out << " [";
                    for (std::size_t i = 0; i < v.items.size() && i < max_items; ++i) {
                        out << (i > 0 ? ", " : "") << v.items[i].describe(0);
                    }
                    out << (v.items.size() > max_items ? ", ...]" : "]");
                }
            } else if constexpr (std::is_same_v<T, bool>) {
                out << (v ? "true" : "false");
            } else {
                out << v;
            }
        },
        value);
    return out.str();
}

} // namespace kvscope::gguf
