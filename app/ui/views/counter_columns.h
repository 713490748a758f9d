// A counter track reduced to one bucket per pixel column: the lowest,
// highest and last sample in each, which is all a step chart needs to look
// exactly like one drawn sample by sample. A summary of every 64 samples'
// range (kept up to date as a live track grows) lets a column of thousands
// of samples be read in a few dozen steps, so a million samples cost about
// what a thousand do.
#pragma once

#include "app/ui/views/time_axis.h"
#include "profiler/store/run_store.h"

#include <cstddef>
#include <vector>

namespace kvscope::ui {

struct CounterColumn {
    double low = 0;
    double high = 0;
    double last = 0;
    bool has_samples = false;
};

struct CounterColumns {
    // The value in effect at the left edge (the last sample before it);
    // has_carried is false when the track starts inside the view.
    double carried = 0;
    bool has_carried = false;
    std::vector<CounterColumn> columns; // ceil(axis.width()) of them
};

class CounterSummary {
public:
    static constexpr std::size_t kBlock = 64;

    // Summarises the samples `track` gained since the last call. Tracks only
    // grow; a shorter one (another run) is summarised afresh.
    void update(const profiler::CounterTrack& track);
    void clear();

    // One bucket per pixel column of `axis`; a sample at time t falls in
    // column floor(axis.x_of(t)). Call update() first.
    CounterColumns columns(const profiler::CounterTrack& track, const TimeAxis& axis) const;

private:
    void add_range(const profiler::CounterTrack& track, std::size_t first, std::size_t last,
                   CounterColumn& column) const;

    std::size_t summarised_ = 0; // samples covered by whole blocks
    std::vector<double> block_low_;
    std::vector<double> block_high_;
};

} // namespace kvscope::ui
