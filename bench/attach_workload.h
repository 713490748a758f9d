// The KV events one simulated vLLM engine publishes, for the attach bench:
// msgpack batches in vLLM 0.23's positional form ([ts, [events...], rank]),
// packed straight into a reused buffer (the publishers share 2 cores with
// the subscriber, so they should cost little).
//
// The workload: 64 sequences in flight; each BlockStored continues one of
// them with 1-4 full blocks of 16 token ids (its parent the sequence's last
// block, none for a fresh prompt's first); a sequence ends now and then and
// a new one starts, half of them under one of 8 shared system-prompt blocks.
// Resident blocks are kept like an LRU cache of `capacity` blocks: once full,
// a BlockRemoved evicts the 1-8 oldest. About one AllBlocksCleared per 10^6
// events. A batch (one engine step) holds 1-8 events.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <msgpack.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace kvscope::bench {

inline constexpr const char* kTopic = "kv-events";
inline constexpr std::int64_t kBlockSize = 16;

inline std::string sequence_frame(std::uint64_t seq) {
    std::string out(8, '\0');
    for (int i = 7; i >= 0; --i) {
        out[static_cast<std::size_t>(i)] = static_cast<char>(seq & 0xFF);
        seq >>= 8;
    }
    return out;
}

struct Batch {
    std::uint64_t sequence = 0;
    std::string_view payload;
    int events = 0; // KV events in it
    int rows = 0;   // rows kvscope makes of them: one per block, one per clear
};

class PublisherWorkload {
public:
    PublisherWorkload(std::int64_t rank, std::size_t capacity, std::uint64_t seed)
        : rank_(rank)
        , capacity_(capacity)
        , rng_(seed) {
        for (auto& h : system_prompts_) {
            h = next();
        }
    }

    const Batch& next_batch() {
        buffer_.clear();
        msgpack::packer<msgpack::sbuffer> p(buffer_);
        const int n = 1 + static_cast<int>(next() % 8);
        batch_ = Batch{sequence_++, {}, n, 0};
        p.pack_array(3);
        p.pack_double(
            std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
                .count());
        p.pack_array(static_cast<std::uint32_t>(n));
        for (int i = 0; i < n; ++i) {
            if (next() % 1'000'000 == 0) {
                pack_clear(p);
            } else if (resident_.size() >= capacity_) {
                pack_removed(p);
            } else {
                pack_stored(p);
            }
        }
        p.pack_int64(rank_);
        batch_.payload = {buffer_.data(), buffer_.size()};
        return batch_;
    }

private:
    std::uint64_t next() { // splitmix64
        std::uint64_t z = (rng_ += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }

    static void pack_text(msgpack::packer<msgpack::sbuffer>& p, std::string_view text) {
        p.pack_str(static_cast<std::uint32_t>(text.size()));
        p.pack_str_body(text.data(), static_cast<std::uint32_t>(text.size()));
    }

    void pack_stored(msgpack::packer<msgpack::sbuffer>& p) {
        std::optional<std::uint64_t>& last = in_flight_[next() % in_flight_.size()];
        const int blocks = 1 + static_cast<int>(next() % 4);
        p.pack_array(7);
        pack_text(p, "BlockStored");
        const std::optional<std::uint64_t> parent = last;
        p.pack_array(static_cast<std::uint32_t>(blocks));
        for (int b = 0; b < blocks; ++b) {
            const std::uint64_t hash = next();
            p.pack_uint64(hash);
            resident_.push_back(hash);
            last = hash;
        }
        if (parent) {
            p.pack_uint64(*parent);
        } else {
            p.pack_nil();
        }
        p.pack_array(static_cast<std::uint32_t>(blocks * kBlockSize));
        for (int t = 0; t < blocks * kBlockSize; ++t) {
            p.pack_int64(static_cast<std::int64_t>(next() % 151'936)); // a Qwen-sized vocabulary
        }
        p.pack_int64(kBlockSize);
        p.pack_nil(); // lora_id
        pack_text(p, "GPU");
        batch_.rows += blocks;
        // A sequence ends after ~16 stores; its successor starts a new prompt.
        if (next() % 16 == 0) {
            last = next() % 2 == 0 ? std::optional<std::uint64_t>{}
                                   : system_prompts_[next() % system_prompts_.size()];
        }
    }

    void pack_removed(msgpack::packer<msgpack::sbuffer>& p) {
        const std::size_t blocks = std::min<std::size_t>(1 + next() % 8, resident_.size());
        p.pack_array(3);
        pack_text(p, "BlockRemoved");
        p.pack_array(static_cast<std::uint32_t>(blocks));
        for (std::size_t b = 0; b < blocks; ++b) {
            p.pack_uint64(resident_.front());
            resident_.pop_front();
        }
        pack_text(p, "GPU");
        batch_.rows += static_cast<int>(blocks);
    }

    void pack_clear(msgpack::packer<msgpack::sbuffer>& p) {
        p.pack_array(1);
        pack_text(p, "AllBlocksCleared");
        resident_.clear();
        in_flight_.fill(std::nullopt);
        batch_.rows += 1;
    }

    std::int64_t rank_;
    std::size_t capacity_;
    std::uint64_t rng_;
    std::uint64_t sequence_ = 0;
    std::array<std::uint64_t, 8> system_prompts_{};
    std::array<std::optional<std::uint64_t>, 64> in_flight_{};
    std::deque<std::uint64_t> resident_; // oldest first
    msgpack::sbuffer buffer_;
    Batch batch_;
};

} // namespace kvscope::bench
