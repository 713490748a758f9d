// What attached engines' rows (kvscope attach) said, now and at any moment
// of the run: their state, rebuilt from the latest checkpoint at or before a
// moment and the rows after it, and the counters their rows feed (resident
// blocks, and blocks stored and removed per second). RunStore holds one
// beside the run's own tracks; single-threaded like it.
//
// An attach may run for hours at hundreds of thousands of rows a second,
// so the history kept for scrubbing is bounded: a copy of the state (a
// checkpoint) every `rows_per_checkpoint` rows, the newest `checkpoints` of
// them, and the rows since the oldest. A moment before start_ns() shows the
// oldest state kept.
#pragma once

#include "engine/events/engine_event.h"
#include "profiler/attach/attached_events.h"
#include "profiler/store/counter_track.h"

#include <cstdint>
#include <deque>
#include <memory>

namespace kvscope::profiler {

class AttachedHistory {
public:
    AttachedHistory();

    // The state now, and at `t_ns`, as shared, immutable values a view may
    // lay out on a worker thread. When following snapshots (below), "now" is
    // the newest snapshot shown. shared_state() and state_at() keep copies
    // they made (the state while unchanged, the last moment asked for): call
    // them from one thread.
    const attach::AttachedState& state() const;
    std::shared_ptr<const attach::AttachedState> shared_state() const;
    std::shared_ptr<const attach::AttachedState> state_at(std::int64_t t_ns) const;
    // The oldest moment kept: the run's start unless rows were dropped.
    std::int64_t start_ns() const;
    // The engines' KV capacity in blocks, summed over sources (0: not given).
    std::int64_t capacity_blocks() const;

    void set_limits(std::size_t rows_per_checkpoint, std::size_t checkpoints);
    // A recording's replay (load_recording): every row is kept and the
    // history reaches back to the start; past `checkpoints` checkpoints,
    // every other one goes and their spacing doubles, so memory for states
    // stays bounded while scrubbing costs at most one spacing of rows.
    // At least 8 checkpoints are kept then; playing forward steps on from the
    // last moment asked for.
    void keep_whole();
    std::size_t rows_kept() const { return rows_.size(); }

    // A live attach keeps its own state, from the very batches its rows are
    // written from (attach::AttachSession::state()), and hands copies over
    // now and then. After follow_snapshots(), rows are kept (for scrubbing)
    // and counted (for the churn) but not read: the state shown is the
    // newest snapshot whose rows have all been appended, and snapshots are
    // the checkpoints. Reading 300,000 rows a second back from their JSON
    // was more than a window's thread can do.
    void follow_snapshots();
    bool following_snapshots() const { return following_snapshots_; }
    // The state right after the attach's first `rows` rows (every row it
    // emitted counts). Snapshots come in order of `rows`.
    void add_snapshot(std::uint64_t rows, std::shared_ptr<const attach::AttachedState> state);

    // Blocks resident in every tier, summed over sources; blocks stored and
    // removed per second.
    const CounterTrack& resident() const { return resident_; }
    const CounterTrack& stored() const { return stored_; }
    const CounterTrack& removed() const { return removed_; }

private:
    // Rows come through the store that holds the history, which counts them
    // among the run's events and knows when the run began.
    friend class RunStore;
    // Takes `event` if it is an attached engine's row (false otherwise).
    // Rows come in time order.
    bool append(const events::EngineEvent& event);
    // When the run began: the time of a moment before the first row.
    void set_run_start(std::int64_t t_ns) { run_start_ns_ = t_ns; }

    struct Snapshot {
        std::uint64_t rows = 0;
        std::shared_ptr<const attach::AttachedState> state;
    };
    struct Checkpoint {
        std::int64_t t_ns = 0; // the time of the last row it includes
        std::uint64_t row = 0; // the number of the first row after it
        std::shared_ptr<const attach::AttachedState> state;
    };
    struct Moment {
        std::int64_t t_ns = 0;
        std::uint64_t row = 0; // the first row after it
        std::shared_ptr<const attach::AttachedState> state;
    };

    void keep_row(const events::EngineEvent& event);
    void count_churn(const events::EngineEvent& event);
    void sample_resident(std::int64_t t_ns);
    void install_snapshot(Snapshot snapshot);
    // Keeps `state` as the checkpoint after the first `row` rows; beyond the
    // limit, drops the oldest checkpoint and (a few per row appended) the
    // rows only it needed.
    void add_checkpoint(std::uint64_t row, std::shared_ptr<const attach::AttachedState> state);
    const events::EngineEvent& row(std::uint64_t number) const {
        return rows_[static_cast<std::size_t>(number - rows_base_)];
    }

    std::int64_t run_start_ns_ = 0;
    attach::AttachedState state_; // read from the rows, unless following snapshots
    mutable std::shared_ptr<const attach::AttachedState> state_copy_; // until it changes
    bool following_snapshots_ = false;
    std::shared_ptr<const attach::AttachedState> followed_; // the newest snapshot installed
    std::deque<Snapshot> pending_snapshots_;                // their rows not all appended yet
    mutable Moment last_moment_;                            // the last state_at() built

    // Rows are numbered from 0 in the order appended.
    std::uint64_t rows_seen_ = 0;
    std::deque<Checkpoint> checkpoints_;
    // Rows from rows_base_ on: since the oldest checkpoint, and those before
    // trim_to_ that go a few per row appended (a hundred thousand dropped at
    // once stalled the window).
    std::deque<events::EngineEvent> rows_;
    std::uint64_t rows_base_ = 0;
    std::uint64_t trim_to_ = 0;
    bool dropped_ = false;
    bool whole_ = false;
    std::size_t rows_per_checkpoint_ = 100'000;
    std::size_t checkpoints_kept_ = 4;

    CounterTrack resident_;
    CounterTrack stored_;
    CounterTrack removed_;
    std::int64_t resident_sampled_ns_ = -1; // the last residency sample
    std::int64_t churn_bucket_ns_ = -1;     // start of the churn bucket being counted
    std::int64_t churn_stored_ = 0;
    std::int64_t churn_removed_ = 0;
};

} // namespace kvscope::profiler
