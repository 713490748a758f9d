#include "engine/kv/offload_tier.h"

#include <absl/hash/hash.h>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <stdexcept>
#include <system_error>
#include <unistd.h>

namespace kvscope::kv {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

} // namespace

std::string_view tier_medium_name(TierMedium medium) {
    return medium == TierMedium::file ? "file" : "memory";
}

OffloadTier::OffloadTier(const OffloadTierConfig& config)
    : config_(config) {
    if (config.capacity_blocks <= 0 || config.block_bytes <= 0) {
        throw std::invalid_argument("an offload tier needs room for at least one block");
    }
    for (std::int64_t slot = config.capacity_blocks - 1; slot >= 0; --slot) {
        free_slots_.push_back(slot);
    }
    if (config.medium == TierMedium::memory) {
        // Uninitialised: the pages are committed as blocks are written.
        memory_.reset(
            new std::byte[static_cast<std::size_t>(config.capacity_blocks * config.block_bytes)]);
        return;
    }
    if (config_.file.empty()) {
        // Unique per process and moment, so runs side by side never meet.
        config_.file =
            std::filesystem::temp_directory_path() /
            ("kvscope-offload-" + std::to_string(::getpid()) + "-" +
             std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()) + ".bin");
    }
    // A new file only: never truncate (then delete) one that exists, or
    // follow a link planted where the file would go.
    fd_ = ::open(config_.file.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd_ < 0) {
        const int error = errno;
        throw std::system_error(
            error, std::generic_category(),
            error == EEXIST ? config_.file.string() + " already exists; the offload tier writes "
                                                      "a new file of its own"
                            : "cannot create the offload tier's file " + config_.file.string());
    }
}

OffloadTier::~OffloadTier() {
    if (fd_ >= 0) {
        ::close(fd_);
        std::error_code ignored;
        std::filesystem::remove(config_.file, ignored); // a cache: nothing to keep
    }
}

void OffloadTier::write_slot(std::int64_t slot, std::span<const std::byte> bytes) {
    const std::int64_t offset = slot * config_.block_bytes;
    if (fd_ < 0) {
        std::memcpy(memory_.get() + offset, bytes.data(), bytes.size());
        return;
    }
    std::size_t done = 0;
    while (done < bytes.size()) {
        const ssize_t n = ::pwrite(fd_, bytes.data() + done, bytes.size() - done,
                                   static_cast<off_t>(offset + static_cast<std::int64_t>(done)));
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            throw std::system_error(n < 0 ? errno : ENOSPC, std::generic_category(),
                                    "cannot write a KV block to " + config_.file.string());
        }
        done += static_cast<std::size_t>(n);
    }
}

// Detects a file changed behind the tier's back, not an attack: a fast
// hash of the bytes, kept in memory where the file cannot change it.
std::size_t OffloadTier::checksum(std::span<const std::byte> bytes) {
    return absl::Hash<std::string_view>{}(
        std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

void OffloadTier::read_slot(std::int64_t slot, std::span<std::byte> bytes) {
    const std::int64_t offset = slot * config_.block_bytes;
    if (fd_ < 0) {
        std::memcpy(bytes.data(), memory_.get() + offset, bytes.size());
        return;
    }
    std::size_t done = 0;
    while (done < bytes.size()) {
        const ssize_t n = ::pread(fd_, bytes.data() + done, bytes.size() - done,
                                  static_cast<off_t>(offset + static_cast<std::int64_t>(done)));
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            throw std::system_error(
                n < 0 ? errno : EIO, std::generic_category(),
                "cannot read a KV block from " + config_.file.string() +
                    (n == 0 ? " (the file is shorter than what was written)" : ""));
        }
        done += static_cast<std::size_t>(n);
    }
}

std::optional<BlockHash> OffloadTier::put(BlockHash hash, std::span<const std::byte> bytes) {
    if (static_cast<std::int64_t>(bytes.size()) != config_.block_bytes) {
        throw std::invalid_argument("an offloaded block must be the tier's block size");
    }
    erase(hash);
    // A free slot, else the least recently used block's; that block is
    // evicted even when the write fails (its slot may hold part of the new
    // bytes), and the caller hears of it either way through `evicted`.
    const bool reuse = free_slots_.empty();
    const std::int64_t slot = reuse ? lru_.back().slot : free_slots_.back();
    std::optional<BlockHash> evicted;
    if (reuse) {
        evicted = lru_.back().hash;
        slot_of_.erase(lru_.back().hash);
        lru_.pop_back();
        ++stats_.evictions;
    } else {
        free_slots_.pop_back();
    }
    const auto start = std::chrono::steady_clock::now();
    try {
        write_slot(slot, bytes);
    } catch (const std::system_error& e) {
        stats_.write_seconds += seconds_since(start);
        free_slots_.push_back(slot); // the tier holds no part of `hash`
        throw WriteFailed(e, evicted);
    }
    stats_.write_seconds += seconds_since(start);
    lru_.push_front({hash, slot, fd_ >= 0 ? checksum(bytes) : 0});
    slot_of_[hash] = lru_.begin();
    ++stats_.writes;
    stats_.bytes_written += config_.block_bytes;
    return evicted;
}

bool OffloadTier::get(BlockHash hash, std::span<std::byte> bytes) {
    const auto it = slot_of_.find(hash);
    if (it == slot_of_.end()) {
        return false;
    }
    if (static_cast<std::int64_t>(bytes.size()) != config_.block_bytes) {
        throw std::invalid_argument("a loaded block must be the tier's block size");
    }
    const auto start = std::chrono::steady_clock::now();
    try {
        read_slot(it->second->slot, bytes);
    } catch (const std::system_error&) {
        stats_.read_seconds += seconds_since(start);
        erase(hash);
        throw;
    }
    stats_.read_seconds += seconds_since(start);
    if (fd_ >= 0 && checksum(bytes) != it->second->checksum) {
        erase(hash);
        throw std::system_error(EIO, std::generic_category(),
                                "a KV block in " + config_.file.string() +
                                    " is not what was written there (the file was changed)");
    }
    touch(hash);
    ++stats_.reads;
    stats_.bytes_read += config_.block_bytes;
    return true;
}

void OffloadTier::erase(BlockHash hash) {
    const auto it = slot_of_.find(hash);
    if (it == slot_of_.end()) {
        return;
    }
    free_slots_.push_back(it->second->slot);
    lru_.erase(it->second);
    slot_of_.erase(it);
}

void OffloadTier::touch(BlockHash hash) {
    if (const auto it = slot_of_.find(hash); it != slot_of_.end()) {
        lru_.splice(lru_.begin(), lru_, it->second);
    }
}

} // namespace kvscope::kv
