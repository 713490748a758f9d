// A read-only memory map of a whole file. Model weights are read in place
// from the map: the page cache holds them once however many runs share them.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>

namespace kvscope {

class MappedFile {
public:
    // Throws std::runtime_error naming the file when it cannot be mapped.
    explicit MappedFile(const std::filesystem::path& path);
    ~MappedFile();
    MappedFile(MappedFile&& other) noexcept;
    MappedFile& operator=(MappedFile&& other) noexcept;
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    std::span<const std::byte> bytes() const { return {data_, size_}; }
    const std::filesystem::path& path() const { return path_; }

private:
    void release() noexcept;

    std::filesystem::path path_;
    const std::byte* data_ = nullptr;
    std::size_t size_ = 0;
};

} // namespace kvscope
