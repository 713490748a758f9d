#include "app/ui/views/counter_columns.h"

#include <algorithm>
#include <cmath>

namespace kvscope::ui {

void CounterSummary::clear() {
    summarised_ = 0;
    block_low_.clear();
    block_high_.clear();
}

void CounterSummary::update(const profiler::CounterTrack& track) {
    const std::vector<double>& values = track.values;
    if (values.size() < summarised_) {
        clear();
    }
    const std::size_t whole = values.size() / kBlock * kBlock;
    for (std::size_t block = summarised_; block < whole; block += kBlock) {
        const auto first = values.begin() + static_cast<std::ptrdiff_t>(block);
        const auto [low, high] = std::minmax_element(first, first + kBlock);
        block_low_.push_back(*low);
        block_high_.push_back(*high);
    }
    summarised_ = whole;
}

void CounterSummary::add_range(const profiler::CounterTrack& track, std::size_t first,
                               std::size_t last, CounterColumn& column) const {
    const std::vector<double>& values = track.values;
    const auto take = [&column](double low, double high) {
        column.low = column.has_samples ? std::min(column.low, low) : low;
        column.high = column.has_samples ? std::max(column.high, high) : high;
        column.has_samples = true;
    };
    const auto scan = [&](std::size_t from, std::size_t to) {
        for (std::size_t i = from; i < to; ++i) {
            take(values[i], values[i]);
        }
    };
    // Whole summarised blocks inside [first, last) are read from the summary,
    // the ragged ends sample by sample.
    const std::size_t block_begin = (first + kBlock - 1) / kBlock;
    const std::size_t block_end = std::min(last, summarised_) / kBlock;
    if (block_begin >= block_end) {
        scan(first, last);
    } else {
        scan(first, block_begin * kBlock);
        for (std::size_t block = block_begin; block < block_end; ++block) {
            take(block_low_[block], block_high_[block]);
        }
        scan(block_end * kBlock, last);
    }
    column.last = values[last - 1];
}

CounterColumns CounterSummary::columns(const profiler::CounterTrack& track,
                                       const TimeAxis& axis) const {
    CounterColumns result;
    const auto count = static_cast<std::size_t>(std::max(1.0, std::ceil(axis.width())));
    result.columns.resize(count);
    const std::vector<std::int64_t>& times = track.t_ns;
    auto first = std::lower_bound(times.begin(), times.end(), axis.begin_ns());
    if (first != times.begin()) {
        result.carried = track.values[static_cast<std::size_t>(first - times.begin()) - 1];
        result.has_carried = true;
    }
    for (std::size_t column = 0; column < count && first != times.end(); ++column) {
        // The column's samples: those whose x is below the next column. The
        // same test as floor(x) == column, so no sample lands in two.
        const double next_column = static_cast<double>(column + 1);
        const auto last = std::partition_point(
            first, times.end(), [&](std::int64_t t) { return axis.x_of(t) < next_column; });
        if (last != first) {
            add_range(track, static_cast<std::size_t>(first - times.begin()),
                      static_cast<std::size_t>(last - times.begin()), result.columns[column]);
            first = last;
        }
    }
    return result;
}

} // namespace kvscope::ui
