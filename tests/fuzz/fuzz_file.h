// A fuzz input as a file, for readers that take a path (GGUF maps its file,
// traces and recordings open theirs): one file per process in a directory of
// its own under the temp directory, rewritten for every input and removed
// when the process ends.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <unistd.h>

namespace kvscope::fuzz {

class FuzzFile {
public:
    // `name`: the file's name, extension included (readers may look at it).
    explicit FuzzFile(const std::string& name)
        : dir_(std::filesystem::temp_directory_path() /
               ("kvscope-fuzz-" + std::to_string(::getpid())))
        , path_(dir_ / name) {
        std::filesystem::create_directories(dir_);
    }
    ~FuzzFile() {
        std::error_code ignored;
        std::filesystem::remove_all(dir_, ignored);
    }
    FuzzFile(const FuzzFile&) = delete;
    FuzzFile& operator=(const FuzzFile&) = delete;

    // Replaces the file's content with `size` bytes at `data`.
    const std::filesystem::path& write(const std::uint8_t* data, std::size_t size) {
        std::ofstream out(path_, std::ios::binary | std::ios::trunc);
        out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
        if (!out) {
            throw std::runtime_error("cannot write the fuzz input " + path_.string());
        }
        return path_;
    }
    const std::filesystem::path& path() const { return path_; }
    const std::filesystem::path& dir() const { return dir_; }

private:
    std::filesystem::path dir_;
    std::filesystem::path path_;
};

} // namespace kvscope::fuzz
