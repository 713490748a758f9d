#include "profiler/store/run_store.h"

#include "engine/events/typed_events.h"
#include "engine/kv/kv_groups.h"
#include "profiler/store/plain_cache_scale.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace kvscope::profiler {

using events::EngineEvent;
using events::EventKind;

StepPhase StepSpan::phase() const {
    if (phase_code >= static_cast<int>(StepPhase::prefill) &&
        phase_code <= static_cast<int>(StepPhase::mixed)) {
        return static_cast<StepPhase>(phase_code);
    }
    // Older recordings: one token per sequence is decoding; a completed
    // prompt also yields a token, so only "no single-token chunk" is certain.
    if (sequences == 0) {
        return StepPhase::idle;
    }
    if (scheduled_tokens == sequences) {
        return StepPhase::decode;
    }
    return decode_tokens > 0 && prefill_tokens > 0 && decode_tokens == sequences
               ? StepPhase::prefill
               : StepPhase::mixed;
}

std::string_view lane_state_name(LaneState state) {
    switch (state) {
    case LaneState::waiting:
        return "waiting";
    case LaneState::prefill:
        return "prefill";
    case LaneState::decode:
        return "decode";
    case LaneState::preempted:
        return "preempted";
    }
    return "waiting";
}

double RequestRecord::ttft_ms() const {
    if (first_token_ns < 0 || arrival_ns < 0) {
        return -1;
    }
    return static_cast<double>(first_token_ns - arrival_ns) * 1e-6;
}

double RequestRecord::tpot_ms() const {
    if (output_times_ns.size() >= 2) {
        return static_cast<double>(output_times_ns.back() - output_times_ns.front()) * 1e-6 /
               static_cast<double>(output_times_ns.size() - 1);
    }
    // Recordings without token events: finish time over the tokens after the first.
    if (generated >= 2 && first_token_ns >= 0 && end_ns >= first_token_ns) {
        return static_cast<double>(end_ns - first_token_ns) * 1e-6 /
               static_cast<double>(generated - 1);
    }
    return -1;
}

std::string RequestRecord::state_at(std::int64_t t_ns) const {
    if (arrival_ns < 0 || t_ns < arrival_ns) {
        return "not arrived";
    }
    if (end_ns >= 0 && t_ns >= end_ns) {
        return outcome.empty() ? "finished" : outcome;
    }
    // The last lane that began at or before t.
    const auto lane =
        std::upper_bound(lanes.begin(), lanes.end(), t_ns,
                         [](std::int64_t t, const LaneSpan& span) { return t < span.begin_ns; });
    if (lane == lanes.begin()) {
        return "waiting";
    }
    return std::string(lane_state_name(std::prev(lane)->state));
}

std::string RequestRecord::text(std::int64_t first, std::int64_t last) const {
    const auto prompt = static_cast<std::int64_t>(prompt_pieces.size());
    const auto total = prompt + static_cast<std::int64_t>(output_pieces.size());
    first = std::max<std::int64_t>(0, first);
    last = std::min(last, total);
    std::string text;
    for (std::int64_t i = first; i < last; ++i) {
        text += i < prompt ? prompt_pieces[static_cast<std::size_t>(i)]
                           : output_pieces[static_cast<std::size_t>(i - prompt)];
    }
    return text;
}

std::string RequestRecord::output_text(std::int64_t until_ns) const {
    std::string text;
    for (std::size_t i = 0; i < output_pieces.size() && output_times_ns[i] <= until_ns; ++i) {
        text += output_pieces[i];
    }
    return text;
}

RunStore::RunStore()
    : counters_(static_cast<std::size_t>(Counter::count_)) {
    cpu_ops_.name = "CPU ops";
    const auto name = [this](Counter c, const char* text, const char* unit) {
        counters_[static_cast<std::size_t>(c)].name = text;
        counters_[static_cast<std::size_t>(c)].unit = unit;
    };
    name(Counter::used_blocks, "Used blocks", "blocks");
    name(Counter::cached_blocks, "Cached blocks", "blocks");
    name(Counter::free_blocks, "Free blocks", "blocks");
    name(Counter::fragmentation, "Fragmentation", "share");
    name(Counter::kv_bytes_used, "KV bytes used", "bytes");
    name(Counter::prefix_hit_rate, "Prefix hit rate", "share");
    name(Counter::running, "Sequences in step", "sequences");
    name(Counter::gpu_used_bytes, "GPU memory used", "bytes");
    name(Counter::tier_blocks, "Offload tier blocks", "blocks");
    name(Counter::global_group_blocks, "Global groups' blocks", "blocks");
    name(Counter::window_group_blocks, "Window groups' blocks", "blocks");
}

std::int32_t RunStore::intern(const std::string& name) {
    const auto [it, inserted] =
        name_ids_.try_emplace(name, static_cast<std::int32_t>(names_.size()));
    if (inserted) {
        names_.push_back(name);
    }
    return it->second;
}

const RequestRecord* RunStore::request(std::int64_t id) const {
    const auto it = request_index_.find(id);
    return it == request_index_.end() ? nullptr : &requests_[it->second];
}

RequestRecord& RunStore::record(std::int64_t id) {
    const auto [it, inserted] = request_index_.try_emplace(id, requests_.size());
    if (inserted) {
        requests_.emplace_back().id = id;
    }
    return requests_[it->second];
}

const CounterTrack& RunStore::counter(Counter which) const {
    switch (which) {
    case Counter::attached_resident:
        return attached_.resident();
    case Counter::attached_stored:
        return attached_.stored();
    case Counter::attached_removed:
        return attached_.removed();
    default:
        return counters_[static_cast<std::size_t>(which)];
    }
}

int RunStore::kv_group_count() const {
    return static_cast<int>(
        std::count_if(kv_groups_.begin(), kv_groups_.end(),
                      [](const KvGroupTrack& g) { return !g.used.values.empty(); }));
}

void RunStore::add_group_sums() {
    double global = 0;
    double window = 0;
    bool any_window = false;
    for (const KvGroupTrack& group : kv_groups_) {
        if (group.used.values.empty()) {
            continue;
        }
        (group.window > 0 ? window : global) += group.used.values.back();
        any_window = any_window || group.window > 0;
    }
    add_counter(Counter::global_group_blocks, group_step_ns_, global);
    if (any_window) {
        add_counter(Counter::window_group_blocks, group_step_ns_, window);
    }
    group_step_ns_ = -1;
}

void RunStore::add_counter(Counter which, std::int64_t t_ns, double value) {
    counters_[static_cast<std::size_t>(which)].add(t_ns, value);
}

void RunStore::open_lane(RequestRecord& r, std::int64_t t_ns, LaneState state) {
    close_lane(r, t_ns);
    r.lanes.push_back({t_ns, -1, state});
}

void RunStore::close_lane(RequestRecord& r, std::int64_t t_ns) {
    if (!r.lanes.empty() && r.lanes.back().end_ns < 0) {
        r.lanes.back().end_ns = t_ns;
    }
}

void RunStore::add_gpu_track(SpanTrack track) {
    for (const Span& span : track.spans) {
        start_ns_ = start_ns_ == 0 ? span.begin_ns : std::min(start_ns_, span.begin_ns);
        end_ns_ = std::max(end_ns_, span.end_ns);
    }
    attached_.set_run_start(start_ns_);
    gpu_tracks_.push_back(std::move(track));
}

// Keeps a block-map event for block_map_at(): checkpoint k is the map
// after the first k * checkpoint_every_ of them.
void RunStore::keep_for_replay(const EngineEvent& event) {
    // A checkpoint costs a copy of every block: space them by the cache's
    // size too, so checkpoints stay a fraction of the events they stand for.
    const std::size_t every =
        std::max<std::size_t>(kCheckpointEvery, static_cast<std::size_t>(total_blocks_));
    if (checkpoint_every_ == 0) {
        checkpoint_every_ = every;
    }
    if (block_events_.size() % checkpoint_every_ == 0) {
        checkpoints_.push_back(block_map_);
    }
    EngineEvent compact = event;
    compact.text.clear();
    block_events_.push_back(std::move(compact));
    block_map_.apply(event);
}

void RunStore::read_tier_settings() {
    tier_capacity_ = 0;
    tier_medium_.clear();
    const nlohmann::json settings = nlohmann::json::parse(run_config_, nullptr, false);
    if (!settings.is_object()) {
        return; // an older or foreign recording: no tier to show
    }
    try {
        const std::string medium = settings.value("offload_tier", std::string("none"));
        const std::int64_t capacity = settings.value("offload_blocks", std::int64_t{0});
        if (medium != "none" && capacity > 0) {
            tier_capacity_ = capacity;
            tier_medium_ = medium;
        }
    } catch (const nlohmann::json::exception&) {
        // Settings of another shape: the run shows no tier rather than fail.
    }
}

void RunStore::apply_block_event(const EngineEvent& event) {
    if (event.block < 0) {
        return; // not a block the engine could have named
    }
    keep_for_replay(event);

    const auto block = static_cast<std::size_t>(event.block);
    if (block >= node_of_block_.size()) {
        node_of_block_.resize(block + 1, -1);
    }
    std::int32_t& node = node_of_block_[block];
    switch (event.kind) {
    case EventKind::block_cached: {
        const auto cached = events::as<events::BlockCached>(event);
        PrefixNode n;
        n.block = cached.block;
        n.cached_by = cached.request;
        n.first_token = static_cast<std::int32_t>(cached.first_token);
        n.cached_ns = event.time_ns;
        n.hash = cached.hash;
        // The parent is the block before it in the same request's table.
        const std::int32_t before = block_map_.block_before(event.request, event.block);
        if (before >= 0 && static_cast<std::size_t>(before) < node_of_block_.size()) {
            n.parent = node_of_block_[static_cast<std::size_t>(before)];
        }
        node = static_cast<std::int32_t>(prefix_nodes_.size());
        if (n.parent >= 0) {
            prefix_nodes_[static_cast<std::size_t>(n.parent)].children.push_back(node);
        }
        prefix_nodes_.push_back(std::move(n));
        break;
    }
    case EventKind::block_shared:
        if (node >= 0) {
            ++prefix_nodes_[static_cast<std::size_t>(node)].reuses;
        }
        break;
    case EventKind::block_offloaded:
    case EventKind::block_reloaded:
        add_counter(Counter::tier_blocks, event.time_ns,
                    static_cast<double>(block_map_.tier_blocks()));
        break;
    case EventKind::block_evicted:
    case EventKind::block_allocated:
        if (node >= 0) {
            prefix_nodes_[static_cast<std::size_t>(node)].evicted_ns = event.time_ns;
            node = -1;
        }
        break;
    default:
        break;
    }
}

namespace {
bool is_request_event(EventKind kind) {
    switch (kind) {
    case EventKind::request_arrived:
    case EventKind::request_admitted:
    case EventKind::first_token:
    case EventKind::token_sampled:
    case EventKind::request_preempted:
    case EventKind::request_finished:
    case EventKind::request_aborted:
    case EventKind::request_rejected:
    case EventKind::tokens_evicted:
        return true;
    default:
        return false;
    }
}
} // namespace

void RunStore::append(const EngineEvent& event) {
    if (event_count_ == 0 || (start_ns_ == 0 && event.time_ns > 0)) {
        start_ns_ = event.time_ns;
        attached_.set_run_start(start_ns_);
    }
    ++event_count_;
    end_ns_ = std::max(end_ns_, event.time_ns); // an op slice's end: below
    if (group_step_ns_ >= 0 && event.kind != EventKind::group_blocks) {
        add_group_sums(); // the step's groups all came (they come together)
    }
    if (BlockMapState::is_block_event(event.kind)) {
        apply_block_event(event);
        return;
    }
    if (event.kind == EventKind::tier_dropped) {
        // Clears a block's tier mark and shrinks the tier: replayed like a
        // block event.
        keep_for_replay(event);
        add_counter(Counter::tier_blocks, event.time_ns,
                    static_cast<double>(block_map_.tier_blocks()));
        return;
    }
    if (event.kind == EventKind::draft_verified) {
        // Marks its rolled-back slots in the block map, replayed like a
        // block event between checkpoints, and counts toward its step.
        keep_for_replay(event);
        ++draft_verifies_;
        if (!steps_.empty() && steps_.back().end_ns < 0) {
            const auto verified = events::as<events::DraftVerified>(event);
            steps_.back().drafted += static_cast<std::int32_t>(verified.drafted);
            steps_.back().accepted += static_cast<std::int32_t>(verified.accepted);
        }
        return;
    }
    if (attached_.append(event)) {
        return;
    }
    if (is_request_event(event.kind)) {
        apply_request_event(event);
    } else {
        apply_run_event(event);
    }
}

// A request's record and its lanes.
void RunStore::apply_request_event(const EngineEvent& event) {
    const std::int64_t t = event.time_ns;
    switch (event.kind) {
    case EventKind::request_arrived: {
        const auto arrived = events::as<events::RequestArrived>(event);
        RequestRecord& r = record(event.request);
        r.arrival_ns = t;
        r.prompt_tokens = static_cast<std::int32_t>(arrived.prompt_tokens);
        r.prompt_pieces = events::decode_pieces(arrived.prompt_pieces);
        open_lane(r, t, LaneState::waiting);
        break;
    }
    case EventKind::request_admitted: {
        const auto admitted = events::as<events::RequestAdmitted>(event);
        RequestRecord& r = record(event.request);
        if (r.admitted_ns < 0) {
            r.admitted_ns = t;
            r.cached_tokens = static_cast<std::int32_t>(admitted.cached_tokens);
            r.computed_tokens = static_cast<std::int32_t>(admitted.computed_tokens);
            hit_tokens_ += admitted.cached_tokens;
            prompt_tokens_ += r.prompt_tokens;
            if (prompt_tokens_ > 0) {
                add_counter(Counter::prefix_hit_rate, t,
                            static_cast<double>(hit_tokens_) / static_cast<double>(prompt_tokens_));
            }
        }
        open_lane(r, t, LaneState::prefill);
        break;
    }
    case EventKind::first_token: {
        RequestRecord& r = record(event.request);
        r.first_token_ns = t;
        open_lane(r, t, LaneState::decode);
        break;
    }
    case EventKind::token_sampled: {
        auto sampled = events::as<events::TokenSampled>(event);
        RequestRecord& r = record(event.request);
        r.output_pieces.push_back(std::move(sampled.piece));
        r.output_times_ns.push_back(t);
        r.generated = static_cast<std::int32_t>(sampled.generated);
        // Back to decoding after a preemption's recompute.
        if (!r.lanes.empty() && r.lanes.back().state == LaneState::prefill &&
            r.first_token_ns >= 0) {
            open_lane(r, t, LaneState::decode);
        }
        break;
    }
    case EventKind::request_preempted: {
        RequestRecord& r = record(event.request);
        ++r.preemptions;
        open_lane(r, t, LaneState::preempted);
        break;
    }
    case EventKind::request_finished:
    case EventKind::request_aborted:
    case EventKind::request_rejected: {
        RequestRecord& r = record(event.request);
        close_lane(r, t);
        r.end_ns = t;
        r.outcome = event.kind == EventKind::request_finished  ? "finished"
                    : event.kind == EventKind::request_aborted ? "aborted"
                                                               : "rejected";
        if (event.kind == EventKind::request_finished) {
            const auto finished = events::as<events::RequestFinished>(event);
            r.generated = static_cast<std::int32_t>(finished.generated_tokens);
            r.reason = finished.reason;
        } else if (event.kind == EventKind::request_rejected) {
            r.reason = events::as<events::RequestRejected>(event).reason;
        } else {
            r.reason.clear();
        }
        break;
    }
    case EventKind::tokens_evicted:
        record(event.request).evicted_tokens += events::as<events::TokensEvicted>(event).tokens;
        break;
    default:
        break;
    }
}

// The run's settings, steps, CPU ops and counters.
void RunStore::apply_run_event(const EngineEvent& event) {
    const std::int64_t t = event.time_ns;
    switch (event.kind) {
    case EventKind::run_config: {
        auto config = events::as<events::RunConfig>(event);
        total_blocks_ = static_cast<int>(config.blocks);
        block_size_ = static_cast<int>(config.block_size);
        run_config_ = std::move(config.settings);
        read_tier_settings();
        plain_cache_scale_ = profiler::plain_cache_scale(run_config_);
        if (block_events_.empty()) {
            block_map_ = BlockMapState(total_blocks_, block_size_);
        }
        break;
    }
    case EventKind::step_begin: {
        const auto begin = events::as<events::StepBegin>(event);
        StepSpan step;
        step.begin_ns = t;
        step.end_ns = -1;
        step.step = begin.step;
        step.scheduled_tokens = static_cast<std::int32_t>(begin.scheduled_tokens);
        step.sequences = static_cast<std::int32_t>(begin.sequences);
        step.phase_code = static_cast<std::int8_t>(begin.phase);
        steps_.push_back(step);
        add_counter(Counter::running, t, static_cast<double>(begin.sequences));
        break;
    }
    case EventKind::step_end:
        if (!steps_.empty() && steps_.back().end_ns < 0) {
            const auto end = events::as<events::StepEnd>(event);
            StepSpan& step = steps_.back();
            step.end_ns = t;
            step.prefill_tokens = static_cast<std::int32_t>(end.prefill_tokens);
            step.decode_tokens = static_cast<std::int32_t>(end.decode_tokens);
        }
        break;
    case EventKind::op_slice: {
        const auto op = events::as<events::OpSlice>(event);
        end_ns_ = std::max(end_ns_, op.end_ns);
        cpu_ops_.spans.push_back(
            {t, op.end_ns, intern(op.op), static_cast<std::int32_t>(op.layer)});
        break;
    }
    case EventKind::cache_fill: {
        const auto fill = events::as<events::CacheFill>(event);
        add_counter(Counter::fragmentation, t,
                    fill.capacity > 0 ? 1.0 - static_cast<double>(fill.entries) /
                                                  static_cast<double>(fill.capacity)
                                      : 0.0);
        break;
    }
    case EventKind::memory_sample: {
        const auto memory = events::as<events::MemorySample>(event);
        add_counter(Counter::used_blocks, t, static_cast<double>(memory.used_blocks));
        add_counter(Counter::cached_blocks, t, static_cast<double>(memory.cached_blocks));
        add_counter(Counter::free_blocks, t, static_cast<double>(memory.free_blocks));
        if (total_blocks_ == 0) {
            total_blocks_ = static_cast<int>(memory.total_blocks);
        }
        break;
    }
    case EventKind::kv_bytes: {
        auto bytes = events::as<events::KvBytes>(event);
        add_counter(Counter::kv_bytes_used, t, static_cast<double>(bytes.used_bytes));
        bytes_per_block_ = bytes.bytes_per_block;
        kv_formats_ = std::move(bytes.formats);
        break;
    }
    case EventKind::device_memory: {
        auto device = events::as<events::DeviceMemory>(event);
        add_counter(Counter::gpu_used_bytes, t, static_cast<double>(device.device_used_bytes));
        device_memory_ = std::move(device);
        break;
    }
    case EventKind::group_blocks:
        apply_group_blocks(event);
        break;
    default:
        break;
    }
}

void RunStore::apply_group_blocks(const EngineEvent& event) {
    const std::int64_t t = event.time_ns;
    const auto group = events::as<events::GroupBlocks>(event);
    if (group.group < 0 || group.group > 4096) {
        return; // a damaged row: no group has that number
    }
    if (group_step_ns_ >= 0 && group.group <= last_group_) {
        add_group_sums(); // the next step's groups begin
    }
    last_group_ = group.group;
    if (kv_groups_.size() <= static_cast<std::size_t>(group.group)) {
        kv_groups_.resize(static_cast<std::size_t>(group.group) + 1);
    }
    KvGroupTrack& track = kv_groups_[static_cast<std::size_t>(group.group)];
    track.window = group.window;
    track.used.name = kv::kv_group_kind(group.window) + " group " + std::to_string(group.group);
    track.used.unit = "blocks";
    track.used.add(t, static_cast<double>(group.used_blocks));
    group_step_ns_ = group_step_ns_ < 0 ? t : group_step_ns_;
}

BlockMapState RunStore::block_map_at(std::int64_t t_ns) const {
    // Block events after t are the first with a later time.
    const auto end = std::upper_bound(
        block_events_.begin(), block_events_.end(), t_ns,
        [](std::int64_t t, const EngineEvent& event) { return t < event.time_ns; });
    const auto count = static_cast<std::size_t>(end - block_events_.begin());
    if (count == block_events_.size()) {
        return block_map_;
    }
    const std::size_t checkpoint = count / checkpoint_every_;
    BlockMapState state = checkpoints_[checkpoint];
    for (std::size_t i = checkpoint * checkpoint_every_; i < count; ++i) {
        state.apply(block_events_[i]);
    }
    return state;
}

} // namespace kvscope::profiler
