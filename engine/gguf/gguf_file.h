// A GGUF model file (versions 2 and 3), memory-mapped: metadata, tensor infos
// and tensor bytes read in place. Every read is bounds-checked; a truncated,
// corrupted or unsupported file raises GgufError naming the file, the byte
// offset and the problem.
#pragma once

#include "engine/gguf/metadata_value.h"
#include "engine/gguf/tensor_type.h"
#include "engine/util/mapped_file.h"

#include <cstdint>
#include <filesystem>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kvscope::gguf {

class GgufError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

struct TensorInfo {
    std::string name;
    std::vector<std::uint64_t> shape; // ggml order: shape[0] is the contiguous (row) length
    TensorType type = TensorType::F32;
    std::uint64_t file_offset = 0; // absolute, in bytes
    std::uint64_t byte_size = 0;
    std::uint64_t element_count = 0;

    std::uint64_t rows() const { return shape.empty() ? 0 : element_count / shape[0]; }
    std::string shape_string() const; // e.g. "[576, 49152]"
};

class GgufFile {
public:
    // Maps and parses `path`. Throws GgufError.
    static GgufFile open(const std::filesystem::path& path);

    const std::filesystem::path& path() const { return map_.path(); }
    std::uint32_t version() const { return version_; }
    std::uint64_t alignment() const { return alignment_; }
    std::uint64_t data_offset() const { return data_offset_; }
    std::uint64_t file_size() const { return map_.bytes().size(); }

    const std::vector<MetadataEntry>& metadata() const { return metadata_; }
    const MetadataValue* find(std::string_view key) const;

    // Typed look-ups that throw GgufError naming the key when it is missing
    // or of the wrong type.
    std::uint64_t require_uint(std::string_view key) const;
    double require_float(std::string_view key) const;
    const std::string& require_string(std::string_view key) const;
    const MetadataArray& require_array(std::string_view key) const;

    const std::vector<TensorInfo>& tensors() const { return tensors_; }
    const TensorInfo* find_tensor(std::string_view name) const;
    // Throws GgufError when the tensor is absent.
    const TensorInfo& require_tensor(std::string_view name) const;
    std::span<const std::byte> tensor_bytes(const TensorInfo& tensor) const;

    // "<file>: <problem>" as a GgufError, for callers reporting model errors.
    [[noreturn]] void fail(const std::string& problem) const;

private:
    explicit GgufFile(MappedFile map)
        : map_(std::move(map)) {}
    void parse();

    MappedFile map_;
    std::uint32_t version_ = 0;
    std::uint64_t alignment_ = 32;
    std::uint64_t data_offset_ = 0;
    std::vector<MetadataEntry> metadata_;
    std::unordered_map<std::string, std::size_t> metadata_index_;
    std::vector<TensorInfo> tensors_;
    std::unordered_map<std::string, std::size_t> tensor_index_;
};

} // namespace kvscope::gguf
