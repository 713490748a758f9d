// One run in memory, the way the app's views read it: time-sorted columns
// (steps, CPU ops, request lanes, counters, GPU spans) that a view queries by
// visible time range with lower_bound, request records with their text, the
// prefix tree, and the block map of any moment (checkpoints plus replayed
// block events, so scrubbing is exact and fast). Fed event by event, live from
// the engine or from a recording; single-threaded (the app feeds it on the UI
// thread from a LiveEventQueue, or builds it on a worker and hands it over).
#pragma once

#include "engine/events/engine_event.h"
#include "engine/events/typed_events.h"
#include "profiler/store/attached_history.h"
#include "profiler/store/block_map_state.h"
#include "profiler/store/counter_track.h"

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace kvscope::profiler {

// What a step ran, as step_begin records it (or guessed, for older files).
using events::step_phase_name;
using events::StepPhase;

struct StepSpan {
    std::int64_t begin_ns = 0;
    std::int64_t end_ns = 0; // -1 while the step runs (live)
    std::int64_t step = 0;
    std::int32_t scheduled_tokens = 0;
    std::int32_t sequences = 0;
    std::int32_t prefill_tokens = 0;
    std::int32_t decode_tokens = 0;
    std::int8_t phase_code = 0; // as step_begin recorded it; 0: older recording, guessed
    // Speculative decoding: draft tokens its pass verified, and those kept.
    std::int32_t drafted = 0;
    std::int32_t accepted = 0;
    StepPhase phase() const;
};

// A span on a track: a CPU op, a GPU kernel, an NVTX range. `label` indexes
// RunStore::names().
struct Span {
    std::int64_t begin_ns = 0;
    std::int64_t end_ns = 0;
    std::int32_t label = 0;
    std::int32_t detail = -1; // CPU op: layer (-1: none); GPU: stream; NVTX: depth
};

// Spans that never overlap, sorted by begin (hence by end too), so a visible
// range is two lower_bounds. Nested ranges (NVTX) get a track per depth.
struct SpanTrack {
    std::string name;
    std::vector<Span> spans;
};

enum class LaneState : std::uint8_t { waiting, prefill, decode, preempted };
std::string_view lane_state_name(LaneState state);

struct LaneSpan {
    std::int64_t begin_ns = 0;
    std::int64_t end_ns = -1; // -1: still in this state (live)
    LaneState state = LaneState::waiting;
};

struct RequestRecord {
    std::int64_t id = -1;
    std::int64_t arrival_ns = -1;
    std::int64_t admitted_ns = -1; // first admission
    std::int64_t first_token_ns = -1;
    std::int64_t end_ns = -1;
    std::int32_t prompt_tokens = 0;
    std::int32_t cached_tokens = 0;   // prefix-cache hit at first admission
    std::int32_t computed_tokens = 0; // prompt tokens computed at first admission
    std::int32_t generated = 0;
    std::int32_t preemptions = 0;
    std::int64_t evicted_tokens = 0;
    std::string outcome;                    // "" while live; "finished", "aborted", "rejected"
    std::string reason;                     // why it finished or was rejected
    std::vector<std::string> prompt_pieces; // empty when the run carried no text
    std::vector<std::string> output_pieces;
    std::vector<std::int64_t> output_times_ns;
    std::vector<LaneSpan> lanes;

    double ttft_ms() const; // -1 before the first token
    double tpot_ms() const; // -1 with fewer than two tokens
    // What the request was doing at `t_ns` ("waiting", "prefill", "decode",
    // "preempted", "not arrived", or its outcome).
    std::string state_at(std::int64_t t_ns) const;
    // The text of tokens [first, last) of prompt + output ("" without text).
    std::string text(std::int64_t first, std::int64_t last) const;
    // Output text generated up to `t_ns`.
    std::string output_text(std::int64_t until_ns) const;
};

enum class Counter : std::uint8_t {
    used_blocks,
    cached_blocks,
    free_blocks,
    fragmentation,   // share of slots in running requests' blocks that hold no entry
    kv_bytes_used,   // bytes in used blocks
    prefix_hit_rate, // cumulative hit tokens / prompt tokens at first admission
    running,         // sequences in the step
    gpu_used_bytes,  // device memory in use (total - free), on a GPU backend
    // Attached engines (kvscope attach), summed over sources:
    attached_resident, // blocks their KV events say are resident, every tier
    attached_stored,   // blocks stored per second
    attached_removed,  // blocks removed per second
    // The engine's offload tier: blocks it holds (block_offloaded/reloaded).
    tier_blocks,
    // A hybrid KV cache's used blocks: its whole-context groups', and its
    // sliding-window groups' (group_blocks events, summed by kind).
    global_group_blocks,
    window_group_blocks,
    count_
};

// A cached prefix block: the prefix tree's node. Children extend the prefix
// by one block.
struct PrefixNode {
    std::int32_t block = -1;
    std::int32_t parent = -1;     // index into prefix_nodes(), -1: a first block
    std::int64_t cached_by = -1;  // the request whose tokens it holds
    std::int32_t first_token = 0; // in that request
    std::int64_t cached_ns = 0;
    std::int64_t evicted_ns = -1; // -1: still cached (or in use) at the end
    std::int64_t reuses = 0;      // prefix hits on it
    std::uint64_t hash = 0;
    std::vector<std::int32_t> children;
};

class RunStore {
public:
    RunStore();

    // Events must come in time order, as the engine emits them.
    void append(const events::EngineEvent& event);
    // GPU tracks (kernels per stream, NVTX), from a recording.
    void add_gpu_track(SpanTrack track);

    std::int64_t event_count() const { return event_count_; }
    std::int64_t start_ns() const { return start_ns_; } // 0 when empty
    std::int64_t end_ns() const { return end_ns_; }     // the last event's time

    int total_blocks() const { return total_blocks_; }
    int block_size() const { return block_size_; }
    const std::string& run_config() const { return run_config_; } // JSON
    // The offload tier as the run config gives it: blocks it holds at most
    // (0: the run has none) and its medium ("memory", "file").
    std::int64_t tier_capacity() const { return tier_capacity_; }
    // A hybrid cache: a plain cache's blocks for each block of a
    // whole-context group (plain_cache_scale.h); 0 for a plain cache.
    double plain_cache_scale() const { return plain_cache_scale_; }
    // Speculative decoding's verifying passes so far (draft_verified events).
    std::int64_t draft_verifies() const { return draft_verifies_; }
    const std::string& tier_medium() const { return tier_medium_; }
    const std::string& kv_formats() const { return kv_formats_; } // "f16", "K q8_0, V q4_0"
    std::int64_t bytes_per_block() const { return bytes_per_block_; }
    // The last device-memory sample of a GPU run; device_total_bytes 0 otherwise.
    const events::DeviceMemory& device_memory() const { return device_memory_; }

    const std::vector<StepSpan>& steps() const { return steps_; }
    const SpanTrack& cpu_ops() const { return cpu_ops_; }
    const std::vector<SpanTrack>& gpu_tracks() const { return gpu_tracks_; }
    const std::vector<std::string>& names() const { return names_; }
    std::int32_t intern(const std::string& name);

    const std::vector<RequestRecord>& requests() const { return requests_; }
    const RequestRecord* request(std::int64_t id) const;

    const CounterTrack& counter(Counter which) const;
    // A hybrid KV cache's groups (group_blocks events), by group number:
    // each one's window and used blocks after each step. Empty for a plain
    // cache.
    struct KvGroupTrack {
        std::int32_t window = 0; // 0: the whole context
        CounterTrack used;
    };
    // Groups are numbered from 0; a damaged recording may skip numbers,
    // whose tracks stay empty.
    const std::vector<KvGroupTrack>& kv_groups() const { return kv_groups_; }
    // Groups with samples: 2 or more is a hybrid cache.
    int kv_group_count() const;
    const std::vector<PrefixNode>& prefix_nodes() const { return prefix_nodes_; }

    // Attached engines (kvscope attach): their state now and at any moment,
    // and how much of their history is kept.
    const AttachedHistory& attached() const { return attached_; }
    AttachedHistory& attached() { return attached_; }

    // The block map right after every event at or before `t_ns`.
    BlockMapState block_map_at(std::int64_t t_ns) const;
    // The block map after every event so far (cheap: kept up to date).
    const BlockMapState& block_map_now() const { return block_map_; }

private:
    RequestRecord& record(std::int64_t id);
    void open_lane(RequestRecord& r, std::int64_t t_ns, LaneState state);
    void close_lane(RequestRecord& r, std::int64_t t_ns);
    // The offload tier's capacity and medium, from run_config_.
    void read_tier_settings();
    void apply_block_event(const events::EngineEvent& event);
    void apply_request_event(const events::EngineEvent& event);
    void apply_run_event(const events::EngineEvent& event);
    // A hybrid cache's group after a step; summed by kind once the step's
    // last group is in (add_group_sums).
    void apply_group_blocks(const events::EngineEvent& event);
    void keep_for_replay(const events::EngineEvent& event);
    void add_counter(Counter which, std::int64_t t_ns, double value);

    std::int64_t event_count_ = 0;
    std::int64_t start_ns_ = 0;
    std::int64_t end_ns_ = 0;
    int total_blocks_ = 0;
    int block_size_ = 16;
    std::string run_config_;
    std::int64_t tier_capacity_ = 0;
    double plain_cache_scale_ = 0;
    std::int64_t draft_verifies_ = 0;
    std::string tier_medium_;
    std::string kv_formats_;
    std::int64_t bytes_per_block_ = 0;
    events::DeviceMemory device_memory_;

    std::vector<StepSpan> steps_;
    SpanTrack cpu_ops_;
    std::vector<SpanTrack> gpu_tracks_;
    std::vector<std::string> names_;
    std::unordered_map<std::string, std::int32_t> name_ids_;

    std::vector<RequestRecord> requests_;
    std::unordered_map<std::int64_t, std::size_t> request_index_;
    std::vector<CounterTrack> counters_;
    std::vector<KvGroupTrack> kv_groups_;
    // When the step whose group_blocks are coming began; -1: none pending.
    std::int64_t group_step_ns_ = -1;
    std::int32_t last_group_ = -1; // the group of the latest group_blocks
    void add_group_sums();
    std::int64_t hit_tokens_ = 0;
    std::int64_t prompt_tokens_ = 0;

    AttachedHistory attached_;

    std::vector<PrefixNode> prefix_nodes_;
    std::vector<std::int32_t> node_of_block_; // -1: the block holds no cached prefix

    // Block map replay: every block event, and the state after every N of
    // them (N: kCheckpointEvery, or the cache's block count when larger).
    static constexpr std::size_t kCheckpointEvery = 2048;
    std::vector<events::EngineEvent> block_events_;
    std::size_t checkpoint_every_ = 0;       // N: fixed at the first block event
    std::vector<BlockMapState> checkpoints_; // [i]: after block_events_[0 .. i*N)
    BlockMapState block_map_;
};

} // namespace kvscope::profiler
