// What the engine reports as it works: one flat record per event, cheap to
// copy into a queue, a recording or a live view. Times are host-clock
// nanoseconds (CLOCK_MONOTONIC), the clock CUPTI and NVTX records use too.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kvscope::events {

// What each kind's request, block, a..d and text hold is written once, in
// engine/events/typed_events.h (a struct with named fields per kind); read
// and write events through those structs.
enum class EventKind : std::uint8_t {
    run_config,
    step_begin,
    step_end,
    request_arrived,
    request_admitted,
    first_token,
    request_finished,
    request_preempted,
    request_aborted,
    request_rejected,
    block_allocated,
    block_freed,
    block_shared,
    block_cached,
    block_evicted,
    prefix_lookup,
    tokens_evicted,
    cache_fill,
    op_slice,
    memory_sample,
    // Added in recording schema 2 (kinds are only ever appended, so their
    // ids stay what older recordings wrote):
    block_compacted,
    kv_bytes,
    // Added later in schema 2 (older readers skip kinds they do not know):
    block_unshared,
    token_sampled,
    device_memory,
    // Attached engines (kvscope attach), added in schema 2 as well:
    source_attached,
    attached_block_stored,
    attached_block_removed,
    attached_cleared,
    attached_status,
    attached_block_moved,
    // Attached engines' Prometheus metrics (kvscope attach --metrics):
    attached_metric,
    // Speculative decoding: a draft verified, kept in part, rolled back in part.
    draft_verified,
    // The KV cache's second tier (offloading): a block saved, or loaded back.
    block_offloaded,
    block_reloaded,
    tier_dropped, // the second tier let a block go to make room
    // What a step cost in CPU time and hardware counters (regression gates).
    step_counters,
    // A hybrid KV cache's blocks per group (kv_groups.h), once a step.
    group_blocks,
};

inline constexpr int kEventKindCount = static_cast<int>(EventKind::group_blocks) + 1;

std::string_view event_kind_name(EventKind kind);

// The flat row queues and recordings carry; a..d and text mean what the
// kind's typed event (typed_events.h) says.
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
    // Many events at once, in order; the sink may take them (moved from, the
    // vector left empty). A producer of hundreds of thousands of rows a
    // second (an attach) hands them over this way: one lock and no copy per
    // row where the sink queues them. By default, on_event() for each.
    virtual void on_events(std::vector<EngineEvent>&& events) {
        for (const EngineEvent& event : events) {
            on_event(event);
        }
        events.clear();
    }
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
