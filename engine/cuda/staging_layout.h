// Several host arrays packed into one buffer, so a step uploads them with a
// single copy: each array gets an aligned byte offset, which is the same in
// the pinned staging buffer and in its device copy. Host-only.
#pragma once

#include <cstddef>
#include <cstring>
#include <span>

namespace kvscope::cuda {

class StagingLayout {
public:
    // 16 bytes: every array starts where a vectorised load may read it.
    static constexpr std::size_t kAlignment = 16;

    // Reserves room for `count` values of T; returns their byte offset.
    template <class T>
    std::size_t add(std::size_t count) {
        const std::size_t offset = (bytes_ + kAlignment - 1) / kAlignment * kAlignment;
        bytes_ = offset + count * sizeof(T);
        return offset;
    }

    std::size_t bytes() const { return bytes_; }

    // `values` copied to `offset` of `base` (the staging buffer).
    template <class T>
    static void write(std::byte* base, std::size_t offset, std::span<const T> values) {
        if (!values.empty()) {
            std::memcpy(base + offset, values.data(), values.size_bytes());
        }
    }

    // The array at `offset` of `base` (the device copy), typed.
    template <class T>
    static T* at(std::byte* base, std::size_t offset) {
        return reinterpret_cast<T*>(base + offset);
    }

private:
    std::size_t bytes_ = 0;
};

} // namespace kvscope::cuda
