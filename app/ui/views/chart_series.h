// From the store's counter tracks to Qt Charts data: time in seconds from the
// run's start, and decimated, so a recording of any length draws fast and
// refreshing a live chart ten times a second stays cheap.
#pragma once

#include "profiler/store/run_store.h"

#include <cstddef>
#include <cstdint>
#include <vector>

#include <QList>
#include <QPointF>

class QAbstractAxis;
class QChart;
class QLineSeries;
class QValueAxis;

namespace kvscope::ui {

// More points than a chart has pixels across only costs time.
inline constexpr std::size_t kMaxChartPoints = 2000;

// Which of the samples taken at `t_ns` (sorted) to draw: all of them when
// there are at most `max_points`; else, per equal slice of time, the samples
// where each of `lines` (values aligned with `t_ns`) is lowest and highest,
// plus the first and last sample. Ascending, at most `max_points`: spikes and
// dips survive decimation, and series decimated together share their x.
std::vector<std::size_t> min_max_indices(const std::vector<std::int64_t>& t_ns,
                                         const std::vector<const std::vector<double>*>& lines,
                                         std::size_t max_points = kMaxChartPoints);

// `track`'s value at each of `times` (sorted): its last sample at or before
// it, `fallback` before its first. Aligns counters sampled at other moments.
std::vector<double> values_at(const profiler::CounterTrack& track,
                              const std::vector<std::int64_t>& times, double fallback = 0);

double seconds_since(std::int64_t start_ns, std::int64_t t_ns);

// `track` as chart points: x in seconds from `start_ns`, y = value * `scale`,
// decimated with min_max_indices().
QList<QPointF> counter_points(const profiler::CounterTrack& track, std::int64_t start_ns,
                              double scale, std::size_t max_points = kMaxChartPoints);

// Sets a time axis to [0, `end_s`] with ticks at round steps (1, 2 or 5 times
// a power of ten) from 0, rather than at fifths of an arbitrary length.
void set_time_range(QValueAxis* axis, double end_s);

// A vertical line that marks the moment shown, attached to `x` and `y` and
// kept out of the legend; place it with move_time_cursor().
QLineSeries* add_time_cursor(QChart* chart, QAbstractAxis* x, QAbstractAxis* y);
void move_time_cursor(QLineSeries* cursor, double x_s, double y_min, double y_max);

} // namespace kvscope::ui
