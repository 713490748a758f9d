#include "engine/gguf/gguf_file.h"

#include <cstring>
#include <limits>
#include <sstream>

namespace kvscope::gguf {
namespace {

constexpr std::uint32_t kMagic = 0x46554747; // "GGUF" read as a little-endian uint32
constexpr std::uint64_t kMaxDims = 4;        // GGML_MAX_DIMS
constexpr int kMaxArrayNesting = 4;
// Array values in all of a file's metadata. Each takes some fifty bytes in
// memory however few it took in the file, so a file claiming billions of
// one-byte values would take hundreds of gigabytes; real models hold about a
// million (Gemma 3's 262k-token vocabulary three times over, plus merges).
constexpr std::uint64_t kMaxMetadataValues = std::uint64_t{1} << 23;

std::string hex(std::uint64_t value) {
    std::ostringstream out;
    out << "0x" << std::hex << value;
    return out.str();
}

// Reads little-endian values from the mapped bytes, checking every bound.
class Cursor {
public:
    Cursor(std::span<const std::byte> bytes, const std::filesystem::path& path)
        : bytes_(bytes)
        , path_(path) {}

    std::uint64_t offset() const { return offset_; }
    std::uint64_t remaining() const { return bytes_.size() - offset_; }

    // Counts `count` more metadata array values against the file's budget.
    void take_values(std::uint64_t at, std::uint64_t count, const std::string& key) {
        if (count > kMaxMetadataValues - values_) {
            fail_at(at, "metadata '" + key + "': more than " + std::to_string(kMaxMetadataValues) +
                            " array values in the file's metadata (real models hold about a "
                            "million); refusing rather than taking the memory");
        }
        values_ += count;
    }

    [[noreturn]] void fail_at(std::uint64_t offset, const std::string& problem) const {
        throw GgufError(path_.string() + ": offset " + std::to_string(offset) + " (" + hex(offset) +
                        "): " + problem);
    }

    template <typename T>
    T read(const char* what) {
        if (remaining() < sizeof(T)) {
            fail_at(offset_, std::string("file ends while reading ") + what + " (needs " +
                                 std::to_string(sizeof(T)) + " bytes, " +
                                 std::to_string(remaining()) + " left)");
        }
        T value;
        std::memcpy(&value, bytes_.data() + offset_, sizeof(T));
        offset_ += sizeof(T);
        return value;
    }

    std::string read_string(const char* what) {
        const std::uint64_t start = offset_;
        const auto length = read<std::uint64_t>(what);
        if (length > remaining()) {
            fail_at(start, std::string(what) + " claims " + std::to_string(length) +
                               " bytes but only " + std::to_string(remaining()) + " remain");
        }
        std::string text(reinterpret_cast<const char*>(bytes_.data() + offset_),
                         static_cast<std::size_t>(length));
        offset_ += length;
        return text;
    }

private:
    std::span<const std::byte> bytes_;
    const std::filesystem::path& path_;
    std::uint64_t offset_ = 0;
    std::uint64_t values_ = 0; // metadata array values so far
};

std::uint64_t min_encoded_size(ValueType type) {
    switch (type) {
    case ValueType::UINT8:
    case ValueType::INT8:
    case ValueType::BOOL:
        return 1;
    case ValueType::UINT16:
    case ValueType::INT16:
        return 2;
    case ValueType::UINT32:
    case ValueType::INT32:
    case ValueType::FLOAT32:
        return 4;
    case ValueType::UINT64:
    case ValueType::INT64:
    case ValueType::FLOAT64:
    case ValueType::STRING: // its length prefix
        return 8;
    case ValueType::ARRAY: // element type + count
        return 12;
    }
    return 1;
}

MetadataValue read_value(Cursor& cursor, ValueType type, const std::string& key, int depth);

MetadataValue read_array(Cursor& cursor, const std::string& key, int depth) {
    const std::uint64_t start = cursor.offset();
    const auto raw_type = cursor.read<std::uint32_t>("array element type");
    if (raw_type > static_cast<std::uint32_t>(ValueType::FLOAT64)) {
        cursor.fail_at(start, "metadata '" + key + "': unknown array element type " +
                                  std::to_string(raw_type));
    }
    const auto element_type = static_cast<ValueType>(raw_type);
    if (element_type == ValueType::ARRAY && depth >= kMaxArrayNesting) {
        cursor.fail_at(start, "metadata '" + key + "': arrays nested deeper than " +
                                  std::to_string(kMaxArrayNesting));
    }
    const auto count = cursor.read<std::uint64_t>("array length");
    // Refuse counts the rest of the file cannot hold before allocating.
    if (count > cursor.remaining() / min_encoded_size(element_type)) {
        cursor.fail_at(start, "metadata '" + key + "': array of " + std::to_string(count) + " " +
                                  std::string(value_type_name(element_type)) +
                                  " values cannot fit in the " +
                                  std::to_string(cursor.remaining()) + " bytes left");
    }
    cursor.take_values(start, count, key);
    MetadataArray array;
    array.element_type = element_type;
    array.items.reserve(static_cast<std::size_t>(count));
    for (std::uint64_t i = 0; i < count; ++i) {
        array.items.push_back(read_value(cursor, element_type, key, depth + 1));
    }
    return MetadataValue{ValueType::ARRAY, std::move(array)};
}

MetadataValue read_value(Cursor& cursor, ValueType type, const std::string& key, int depth) {
    switch (type) {
    case ValueType::UINT8:
        return {type, std::uint64_t{cursor.read<std::uint8_t>("uint8 value")}};
    case ValueType::INT8:
        return {type, std::int64_t{cursor.read<std::int8_t>("int8 value")}};
    case ValueType::UINT16:
        return {type, std::uint64_t{cursor.read<std::uint16_t>("uint16 value")}};
    case ValueType::INT16:
        return {type, std::int64_t{cursor.read<std::int16_t>("int16 value")}};
    case ValueType::UINT32:
        return {type, std::uint64_t{cursor.read<std::uint32_t>("uint32 value")}};
    case ValueType::INT32:
        return {type, std::int64_t{cursor.read<std::int32_t>("int32 value")}};
    case ValueType::FLOAT32:
        return {type, double{cursor.read<float>("float32 value")}};
    case ValueType::BOOL: {
        const std::uint64_t at = cursor.offset();
        const auto raw = cursor.read<std::uint8_t>("bool value");
        if (raw > 1) {
            cursor.fail_at(at, "metadata '" + key + "': bool value " + std::to_string(raw) +
                                   " is neither 0 nor 1");
        }
        return {type, raw == 1};
    }
    case ValueType::STRING:
        return {type, cursor.read_string("string value")};
    case ValueType::ARRAY:
        return read_array(cursor, key, depth);
    case ValueType::UINT64:
        return {type, cursor.read<std::uint64_t>("uint64 value")};
    case ValueType::INT64:
        return {type, cursor.read<std::int64_t>("int64 value")};
    case ValueType::FLOAT64:
        return {type, cursor.read<double>("float64 value")};
    }
    cursor.fail_at(cursor.offset(), "metadata '" + key + "': unknown value type");
}

} // namespace

std::string TensorInfo::shape_string() const {
    std::string text = "[";
    for (std::size_t i = 0; i < shape.size(); ++i) {
        text += (i > 0 ? ", " : "") + std::to_string(shape[i]);
    }
    return text + "]";
}

GgufFile GgufFile::open(const std::filesystem::path& path) {
    try {
        GgufFile file{MappedFile(path)};
        file.parse();
        return file;
    } catch (const GgufError&) {
        throw;
    } catch (const std::exception& error) {
        throw GgufError(error.what());
    }
}

void GgufFile::parse() {
    const std::span<const std::byte> bytes = map_.bytes();
    Cursor cursor(bytes, map_.path());

    if (bytes.size() < 4) {
        cursor.fail_at(0,
                       "too short to be a GGUF file (" + std::to_string(bytes.size()) + " bytes)");
    }
    const auto magic = cursor.read<std::uint32_t>("magic");
    if (magic != kMagic) {
        cursor.fail_at(0, "not a GGUF file (magic " + hex(magic) + ", expected \"GGUF\")");
    }
    const std::uint64_t version_at = cursor.offset();
    version_ = cursor.read<std::uint32_t>("version");
    if (version_ == 1) {
        cursor.fail_at(version_at, "GGUF version 1 is not supported (only 2 and 3); convert the "
                                   "file with a current llama.cpp");
    }
    if (version_ != 2 && version_ != 3) {
        const bool swapped = (version_ & 0xffffu) == 0 && version_ != 0;
        cursor.fail_at(version_at,
                       "unsupported GGUF version " + std::to_string(version_) +
                           (swapped ? " (looks like a big-endian file, which kvscope cannot read)"
                                    : " (kvscope reads versions 2 and 3)"));
    }
    const auto tensor_count = cursor.read<std::uint64_t>("tensor count");
    const auto kv_count = cursor.read<std::uint64_t>("metadata count");
    // Each entry takes at least a key length, type and one byte of value.
    if (kv_count > cursor.remaining() / 13) {
        cursor.fail_at(16,
                       "metadata count " + std::to_string(kv_count) + " cannot fit in the file");
    }
    if (tensor_count > cursor.remaining() / 24) {
        cursor.fail_at(8,
                       "tensor count " + std::to_string(tensor_count) + " cannot fit in the file");
    }

    metadata_.reserve(static_cast<std::size_t>(kv_count));
    for (std::uint64_t i = 0; i < kv_count; ++i) {
        const std::uint64_t entry_at = cursor.offset();
        std::string key = cursor.read_string("metadata key");
        const std::uint64_t type_at = cursor.offset();
        const auto raw_type = cursor.read<std::uint32_t>("metadata value type");
        if (raw_type > static_cast<std::uint32_t>(ValueType::FLOAT64)) {
            cursor.fail_at(type_at, "metadata '" + key + "': unknown value type " +
                                        std::to_string(raw_type));
        }
        MetadataValue value = read_value(cursor, static_cast<ValueType>(raw_type), key, 0);
        if (!metadata_index_.emplace(key, metadata_.size()).second) {
            cursor.fail_at(entry_at, "metadata key '" + key + "' appears twice");
        }
        metadata_.push_back({std::move(key), std::move(value)});
    }

    if (const MetadataValue* align = find("general.alignment")) {
        const auto value = align->as_uint();
        if (!value || *value == 0 || (*value & (*value - 1)) != 0 || *value > (1u << 20)) {
            fail("general.alignment must be a power of two, not " + align->describe());
        }
        alignment_ = *value;
    }

    tensors_.reserve(static_cast<std::size_t>(tensor_count));
    std::vector<std::uint64_t> relative_offsets;
    std::vector<std::uint64_t> info_offsets;
    for (std::uint64_t i = 0; i < tensor_count; ++i) {
        const std::uint64_t info_at = cursor.offset();
        TensorInfo tensor;
        tensor.name = cursor.read_string("tensor name");
        const auto dims = cursor.read<std::uint32_t>("tensor dimension count");
        if (dims == 0 || dims > kMaxDims) {
            cursor.fail_at(info_at, "tensor '" + tensor.name + "' has " + std::to_string(dims) +
                                        " dimensions (1 to 4 allowed)");
        }
        tensor.element_count = 1;
        for (std::uint32_t d = 0; d < dims; ++d) {
            const auto extent = cursor.read<std::uint64_t>("tensor dimension");
            if (extent == 0 || extent > (std::uint64_t{1} << 40) ||
                tensor.element_count > (std::uint64_t{1} << 40) / extent) {
                cursor.fail_at(info_at, "tensor '" + tensor.name + "' has an invalid shape (dim " +
                                            std::to_string(d) + " = " + std::to_string(extent) +
                                            ")");
            }
            tensor.shape.push_back(extent);
            tensor.element_count *= extent;
        }
        const std::uint64_t type_at = cursor.offset();
        const auto raw_type = cursor.read<std::uint32_t>("tensor type");
        const TensorTypeTraits* traits = tensor_type_traits(raw_type);
        if (traits == nullptr) {
            cursor.fail_at(type_at, "tensor '" + tensor.name + "' has unknown type id " +
                                        std::to_string(raw_type));
        }
        tensor.type = static_cast<TensorType>(raw_type);
        if (tensor.shape[0] % traits->block_elements != 0) {
            cursor.fail_at(info_at, "tensor '" + tensor.name + "' of type " +
                                        std::string(traits->name) + " has rows of " +
                                        std::to_string(tensor.shape[0]) +
                                        " values, not a multiple of its block size " +
                                        std::to_string(traits->block_elements));
        }
        tensor.byte_size = tensor.element_count / traits->block_elements * traits->block_bytes;
        relative_offsets.push_back(cursor.read<std::uint64_t>("tensor data offset"));
        info_offsets.push_back(info_at);
        if (!tensor_index_.emplace(tensor.name, tensors_.size()).second) {
            cursor.fail_at(info_at, "tensor '" + tensor.name + "' appears twice");
        }
        tensors_.push_back(std::move(tensor));
    }

    data_offset_ = (cursor.offset() + alignment_ - 1) / alignment_ * alignment_;
    if (tensor_count > 0 && data_offset_ > bytes.size()) {
        cursor.fail_at(cursor.offset(), "file ends before its tensor data section");
    }
    for (std::size_t i = 0; i < tensors_.size(); ++i) {
        TensorInfo& tensor = tensors_[i];
        const std::uint64_t relative = relative_offsets[i];
        if (relative % alignment_ != 0) {
            cursor.fail_at(info_offsets[i], "tensor '" + tensor.name + "' data offset " +
                                                std::to_string(relative) + " is not aligned to " +
                                                std::to_string(alignment_));
        }
        const std::uint64_t available = bytes.size() - data_offset_;
        if (relative > available || tensor.byte_size > available - relative) {
            cursor.fail_at(info_offsets[i],
                           "tensor '" + tensor.name + "' (" + tensor.shape_string() + ", " +
                               std::string(tensor_type_name(tensor.type)) + ", " +
                               std::to_string(tensor.byte_size) + " bytes at data offset " +
                               std::to_string(relative) + ") runs past the end of the file (" +
                               std::to_string(bytes.size()) +
                               " bytes): the file is truncated or corrupted");
        }
        tensor.file_offset = data_offset_ + relative;
    }
}

const MetadataValue* GgufFile::find(std::string_view key) const {
    const auto it = metadata_index_.find(std::string(key));
    return it == metadata_index_.end() ? nullptr : &metadata_[it->second].value;
}

void GgufFile::fail(const std::string& problem) const {
    throw GgufError(path().string() + ": " + problem);
}

namespace {
const MetadataValue& require(const GgufFile& file, std::string_view key) {
    const MetadataValue* value = file.find(key);
    if (value == nullptr) {
        file.fail("missing metadata key '" + std::string(key) + "'");
    }
    return *value;
}
} // namespace

std::uint64_t GgufFile::require_uint(std::string_view key) const {
    const MetadataValue& value = require(*this, key);
    if (const auto u = value.as_uint()) {
        return *u;
    }
    fail("metadata '" + std::string(key) + "' should be a non-negative integer, not " +
         std::string(value_type_name(value.type)) + " " + value.describe());
}

double GgufFile::require_float(std::string_view key) const {
    const MetadataValue& value = require(*this, key);
    if (const auto f = value.as_float()) {
        return *f;
    }
    fail("metadata '" + std::string(key) + "' should be a number, not " +
         std::string(value_type_name(value.type)));
}

const std::string& GgufFile::require_string(std::string_view key) const {
    const MetadataValue& value = require(*this, key);
    if (const std::string* s = value.as_string()) {
        return *s;
    }
    fail("metadata '" + std::string(key) + "' should be a string, not " +
         std::string(value_type_name(value.type)));
}

const MetadataArray& GgufFile::require_array(std::string_view key) const {
    const MetadataValue& value = require(*this, key);
    if (const MetadataArray* a = value.as_array()) {
        return *a;
    }
    fail("metadata '" + std::string(key) + "' should be an array, not " +
         std::string(value_type_name(value.type)));
}

const TensorInfo* GgufFile::find_tensor(std::string_view name) const {
    const auto it = tensor_index_.find(std::string(name));
    return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const TensorInfo& GgufFile::require_tensor(std::string_view name) const {
    const TensorInfo* tensor = find_tensor(name);
    if (tensor == nullptr) {
        fail("missing tensor '" + std::string(name) + "'");
    }
    return *tensor;
}

std::span<const std::byte> GgufFile::tensor_bytes(const TensorInfo& tensor) const {
    return map_.bytes().subspan(tensor.file_offset, tensor.byte_size);
}

} // namespace kvscope::gguf
