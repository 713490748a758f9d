// One struct per event kind, with named fields, and the one place that says
// which column of the flat EngineEvent each field travels in. Emitters build
// a typed event and emit_now() it; readers switch on the kind and read it
// back with as<T>(); the recorder's SQL views and the JSONL writer name the
// columns from the same field lists. Nothing else decodes a/b/c/d.
#pragma once

#include "engine/events/engine_event.h"

#include <cassert>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace kvscope::events {

// The flat row's columns a field can travel in.
enum class Column : std::uint8_t { request, block, a, b, c, d, text };

std::string_view column_name(Column column);

// A named field: a member of the typed event and the column it travels in.
template <class Event, class Member>
struct Field {
    std::string_view name;
    Member Event::*member;
    Column column;
};

template <class Event, class Member>
constexpr Field<Event, Member> field(std::string_view name, Member Event::*member, Column column) {
    return {name, member, column};
}

// What a step ran, as step_begin carries it.
enum class StepPhase : std::uint8_t {
    idle = 0, // nothing scheduled (and recordings older than the phase)
    prefill = 1,
    decode = 2,
    mixed = 3,
};
inline constexpr int kStepPhaseCount = 4;
std::string_view step_phase_name(StepPhase phase);

struct RunConfig {
    static constexpr EventKind kind = EventKind::run_config;
    std::int64_t blocks = 0;
    std::int64_t block_size = 0;
    std::string settings; // JSON: cache formats, policies, limits
    static constexpr auto fields() {
        return std::tuple{field("blocks", &RunConfig::blocks, Column::a),
                          field("block_size", &RunConfig::block_size, Column::b),
                          field("settings", &RunConfig::settings, Column::text)};
    }
    bool operator==(const RunConfig&) const = default;
};

struct StepBegin {
    static constexpr EventKind kind = EventKind::step_begin;
    std::int64_t step = 0;
    std::int64_t scheduled_tokens = 0;
    std::int64_t sequences = 0;
    StepPhase phase = StepPhase::idle;
    static constexpr auto fields() {
        return std::tuple{field("step", &StepBegin::step, Column::a),
                          field("scheduled_tokens", &StepBegin::scheduled_tokens, Column::b),
                          field("sequences", &StepBegin::sequences, Column::c),
                          field("phase", &StepBegin::phase, Column::d)};
    }
    bool operator==(const StepBegin&) const = default;
};

struct StepEnd {
    static constexpr EventKind kind = EventKind::step_end;
    std::int64_t step = 0;
    std::int64_t prefill_tokens = 0; // tokens computed that were not the last of their request
    std::int64_t decode_tokens = 0;  // tokens generated (a verified draft gives several)
    static constexpr auto fields() {
        return std::tuple{field("step", &StepEnd::step, Column::a),
                          field("prefill_tokens", &StepEnd::prefill_tokens, Column::b),
                          field("decode_tokens", &StepEnd::decode_tokens, Column::c)};
    }
    bool operator==(const StepEnd&) const = default;
};

struct RequestArrived {
    static constexpr EventKind kind = EventKind::request_arrived;
    std::int64_t request = -1;
    std::int64_t prompt_tokens = 0;
    // The prompt's token pieces (encode_pieces) when the engine has a
    // tokenizer; else empty.
    std::string prompt_pieces;
    static constexpr auto fields() {
        return std::tuple{field("request", &RequestArrived::request, Column::request),
                          field("prompt_tokens", &RequestArrived::prompt_tokens, Column::a),
                          field("prompt_pieces", &RequestArrived::prompt_pieces, Column::text)};
    }
    bool operator==(const RequestArrived&) const = default;
};

struct RequestAdmitted {
    static constexpr EventKind kind = EventKind::request_admitted;
    std::int64_t request = -1;
    std::int64_t cached_tokens = 0;   // found in the prefix cache
    std::int64_t computed_tokens = 0; // left to compute
    std::int64_t blocks_hit = 0;
    std::int64_t blocks_missed = 0;
    static constexpr auto fields() {
        return std::tuple{field("request", &RequestAdmitted::request, Column::request),
                          field("cached_tokens", &RequestAdmitted::cached_tokens, Column::a),
                          field("computed_tokens", &RequestAdmitted::computed_tokens, Column::b),
                          field("blocks_hit", &RequestAdmitted::blocks_hit, Column::c),
                          field("blocks_missed", &RequestAdmitted::blocks_missed, Column::d)};
    }
    bool operator==(const RequestAdmitted&) const = default;
};

struct FirstToken {
    static constexpr EventKind kind = EventKind::first_token;
    std::int64_t request = -1;
    static constexpr auto fields() {
        return std::tuple{field("request", &FirstToken::request, Column::request)};
    }
    bool operator==(const FirstToken&) const = default;
};

struct RequestFinished {
    static constexpr EventKind kind = EventKind::request_finished;
    std::int64_t request = -1;
    std::int64_t generated_tokens = 0;
    std::string reason;
    static constexpr auto fields() {
        return std::tuple{field("request", &RequestFinished::request, Column::request),
                          field("generated_tokens", &RequestFinished::generated_tokens, Column::a),
                          field("reason", &RequestFinished::reason, Column::text)};
    }
    bool operator==(const RequestFinished&) const = default;
};

struct RequestPreempted {
    static constexpr EventKind kind = EventKind::request_preempted;
    std::int64_t request = -1;
    std::int64_t preemptions = 0; // of this request so far, this one included
    static constexpr auto fields() {
        return std::tuple{field("request", &RequestPreempted::request, Column::request),
                          field("preemptions", &RequestPreempted::preemptions, Column::a)};
    }
    bool operator==(const RequestPreempted&) const = default;
};

struct RequestAborted {
    static constexpr EventKind kind = EventKind::request_aborted;
    std::int64_t request = -1;
    static constexpr auto fields() {
        return std::tuple{field("request", &RequestAborted::request, Column::request)};
    }
    bool operator==(const RequestAborted&) const = default;
};

struct RequestRejected {
    static constexpr EventKind kind = EventKind::request_rejected;
    std::int64_t request = -1;
    std::string reason;
    static constexpr auto fields() {
        return std::tuple{field("request", &RequestRejected::request, Column::request),
                          field("reason", &RequestRejected::reason, Column::text)};
    }
    bool operator==(const RequestRejected&) const = default;
};

struct BlockAllocated {
    static constexpr EventKind kind = EventKind::block_allocated;
    std::int32_t block = -1;
    std::int64_t request = -1;
    std::int32_t group = 0; // its KV group (kv_groups.h) until it is freed
    static constexpr auto fields() {
        return std::tuple{field("block", &BlockAllocated::block, Column::block),
                          field("request", &BlockAllocated::request, Column::request),
                          field("kv_group", &BlockAllocated::group, Column::a)};
    }
    bool operator==(const BlockAllocated&) const = default;
};

struct BlockFreed {
    static constexpr EventKind kind = EventKind::block_freed;
    std::int32_t block = -1;
    std::int64_t request = -1;
    bool stays_cached = false; // hashed: kept for reuse until evicted
    std::int32_t group = 0;
    // A sliding-window group let it go: the window moved past it (its
    // request goes on).
    bool left_window = false;
    static constexpr auto fields() {
        return std::tuple{field("block", &BlockFreed::block, Column::block),
                          field("request", &BlockFreed::request, Column::request),
                          field("stays_cached", &BlockFreed::stays_cached, Column::a),
                          field("kv_group", &BlockFreed::group, Column::b),
                          field("left_window", &BlockFreed::left_window, Column::c)};
    }
    bool operator==(const BlockFreed&) const = default;
};

// A prefix-cache hit on a cached block.
struct BlockShared {
    static constexpr EventKind kind = EventKind::block_shared;
    std::int32_t block = -1;
    std::int64_t request = -1;
    std::int32_t group = 0;
    static constexpr auto fields() {
        return std::tuple{field("block", &BlockShared::block, Column::block),
                          field("request", &BlockShared::request, Column::request),
                          field("kv_group", &BlockShared::group, Column::a)};
    }
    bool operator==(const BlockShared&) const = default;
};

// A full block's hash registered in the prefix cache.
struct BlockCached {
    static constexpr EventKind kind = EventKind::block_cached;
    std::int32_t block = -1;
    std::int64_t request = -1;
    std::uint64_t hash = 0;       // travels as the int64 of the same bits
    std::int64_t first_token = 0; // the block's first token in the request
    std::int32_t group = 0;
    static constexpr auto fields() {
        return std::tuple{field("block", &BlockCached::block, Column::block),
                          field("request", &BlockCached::request, Column::request),
                          field("hash", &BlockCached::hash, Column::a),
                          field("first_token", &BlockCached::first_token, Column::b),
                          field("kv_group", &BlockCached::group, Column::c)};
    }
    bool operator==(const BlockCached&) const = default;
};

// A cached block's prefix entry dropped: reclaimed for a new use, or its
// owner's token eviction is about to rewrite it.
struct BlockEvicted {
    static constexpr EventKind kind = EventKind::block_evicted;
    std::int32_t block = -1;
    std::int64_t request = -1;
    std::int32_t group = 0;
    static constexpr auto fields() {
        return std::tuple{field("block", &BlockEvicted::block, Column::block),
                          field("request", &BlockEvicted::request, Column::request),
                          field("kv_group", &BlockEvicted::group, Column::a)};
    }
    bool operator==(const BlockEvicted&) const = default;
};

struct PrefixLookup {
    static constexpr EventKind kind = EventKind::prefix_lookup;
    std::int64_t request = -1;
    std::int64_t hit_tokens = 0;
    // The tokens looked up: the prompt, plus what was generated before a
    // preemption when the request is admitted again.
    std::int64_t prompt_tokens = 0;
    std::int64_t short_of_block_tokens = 0; // shared tokens short of a whole block
    static constexpr auto fields() {
        return std::tuple{
            field("request", &PrefixLookup::request, Column::request),
            field("hit_tokens", &PrefixLookup::hit_tokens, Column::a),
            field("prompt_tokens", &PrefixLookup::prompt_tokens, Column::b),
            field("short_of_block_tokens", &PrefixLookup::short_of_block_tokens, Column::c)};
    }
    bool operator==(const PrefixLookup&) const = default;
};

struct TokensEvicted {
    static constexpr EventKind kind = EventKind::tokens_evicted;
    std::int64_t request = -1;
    std::int64_t tokens = 0; // dropped by the eviction policy
    std::int64_t blocks_released = 0;
    std::int64_t entries_left = 0;
    static constexpr auto fields() {
        return std::tuple{field("request", &TokensEvicted::request, Column::request),
                          field("tokens", &TokensEvicted::tokens, Column::a),
                          field("blocks_released", &TokensEvicted::blocks_released, Column::b),
                          field("entries_left", &TokensEvicted::entries_left, Column::c)};
    }
    bool operator==(const TokensEvicted&) const = default;
};

struct CacheFill {
    static constexpr EventKind kind = EventKind::cache_fill;
    std::int64_t entries = 0;  // cache entries running sequences hold
    std::int64_t capacity = 0; // slots their blocks have
    static constexpr auto fields() {
        return std::tuple{field("entries", &CacheFill::entries, Column::a),
                          field("capacity", &CacheFill::capacity, Column::b)};
    }
    bool operator==(const CacheFill&) const = default;
};

// One backend op; the event's time is the op's start.
struct OpSlice {
    static constexpr EventKind kind = EventKind::op_slice;
    std::int64_t end_ns = 0;
    std::int64_t layer = -1; // -1: not in a layer
    std::int64_t step = 0;
    // The engine thread's CPU time in it; 0: not measured (a GPU's kernels,
    // recordings made before it was).
    std::int64_t cpu_ns = 0;
    std::string op;
    static constexpr auto fields() {
        return std::tuple{
            field("end_ns", &OpSlice::end_ns, Column::a),
            field("layer", &OpSlice::layer, Column::b), field("step", &OpSlice::step, Column::c),
            field("cpu_ns", &OpSlice::cpu_ns, Column::d), field("op", &OpSlice::op, Column::text)};
    }
    bool operator==(const OpSlice&) const = default;
};

struct MemorySample {
    static constexpr EventKind kind = EventKind::memory_sample;
    std::int64_t used_blocks = 0;
    std::int64_t cached_blocks = 0;
    std::int64_t free_blocks = 0;
    std::int64_t total_blocks = 0;
    static constexpr auto fields() {
        return std::tuple{field("used_blocks", &MemorySample::used_blocks, Column::a),
                          field("cached_blocks", &MemorySample::cached_blocks, Column::b),
                          field("free_blocks", &MemorySample::free_blocks, Column::c),
                          field("total_blocks", &MemorySample::total_blocks, Column::d)};
    }
    bool operator==(const MemorySample&) const = default;
};

// One KV group's blocks after a step, in a hybrid cache (kv_groups.h): a
// sliding-window group's stay flat once its windows fill, a global one's
// grow with the context.
struct GroupBlocks {
    static constexpr EventKind kind = EventKind::group_blocks;
    std::int32_t group = 0;
    std::int32_t window = 0; // 0: the whole context
    std::int64_t used_blocks = 0;
    std::int64_t cached_blocks = 0;
    static constexpr auto fields() {
        return std::tuple{field("kv_group", &GroupBlocks::group, Column::a),
                          field("window", &GroupBlocks::window, Column::b),
                          field("used_blocks", &GroupBlocks::used_blocks, Column::c),
                          field("cached_blocks", &GroupBlocks::cached_blocks, Column::d)};
    }
    bool operator==(const GroupBlocks&) const = default;
};

// A block rewritten by token eviction.
struct BlockCompacted {
    static constexpr EventKind kind = EventKind::block_compacted;
    std::int32_t block = -1;
    std::int64_t request = -1;
    std::int64_t entries = 0; // it now holds
    static constexpr auto fields() {
        return std::tuple{field("block", &BlockCompacted::block, Column::block),
                          field("request", &BlockCompacted::request, Column::request),
                          field("entries", &BlockCompacted::entries, Column::a)};
    }
    bool operator==(const BlockCompacted&) const = default;
};

struct KvBytes {
    static constexpr EventKind kind = EventKind::kv_bytes;
    std::int64_t used_bytes = 0;
    std::int64_t cached_bytes = 0;
    std::int64_t free_bytes = 0;
    std::int64_t bytes_per_block = 0;
    std::string formats; // the K and V formats ("f16", "K q8_0, V q4_0")
    static constexpr auto fields() {
        return std::tuple{field("used_bytes", &KvBytes::used_bytes, Column::a),
                          field("cached_bytes", &KvBytes::cached_bytes, Column::b),
                          field("free_bytes", &KvBytes::free_bytes, Column::c),
                          field("bytes_per_block", &KvBytes::bytes_per_block, Column::d),
                          field("formats", &KvBytes::formats, Column::text)};
    }
    bool operator==(const KvBytes&) const = default;
};

// One of several references dropped; the block stays in use by the others
// (block_freed is the last one's).
struct BlockUnshared {
    static constexpr EventKind kind = EventKind::block_unshared;
    std::int32_t block = -1;
    std::int64_t request = -1;
    std::int64_t references_left = 0;
    std::int32_t group = 0;
    bool left_window = false; // as BlockFreed's
    static constexpr auto fields() {
        return std::tuple{field("block", &BlockUnshared::block, Column::block),
                          field("request", &BlockUnshared::request, Column::request),
                          field("references_left", &BlockUnshared::references_left, Column::a),
                          field("kv_group", &BlockUnshared::group, Column::b),
                          field("left_window", &BlockUnshared::left_window, Column::c)};
    }
    bool operator==(const BlockUnshared&) const = default;
};

struct TokenSampled {
    static constexpr EventKind kind = EventKind::token_sampled;
    std::int64_t request = -1;
    std::int64_t token = 0;     // token id
    std::int64_t generated = 0; // tokens generated so far, this one included
    std::string piece;          // its raw bytes
    static constexpr auto fields() {
        return std::tuple{field("request", &TokenSampled::request, Column::request),
                          field("token", &TokenSampled::token, Column::a),
                          field("generated", &TokenSampled::generated, Column::b),
                          field("piece", &TokenSampled::piece, Column::text)};
    }
    bool operator==(const TokenSampled&) const = default;
};

// Where a GPU backend's device memory goes, sampled with the KV manager's
// counters: the KV pool's share of the device is what sizing depends on.
// device_used - weights - kv_pool is everything else (activations, workspaces, the
// CUDA context, other processes).
struct DeviceMemory {
    static constexpr EventKind kind = EventKind::device_memory;
    std::int64_t weights_bytes = 0;
    std::int64_t kv_pool_bytes = 0;
    std::int64_t device_used_bytes = 0;  // in use on the device (total - free)
    std::int64_t device_total_bytes = 0; // the device's memory
    std::string device;                  // the backend ("cuda")
    static constexpr auto fields() {
        return std::tuple{field("weights_bytes", &DeviceMemory::weights_bytes, Column::a),
                          field("kv_pool_bytes", &DeviceMemory::kv_pool_bytes, Column::b),
                          field("device_used_bytes", &DeviceMemory::device_used_bytes, Column::c),
                          field("device_total_bytes", &DeviceMemory::device_total_bytes, Column::d),
                          field("device", &DeviceMemory::device, Column::text)};
    }
    bool operator==(const DeviceMemory&) const = default;
};

// Attached engines (kvscope attach). A serving engine's KV events name blocks
// by hash, so these rows carry no physical block id, owning request or
// reference count; `source` numbers the attached publishers from 0 in the
// order given, `rank` is the data-parallel rank a batch named (0 when none).
// Times are when kvscope received the batch; published_us is the publisher's
// own wall clock (microseconds since the Unix epoch).

// A publisher kvscope attached to, written once when attaching.
struct SourceAttached {
    static constexpr EventKind kind = EventKind::source_attached;
    std::int64_t source = 0;
    std::int64_t block_size = 0; // as given (--block-size); 0: from the events
    std::int64_t num_blocks = 0; // the engine's KV capacity as given; 0: unknown
    std::string endpoints;       // JSON: endpoint, replay, topic
    static constexpr auto fields() {
        return std::tuple{field("source", &SourceAttached::source, Column::a),
                          field("block_size", &SourceAttached::block_size, Column::b),
                          field("num_blocks", &SourceAttached::num_blocks, Column::c),
                          field("endpoints", &SourceAttached::endpoints, Column::text)};
    }
    bool operator==(const SourceAttached&) const = default;
};

// One block entered an attached engine's prefix cache (BlockStored names
// several; each gets a row).
struct AttachedBlockStored {
    static constexpr EventKind kind = EventKind::attached_block_stored;
    std::int64_t source = 0;
    std::int64_t rank = 0;
    std::int64_t block_size = 0;
    std::int64_t published_us = 0;
    std::string detail; // JSON: hash, parent, medium, tokens, lora_id, group
    static constexpr auto fields() {
        return std::tuple{field("source", &AttachedBlockStored::source, Column::a),
                          field("rank", &AttachedBlockStored::rank, Column::b),
                          field("block_size", &AttachedBlockStored::block_size, Column::c),
                          field("published_us", &AttachedBlockStored::published_us, Column::d),
                          field("detail", &AttachedBlockStored::detail, Column::text)};
    }
    bool operator==(const AttachedBlockStored&) const = default;
};

// One block left an attached engine's cache tier.
struct AttachedBlockRemoved {
    static constexpr EventKind kind = EventKind::attached_block_removed;
    std::int64_t source = 0;
    std::int64_t rank = 0;
    std::int64_t published_us = 0;
    std::string detail; // JSON: hash, medium, group
    static constexpr auto fields() {
        return std::tuple{field("source", &AttachedBlockRemoved::source, Column::a),
                          field("rank", &AttachedBlockRemoved::rank, Column::b),
                          field("published_us", &AttachedBlockRemoved::published_us, Column::d),
                          field("detail", &AttachedBlockRemoved::detail, Column::text)};
    }
    bool operator==(const AttachedBlockRemoved&) const = default;
};

enum class ClearCause : std::uint8_t {
    all_blocks_cleared = 0,  // the engine reset its prefix cache (AllBlocksCleared)
    publisher_restarted = 1, // its sequence numbers began again: what it said is void
    events_lost = 2,         // batches neither the stream nor replay gave: removals may be
                             // among them, so what is known resident starts again
};
std::string_view clear_cause_name(ClearCause cause);

// Everything an attached source had resident is gone.
struct AttachedCleared {
    static constexpr EventKind kind = EventKind::attached_cleared;
    std::int64_t source = 0;
    std::int64_t rank = 0;
    ClearCause cause = ClearCause::all_blocks_cleared;
    std::int64_t published_us = 0;
    static constexpr auto fields() {
        return std::tuple{field("source", &AttachedCleared::source, Column::a),
                          field("rank", &AttachedCleared::rank, Column::b),
                          field("cause", &AttachedCleared::cause, Column::c),
                          field("published_us", &AttachedCleared::published_us, Column::d)};
    }
    bool operator==(const AttachedCleared&) const = default;
};

// How an attached stream is doing, written about once a second and at the
// end: totals since attaching.
struct AttachedStatus {
    static constexpr EventKind kind = EventKind::attached_status;
    std::int64_t source = 0;
    std::int64_t events = 0;    // KV events received
    std::int64_t lost = 0;      // batches (sequence numbers) neither stream nor replay gave
    std::int64_t silent_ms = 0; // since the last message (or since attaching)
    std::string counts;         // JSON: every counter, and the last decode error
    static constexpr auto fields() {
        return std::tuple{field("source", &AttachedStatus::source, Column::a),
                          field("events", &AttachedStatus::events, Column::b),
                          field("lost", &AttachedStatus::lost, Column::c),
                          field("silent_ms", &AttachedStatus::silent_ms, Column::d),
                          field("counts", &AttachedStatus::counts, Column::text)};
    }
    bool operator==(const AttachedStatus&) const = default;
};

// One block moved between an attached engine's cache tiers, keeping what it
// holds (offloaded to host memory, or brought back).
struct AttachedBlockMoved {
    static constexpr EventKind kind = EventKind::attached_block_moved;
    std::int64_t source = 0;
    std::int64_t rank = 0;
    std::int64_t published_us = 0;
    std::string detail; // JSON: hash, from, to (media)
    static constexpr auto fields() {
        return std::tuple{field("source", &AttachedBlockMoved::source, Column::a),
                          field("rank", &AttachedBlockMoved::rank, Column::b),
                          field("published_us", &AttachedBlockMoved::published_us, Column::d),
                          field("detail", &AttachedBlockMoved::detail, Column::text)};
    }
    bool operator==(const AttachedBlockMoved&) const = default;
};

// One sample of a metric an attached engine exposes for Prometheus (kvscope
// attach --metrics), as polled: the value is a double and may be NaN or
// infinite, so it travels in the JSON with the name and labels rather than in
// an integer column.
struct AttachedMetric {
    static constexpr EventKind kind = EventKind::attached_metric;
    std::int64_t source = 0;
    std::string sample; // JSON: name, value (a number, or "NaN", "+Inf", "-Inf"), labels
    static constexpr auto fields() {
        return std::tuple{field("source", &AttachedMetric::source, Column::a),
                          field("sample", &AttachedMetric::sample, Column::text)};
    }
    bool operator==(const AttachedMetric&) const = default;
};

// A speculative step's verification for one request: of `drafted` tokens,
// the first `accepted` kept their K/V and the rest were rolled back - the
// cache entries from `entries` on, past which `blocks_released` whole
// blocks went back to the pool. No prefix-cache hash covers a rolled-back
// entry.
struct DraftVerified {
    static constexpr EventKind kind = EventKind::draft_verified;
    std::int64_t request = -1;
    std::int64_t drafted = 0;
    std::int64_t accepted = 0;
    std::int64_t blocks_released = 0;
    std::int64_t entries = 0; // the request's cache entries after the rollback
    static constexpr auto fields() {
        return std::tuple{field("request", &DraftVerified::request, Column::request),
                          field("drafted", &DraftVerified::drafted, Column::a),
                          field("accepted", &DraftVerified::accepted, Column::b),
                          field("blocks_released", &DraftVerified::blocks_released, Column::c),
                          field("entries", &DraftVerified::entries, Column::d)};
    }
    bool operator==(const DraftVerified&) const = default;
};

// A full block's K/V saved to the KV cache's second tier under its prefix
// hash (when the pool reclaimed it, or when it was cached under
// write-through): `bytes` moved in `nanoseconds`.
struct BlockOffloaded {
    static constexpr EventKind kind = EventKind::block_offloaded;
    std::int32_t block = -1;
    std::int64_t request = -1;
    std::uint64_t hash = 0;
    std::int64_t nanoseconds = 0;
    std::int64_t bytes = 0;
    std::int64_t tier_blocks = 0; // blocks the tier holds after it
    static constexpr auto fields() {
        return std::tuple{field("block", &BlockOffloaded::block, Column::block),
                          field("request", &BlockOffloaded::request, Column::request),
                          field("hash", &BlockOffloaded::hash, Column::a),
                          field("nanoseconds", &BlockOffloaded::nanoseconds, Column::b),
                          field("bytes", &BlockOffloaded::bytes, Column::c),
                          field("tier_blocks", &BlockOffloaded::tier_blocks, Column::d)};
    }
    bool operator==(const BlockOffloaded&) const = default;
};

// A prefix hit in the second tier: the K/V stored under `hash` loaded into
// a fresh block of `request`, instead of computing them again.
struct BlockReloaded {
    static constexpr EventKind kind = EventKind::block_reloaded;
    std::int32_t block = -1;
    std::int64_t request = -1;
    std::uint64_t hash = 0;
    std::int64_t nanoseconds = 0;
    std::int64_t bytes = 0;
    std::int64_t tier_blocks = 0; // blocks the tier holds after it
    static constexpr auto fields() {
        return std::tuple{field("block", &BlockReloaded::block, Column::block),
                          field("request", &BlockReloaded::request, Column::request),
                          field("hash", &BlockReloaded::hash, Column::a),
                          field("nanoseconds", &BlockReloaded::nanoseconds, Column::b),
                          field("bytes", &BlockReloaded::bytes, Column::c),
                          field("tier_blocks", &BlockReloaded::tier_blocks, Column::d)};
    }
    bool operator==(const BlockReloaded&) const = default;
};

// The second tier let the block stored under `hash` go (its least recently
// used, to make room for another): `tier_blocks` it holds after.
struct TierDropped {
    static constexpr EventKind kind = EventKind::tier_dropped;
    std::uint64_t hash = 0;
    std::int64_t tier_blocks = 0;
    static constexpr auto fields() {
        return std::tuple{field("hash", &TierDropped::hash, Column::a),
                          field("tier_blocks", &TierDropped::tier_blocks, Column::b)};
    }
    bool operator==(const TierDropped&) const = default;
};

// What one step cost, emitted just before its step_end (which names the
// step): the CPU time the
// engine's thread ran (its share of the pool's loops, and its waits on them,
// included; other threads not), the instructions retired and cycles it took
// in user space (-1 where the kernel allows no hardware counters), and the
// cache entries its attention read (each layer's keys and values of every
// position attended, summed over the batch): work that depends only on the
// workload, not on the machine, so compare holds it to exact equality.
struct StepCounters {
    static constexpr EventKind kind = EventKind::step_counters;
    std::int64_t cpu_ns = 0;
    std::int64_t instructions = -1;
    std::int64_t cycles = -1;
    std::int64_t kv_entries_read = 0;
    static constexpr auto fields() {
        return std::tuple{field("cpu_ns", &StepCounters::cpu_ns, Column::a),
                          field("instructions", &StepCounters::instructions, Column::b),
                          field("cycles", &StepCounters::cycles, Column::c),
                          field("kv_entries_read", &StepCounters::kv_entries_read, Column::d)};
    }
    bool operator==(const StepCounters&) const = default;
};

// Every typed event, in EventKind order.
using TypedEvents = std::tuple<
    RunConfig, StepBegin, StepEnd, RequestArrived, RequestAdmitted, FirstToken, RequestFinished,
    RequestPreempted, RequestAborted, RequestRejected, BlockAllocated, BlockFreed, BlockShared,
    BlockCached, BlockEvicted, PrefixLookup, TokensEvicted, CacheFill, OpSlice, MemorySample,
    BlockCompacted, KvBytes, BlockUnshared, TokenSampled, DeviceMemory, SourceAttached,
    AttachedBlockStored, AttachedBlockRemoved, AttachedCleared, AttachedStatus, AttachedBlockMoved,
    AttachedMetric, DraftVerified, BlockOffloaded, BlockReloaded, TierDropped, StepCounters,
    GroupBlocks>;
static_assert(std::tuple_size_v<TypedEvents> == kEventKindCount, "a kind has no typed event");

template <class T>
concept TypedEvent = requires {
    { T::kind } -> std::convertible_to<EventKind>;
    T::fields();
};

namespace detail {

template <class Member>
void store(EngineEvent& event, Column column, const Member& value) {
    if constexpr (std::is_same_v<Member, std::string>) {
        assert(column == Column::text);
        event.text = value;
    } else {
        const auto raw = static_cast<std::int64_t>(value);
        switch (column) {
        case Column::request:
            event.request = raw;
            break;
        case Column::block:
            event.block = static_cast<std::int32_t>(raw);
            break;
        case Column::a:
            event.a = raw;
            break;
        case Column::b:
            event.b = raw;
            break;
        case Column::c:
            event.c = raw;
            break;
        case Column::d:
            event.d = raw;
            break;
        case Column::text:
            assert(false && "a number in the text column");
            break;
        }
    }
}

template <class Member>
void load(const EngineEvent& event, Column column, Member& value) {
    if constexpr (std::is_same_v<Member, std::string>) {
        value = event.text;
    } else {
        std::int64_t raw = 0;
        switch (column) {
        case Column::request:
            raw = event.request;
            break;
        case Column::block:
            raw = event.block;
            break;
        case Column::a:
            raw = event.a;
            break;
        case Column::b:
            raw = event.b;
            break;
        case Column::c:
            raw = event.c;
            break;
        case Column::d:
            raw = event.d;
            break;
        case Column::text:
            break;
        }
        if constexpr (std::is_same_v<Member, bool>) {
            value = raw != 0;
        } else {
            value = static_cast<Member>(raw);
        }
    }
}

template <std::size_t... I>
constexpr bool kinds_in_order(std::index_sequence<I...>) {
    return ((static_cast<std::size_t>(std::tuple_element_t<I, TypedEvents>::kind) == I) && ...);
}
static_assert(kinds_in_order(std::make_index_sequence<kEventKindCount>()),
              "TypedEvents must list the kinds in EventKind order");

} // namespace detail

// The flat row of a typed event (time 0: emit_now stamps it).
template <TypedEvent T>
EngineEvent to_event(const T& typed) {
    EngineEvent event;
    event.kind = T::kind;
    std::apply([&](const auto&... f) { (detail::store(event, f.column, typed.*(f.member)), ...); },
               T::fields());
    return event;
}

// The typed event a flat row of kind T::kind holds.
template <TypedEvent T>
T as(const EngineEvent& event) {
    assert(event.kind == T::kind);
    T typed;
    std::apply([&](const auto&... f) { (detail::load(event, f.column, typed.*(f.member)), ...); },
               T::fields());
    return typed;
}

// Stamps the event with the host clock and hands it to `sink` (none: nothing).
template <TypedEvent T>
void emit_now(EventSink* sink, const T& typed) {
    if (sink != nullptr) {
        emit_now(sink, to_event(typed));
    }
}

// Calls f(std::type_identity<T>{}) with the typed event of `kind`; false for
// a kind this build does not know.
template <class F>
bool visit_kind(EventKind kind, F&& f) {
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
        return ((static_cast<std::size_t>(kind) == I
                     ? (f(std::type_identity<std::tuple_element_t<I, TypedEvents>>{}), true)
                     : false) ||
                ...);
    }
    (std::make_index_sequence<kEventKindCount>());
}

// Calls f(name, value) for each field of the event's kind, in declaration
// order, each value as its typed member (an unknown kind: no calls).
template <class F>
void for_each_field(const EngineEvent& event, F&& f) {
    visit_kind(event.kind, [&]<class T>(std::type_identity<T>) {
        const T typed = as<T>(event);
        std::apply([&](const auto&... field) { (f(field.name, typed.*(field.member)), ...); },
                   T::fields());
    });
}

// A kind's fields by name and column, for writers that name them (the SQL
// views, JSON lines).
struct FieldColumn {
    std::string_view name;
    Column column;
};
std::vector<FieldColumn> field_columns(EventKind kind);
// The column `field` of `kind` travels in; throws std::logic_error for a
// field the kind does not have.
Column column_of(EventKind kind, std::string_view field);

} // namespace kvscope::events
