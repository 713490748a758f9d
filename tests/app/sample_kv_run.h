// A small run, as engine events, for the block map, occupancy and prefix view
// tests: four requests on a 16-block cache of 4-token blocks, with prefix
// hits, sharing, a cached block evicted and reused, and text for every token.
//
//   ms  what happens                                        blocks after it
//   10  r1 arrives: "The cat sat on the mat. It" (8 tokens)
//   12  r1 admitted, computes all 8                         b0 b1: r1
//   13  b0 (tokens 0-4) and b1 (4-8) cached                 node 0 (b0), node 1 (b1, under 0)
//   20  r2 arrives: r1's 8 tokens + " was happy"
//   21  r2 hits 8 tokens (b0, b1 shared), computes 2 in b2  b0 b1: r1+r2; b2: r2
//   30  r1 finishes: unshares b1, b0                        b0 b1: r2
//   40  r2 finishes: frees b2; b1, b0 stay cached           b0 b1: cached; b2 free
//   45  r3 arrives: "A dog ran x<y and then it slept"
//   46  r3 admitted: b3, then b1 evicted and reused         b1 b3: r3
//   47  b3 (0-4) and b1 (4-8) cached                        node 2 (b3), node 3 (b1, under 2)
//   60  r4 arrives: "The cat sat on a hat"
//   61  r4 hits 4 tokens (b0 shared), computes 2 in b4      b0: r4 (cached), b4: r4
//   62  the end
#pragma once

#include "engine/events/engine_event.h"
#include "profiler/store/run_store.h"
#include "tests/support/engine_events.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kvscope::test {

inline constexpr std::int64_t kMs = 1'000'000;
inline constexpr std::uint64_t kHashB0 = 0xabcdef0123456789ull;
inline constexpr std::uint64_t kHashB1 = 0x1111222233334444ull;
inline constexpr std::uint64_t kHashB3 = 0x5555666677778888ull;
inline constexpr std::uint64_t kHashB1Again = 0x9999aaaabbbbccccull;

inline events::EngineEvent kv_event(std::int64_t t_ms, events::EventKind kind,
                                    std::int64_t request = -1, std::int32_t block = -1,
                                    std::int64_t a = 0, std::int64_t b = 0, std::int64_t c = 0,
                                    std::int64_t d = 0, std::string text = {}) {
    return test::engine_event(t_ms * kMs, kind, request, block, a, b, c, d, std::move(text));
}

inline std::vector<std::string> sample_prompt(int request) {
    const std::vector<std::string> cat = {"The", " cat", " sat", " on", " the", " mat", ".", " It"};
    switch (request) {
    case 1:
        return cat;
    case 2: {
        std::vector<std::string> pieces = cat;
        pieces.insert(pieces.end(), {" was", " happy"});
        return pieces;
    }
    case 3:
        return {"A", " dog", " ran", " x<y", " and", " then", " it", " slept"};
    default:
        return {"The", " cat", " sat", " on", " a", " hat"};
    }
}

// The run above, up to and including `until_ms`.
inline std::vector<events::EngineEvent> sample_run_events(std::int64_t until_ms = 1000) {
    using events::EventKind;
    const auto arrive = [](std::int64_t t, int r) {
        const std::vector<std::string> pieces = sample_prompt(r);
        return kv_event(t, EventKind::request_arrived, r, -1,
                        static_cast<std::int64_t>(pieces.size()), 0, 0, 0,
                        events::encode_pieces(pieces));
    };
    const auto hash = [](std::uint64_t h) {
        return static_cast<std::int64_t>(h);
    };
    const auto memory = [](std::int64_t t, int used, int cached, int free_blocks) {
        return kv_event(t, EventKind::memory_sample, -1, -1, used, cached, free_blocks, 16);
    };
    const std::vector<events::EngineEvent> all = {
        kv_event(1, EventKind::run_config, -1, -1, 16, 4, 0, 0, R"({"block_size":4})"),
        kv_event(1, EventKind::kv_bytes, -1, -1, 0, 0, 0, 92160, "f16"),
        arrive(10, 1),
        kv_event(11, EventKind::request_admitted, 1, -1, 0, 8),
        kv_event(12, EventKind::block_allocated, 1, 0),
        kv_event(12, EventKind::block_allocated, 1, 1),
        kv_event(13, EventKind::block_cached, 1, 0, hash(kHashB0), 0),
        kv_event(13, EventKind::block_cached, 1, 1, hash(kHashB1), 4),
        memory(14, 2, 0, 14),
        kv_event(14, EventKind::cache_fill, -1, -1, 8, 8),
        arrive(20, 2),
        kv_event(21, EventKind::request_admitted, 2, -1, 8, 2),
        kv_event(21, EventKind::block_shared, 2, 0),
        kv_event(21, EventKind::block_shared, 2, 1),
        kv_event(21, EventKind::block_allocated, 2, 2),
        memory(22, 3, 0, 13),
        kv_event(22, EventKind::cache_fill, -1, -1, 18, 20),
        kv_event(30, EventKind::request_finished, 1, -1, 0),
        kv_event(30, EventKind::block_unshared, 1, 1, 1),
        kv_event(30, EventKind::block_unshared, 1, 0, 1),
        memory(32, 3, 0, 13),
        kv_event(40, EventKind::request_finished, 2, -1, 0),
        kv_event(40, EventKind::block_freed, 2, 2, 0),
        kv_event(40, EventKind::block_freed, 2, 1, 1),
        kv_event(40, EventKind::block_freed, 2, 0, 1),
        memory(41, 0, 2, 14),
        kv_event(41, EventKind::cache_fill, -1, -1, 0, 0),
        arrive(45, 3),
        kv_event(46, EventKind::request_admitted, 3, -1, 0, 8),
        kv_event(46, EventKind::block_allocated, 3, 3),
        kv_event(46, EventKind::block_evicted, -1, 1),
        kv_event(46, EventKind::block_allocated, 3, 1),
        kv_event(47, EventKind::block_cached, 3, 3, hash(kHashB3), 0),
        kv_event(47, EventKind::block_cached, 3, 1, hash(kHashB1Again), 4),
        memory(48, 2, 1, 13),
        arrive(60, 4),
        kv_event(61, EventKind::request_admitted, 4, -1, 4, 2),
        kv_event(61, EventKind::block_shared, 4, 0),
        kv_event(61, EventKind::block_allocated, 4, 4),
        memory(62, 4, 0, 12),
    };
    std::vector<events::EngineEvent> events;
    for (const events::EngineEvent& event : all) {
        if (event.time_ns <= until_ms * kMs) {
            events.push_back(event);
        }
    }
    return events;
}

inline void append_all(profiler::RunStore& store, const std::vector<events::EngineEvent>& events) {
    for (const events::EngineEvent& event : events) {
        store.append(event);
    }
}

} // namespace kvscope::test
