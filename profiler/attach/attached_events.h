// What an attached source's batches become in kvscope's typed events (one
// row per block, engine/events/typed_events.h), and the state those rows
// imply read back. Both `kvscope attach` while it runs and a replayed
// recording build their view of an attached engine from the same rows, so
// what is shown live is what a recording shows later.
#pragma once

#include "engine/events/engine_event.h"
#include "engine/events/typed_events.h"
#include "profiler/attach/attached_metrics.h"
#include "profiler/attach/kv_events.h"
#include "profiler/attach/resident_blocks.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kvscope::attach {

// kv_event_source.h (ZeroMQ) stays out of the views that include this.
struct SourceBatch;
struct KvEventSourceOptions;
struct TrtllmSourceOptions;
struct SourceCounts;
struct MetricsEndpointStatus; // metrics_poller.h

// "0x" + 16 hex digits: an integer hash; an even number of hex digits (at
// most 64): raw bytes. The inverse of BlockHash::hex().
std::optional<BlockHash> parse_block_hash(std::string_view text);

// Appends the rows of one batch from source `source` (times left 0 for the
// caller to stamp): a restarted publisher first clears the source, then each
// stored or removed block gets a row, AllBlocksCleared a clear.
void append_typed_events(std::int64_t source, const SourceBatch& batch,
                         std::vector<events::EngineEvent>& out);

// The one-block event a row holds; none for a row that does not parse (a
// recording from elsewhere, or damaged).
std::optional<StoredBlocks> stored_block_of(const events::AttachedBlockStored& row);
std::optional<RemovedBlocks> removed_block_of(const events::AttachedBlockRemoved& row);
std::optional<MovedBlocks> moved_block_of(const events::AttachedBlockMoved& row);

// The JSON of a source's endpoints for SourceAttached (and its metrics URL,
// when it has one).
std::string endpoints_json(const KvEventSourceOptions& options,
                           const std::string& metrics_url = {});
// The same for a TensorRT-LLM server polled over HTTP: its URL as the
// endpoint, and "transport": "trtllm-http".
std::string trtllm_endpoint_json(const TrtllmSourceOptions& options,
                                 const std::string& metrics_url = {});
// The JSON of a source's counters for AttachedStatus, with its metrics
// URL's polling when it has one.
std::string counts_json(const SourceCounts& counts, const std::string& last_error,
                        const MetricsEndpointStatus* metrics = nullptr);

// Whether AttachedState::apply() takes rows of this kind (without reading them).
bool is_attached_kind(events::EventKind kind);

// Every attached source a run's rows describe: what was said when attaching,
// the resident blocks, the churn so far, the latest status and metrics.
class AttachedState {
public:
    struct Source {
        events::SourceAttached info{};
        ResidentBlocks blocks;
        events::AttachedStatus status{};
        std::int64_t last_event_ns = 0; // the last row's time
        std::int64_t bad_rows = 0;      // rows whose detail did not parse
        MetricSeriesMap metrics;        // each metric's first and latest sample

        // The KV capacity in blocks: as given when attaching, else the
        // latest vllm:cache_config_info's num_gpu_blocks; 0 when unknown.
        std::int64_t capacity_blocks() const;
        // Times events were lost and the blocks dropped (an attached_cleared
        // row, cause events_lost): a lost BlockRemoved would otherwise leave
        // its block here for ever, and under sustained loss (a reader slower
        // than the stream) such phantoms grew without bound. After a clear,
        // every block held was stored since: what is shown may lack blocks,
        // but holds none that are gone.
        std::int64_t loss_clears = 0;
    };

    // Applies an attached row; false (and nothing done) for other kinds.
    bool apply(const events::EngineEvent& event);
    // Applies what append_typed_events(source, batch) makes of a batch, as
    // its rows would, without writing them out and reading them back: the
    // attach loop's path, where reading its own rows' JSON back cost more
    // than all the rest. `time_ns`: when the rows are stamped. Replay and
    // the live loop end in the same ResidentBlocks calls, with the same
    // values (tst_attached_events checks the two states are equal).
    void apply(std::int64_t source, const SourceBatch& batch, std::int64_t time_ns);

    const std::map<std::int64_t, Source>& sources() const { return sources_; }
    const Source* source(std::int64_t id) const;
    bool empty() const { return sources_.empty(); }
    // Blocks resident over every source and tier.
    std::size_t resident_blocks() const;

private:
    Source& at(std::int64_t id);
    std::map<std::int64_t, Source> sources_;
};

} // namespace kvscope::attach
