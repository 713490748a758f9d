#include "profiler/store/attached_history.h"

#include <algorithm>

namespace kvscope::profiler {

using events::EngineEvent;
using events::EventKind;

namespace {
// A busy cluster stores and removes blocks many thousand times a second: the
// counters sample residency at most this often (and at every status row),
// and count churn in buckets of this length.
constexpr std::int64_t kResidentSampleNs = 50'000'000;
constexpr std::int64_t kChurnBucketNs = 500'000'000;
} // namespace

AttachedHistory::AttachedHistory() {
    resident_ = {"Resident blocks", "blocks", {}, {}};
    stored_ = {"Blocks stored", "blocks/s", {}, {}};
    removed_ = {"Blocks removed", "blocks/s", {}, {}};
}

bool AttachedHistory::append(const EngineEvent& event) {
    if (following_snapshots_ ? !attach::is_attached_kind(event.kind) : !state_.apply(event)) {
        return false;
    }
    keep_row(event);
    count_churn(event);
    sample_resident(event.time_ns);
    return true;
}

void AttachedHistory::keep_row(const EngineEvent& event) {
    rows_.push_back(event);
    ++rows_seen_;
    // Rows are appended one at a time, so two dropped per row keep up.
    for (int i = 0; i < 2 && rows_base_ < trim_to_; ++i) {
        rows_.pop_front();
        ++rows_base_;
    }
    if (following_snapshots_) {
        while (!pending_snapshots_.empty() && pending_snapshots_.front().rows <= rows_seen_) {
            Snapshot snapshot = std::move(pending_snapshots_.front());
            pending_snapshots_.pop_front();
            install_snapshot(std::move(snapshot));
        }
    } else {
        state_copy_.reset();
        const std::uint64_t last_checkpoint_row =
            checkpoints_.empty() ? 0 : checkpoints_.back().row;
        if (rows_seen_ - last_checkpoint_row >= rows_per_checkpoint_) {
            add_checkpoint(rows_seen_, shared_state());
        }
    }
}

void AttachedHistory::count_churn(const EngineEvent& event) {
    // A bucket's counts become one rate sample when the next begins.
    const std::int64_t t = event.time_ns;
    if (churn_bucket_ns_ < 0) {
        churn_bucket_ns_ = t;
    }
    if (t >= churn_bucket_ns_ + kChurnBucketNs) {
        const double per_second = 1e9 / static_cast<double>(kChurnBucketNs);
        stored_.add(churn_bucket_ns_, static_cast<double>(churn_stored_) * per_second);
        removed_.add(churn_bucket_ns_, static_cast<double>(churn_removed_) * per_second);
        // Quiet buckets in between read as zero.
        const std::int64_t skipped = (t - churn_bucket_ns_) / kChurnBucketNs;
        if (skipped > 1) {
            stored_.add(churn_bucket_ns_ + kChurnBucketNs, 0);
            removed_.add(churn_bucket_ns_ + kChurnBucketNs, 0);
        }
        churn_bucket_ns_ += skipped * kChurnBucketNs;
        churn_stored_ = 0;
        churn_removed_ = 0;
    }
    churn_stored_ += event.kind == EventKind::attached_block_stored ? 1 : 0;
    churn_removed_ += event.kind == EventKind::attached_block_removed ? 1 : 0;
}

void AttachedHistory::sample_resident(std::int64_t t) {
    // At most one residency sample per kResidentSampleNs: within it, the
    // last sample moves to this time and takes its value, so the track
    // always ends on the latest state.
    const auto resident = static_cast<double>(state().resident_blocks());
    if (resident_sampled_ns_ >= 0 && t < resident_sampled_ns_ + kResidentSampleNs &&
        !resident_.t_ns.empty()) {
        resident_.t_ns.back() = t;
        resident_.values.back() = resident;
    } else {
        resident_.add(t, resident);
        resident_sampled_ns_ = t;
    }
}

void AttachedHistory::set_limits(std::size_t rows_per_checkpoint, std::size_t checkpoints) {
    rows_per_checkpoint_ = std::max<std::size_t>(rows_per_checkpoint, 1);
    checkpoints_kept_ = std::max<std::size_t>(checkpoints, 1);
}

void AttachedHistory::keep_whole() {
    whole_ = true;
    // More copies than live: a recording's spacing grows with its length.
    checkpoints_kept_ = std::max<std::size_t>(checkpoints_kept_, 8);
}

std::int64_t AttachedHistory::start_ns() const {
    return dropped_ ? checkpoints_.front().t_ns : run_start_ns_;
}

const attach::AttachedState& AttachedHistory::state() const {
    return following_snapshots_ ? *followed_ : state_;
}

std::shared_ptr<const attach::AttachedState> AttachedHistory::shared_state() const {
    if (following_snapshots_) {
        return followed_;
    }
    if (!state_copy_) {
        state_copy_ = std::make_shared<const attach::AttachedState>(state_);
    }
    return state_copy_;
}

void AttachedHistory::follow_snapshots() {
    if (!following_snapshots_) {
        followed_ = shared_state(); // what the rows said so far
        following_snapshots_ = true;
    }
}

void AttachedHistory::add_snapshot(std::uint64_t rows,
                                   std::shared_ptr<const attach::AttachedState> state) {
    if (!following_snapshots_ || !state) {
        return;
    }
    Snapshot snapshot{rows, std::move(state)};
    if (rows <= rows_seen_) {
        install_snapshot(std::move(snapshot));
        // Its rows came first: the residency track ends on it now.
        if (!rows_.empty()) {
            sample_resident(rows_.back().time_ns);
        }
    } else {
        // A window behind its rows: only the newest waiting snapshot matters
        // for what is shown; older ones would be shown for a moment each.
        while (pending_snapshots_.size() >= 2) {
            pending_snapshots_.pop_front();
        }
        pending_snapshots_.push_back(std::move(snapshot));
    }
}

void AttachedHistory::install_snapshot(Snapshot snapshot) {
    followed_ = std::move(snapshot.state);
    const std::uint64_t at_row = snapshot.rows;
    const std::uint64_t last_checkpoint_row = checkpoints_.empty() ? 0 : checkpoints_.back().row;
    // A snapshot handed over late may follow rows no longer kept: no checkpoint then.
    if (at_row >= rows_base_ && at_row >= last_checkpoint_row + rows_per_checkpoint_) {
        add_checkpoint(at_row, followed_);
    }
}

void AttachedHistory::add_checkpoint(std::uint64_t at_row,
                                     std::shared_ptr<const attach::AttachedState> state) {
    const std::int64_t t_ns = at_row > rows_base_ ? row(at_row - 1).time_ns : run_start_ns_;
    checkpoints_.push_back({t_ns, at_row, std::move(state)});
    if (whole_ && checkpoints_.size() > checkpoints_kept_) {
        // Checkpoints every N rows become every 2N: the 2nd, 4th, ... stay.
        std::deque<Checkpoint> thinned;
        for (std::size_t i = 1; i < checkpoints_.size(); i += 2) {
            thinned.push_back(std::move(checkpoints_[i]));
        }
        checkpoints_ = std::move(thinned);
        rows_per_checkpoint_ *= 2;
    } else if (checkpoints_.size() > checkpoints_kept_) {
        // The oldest checkpoint goes, and the rows only it needed.
        checkpoints_.pop_front();
        trim_to_ = checkpoints_.front().row;
        dropped_ = true;
    }
}

std::shared_ptr<const attach::AttachedState> AttachedHistory::state_at(std::int64_t t_ns) const {
    if (rows_.empty() || rows_.back().time_ns <= t_ns) {
        return shared_state();
    }
    // From the latest checkpoint at or before t, then the rows up to t.
    // Before every checkpoint: from nothing (the run's start), or, when
    // older rows are gone, the oldest moment kept.
    const Checkpoint* from = nullptr;
    for (const Checkpoint& checkpoint : checkpoints_) {
        if (checkpoint.t_ns > t_ns) {
            break;
        }
        from = &checkpoint;
    }
    if (from == nullptr && dropped_) {
        from = &checkpoints_.front();
        t_ns = from->t_ns; // and the rest of the rows stamped with its time
    }
    std::uint64_t next = from != nullptr ? from->row : rows_base_;
    std::shared_ptr<const attach::AttachedState> start =
        from != nullptr ? from->state : std::make_shared<const attach::AttachedState>();
    // Playing a replay forward steps on from the last moment asked for, not
    // from the checkpoint again (their spacing grows with a recording).
    if (last_moment_.state && last_moment_.t_ns <= t_ns && last_moment_.row >= next &&
        last_moment_.row >= rows_base_) {
        next = last_moment_.row;
        start = last_moment_.state;
    }
    const std::uint64_t end = rows_seen_;
    if (next == end || row(next).time_ns > t_ns) {
        return start; // nothing to add: shared, not copied
    }
    auto state = std::make_shared<attach::AttachedState>(*start);
    for (; next < end && row(next).time_ns <= t_ns; ++next) {
        state->apply(row(next));
    }
    last_moment_ = {t_ns, next, state};
    return state;
}

std::int64_t AttachedHistory::capacity_blocks() const {
    std::int64_t total = 0;
    for (const auto& [id, source] : state().sources()) {
        total += source.capacity_blocks();
    }
    return total;
}

} // namespace kvscope::profiler
