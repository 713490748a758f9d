// What the engine reports as it works: one flat record per event, cheap to
// copy into a queue, a recording or a live view. Times are host-clock
// nanoseconds (CLOCK_MONOTONIC), the clock CUPTI and NVTX records use too.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kvscope::events {

enum class EventKind : std::uint8_t {
    run_config,        // text: the run's settings as JSON (cache formats, policies, limits)
    step_begin,        // a: step index, b: scheduled tokens, c: sequences, d: phase (1 prefill,
                       // 2 decode, 3 mixed; 0 in recordings older than the app)
    step_end,          // a: step index, b: prefill tokens, c: decode tokens
    request_arrived,   // request; a: prompt tokens; text: the prompt's token pieces (when the
                       // engine has a tokenizer; else empty), see encode_pieces()
    request_admitted,  // request; a: cached tokens, b: computed tokens, c: blocks hit, d: missed
    first_token,       // request
    request_finished,  // request; a: generated tokens; text: reason
    request_preempted, // request; a: blocks freed
    request_aborted,   // request
    request_rejected,  // request; text: reason
    block_allocated,   // block; request
    block_freed,       // block; request; a: 1 when it stays cached for reuse
    block_shared,      // block; request: a prefix-cache hit on a cached block
    block_cached,      // block; request: a full block's hash registered; a: the hash (bits of
                       // the uint64), b: the block's first token in the request
    block_evicted,     // block: a cached block's prefix entry dropped: reclaimed for a new
                       // use, or its owner's token eviction is about to rewrite it
    prefix_lookup,  // request; a: hit tokens, b: prompt tokens, c: shared tokens short of a block
    tokens_evicted, // request; a: tokens dropped by the eviction policy, b: blocks returned, c:
                    // entries left
    cache_fill,     // a: cache entries running sequences hold, b: slots their blocks have
    op_slice,       // a: end time (ns), b: layer (-1: none), c: step; text: op name
    memory_sample,  // a: used blocks, b: cached blocks, c: free blocks, d: total
    // Added in recording schema 2 (kinds are only ever appended, so their
    // ids stay what older recordings wrote):
    block_compacted, // block; request: rewritten by token eviction; a: entries it now holds
    kv_bytes,        // a: bytes in used blocks, b: in cached blocks, c: in free blocks,
                     // d: bytes per block; text: the K and V formats ("f16", "K q8_0, V q4_0")
    // Added later in schema 2 (older readers skip kinds they do not know):
    block_unshared, // block; request: one of several references dropped, the block stays in use
                    // by others; a: references left (block_freed is the last one's)
    token_sampled,  // request; a: token id, b: tokens generated so far; text: its piece
};

inline constexpr int kEventKindCount = static_cast<int>(EventKind::token_sampled) + 1;

std::string_view event_kind_name(EventKind kind);

struct EngineEvent {
    std::int64_t time_ns = 0;
    EventKind kind = EventKind::step_begin;
    std::int64_t request = -1; // request id, -1 when none
    std::int32_t block = -1;   // physical block id, -1 when none
    std::int64_t a = 0;
    std::int64_t b = 0;
    std::int64_t c = 0;
    std::int64_t d = 0;
    std::string text;
};

// Receives events on the engine's thread, in order; must not call back into
// the engine. Sinks that do slow work (SQLite, drawing) queue and return.
class EventSink {
public:
    virtual ~EventSink() = default;
    virtual void on_event(const EngineEvent& event) = 0;
};

// Token pieces are raw bytes (a multi-byte character may span two tokens), so
// a list of them is written as netstrings, "<length>:<bytes>" repeated:
// exact, and splittable without the tokenizer.
std::string encode_pieces(const std::vector<std::string>& pieces);
// Empty on malformed text.
std::vector<std::string> decode_pieces(std::string_view text);

// Stamps `event` with the host clock and hands it to `sink` (none: nothing).
void emit_now(EventSink* sink, EngineEvent event);

} // namespace kvscope::events
