// How the KV cache's blocks divide over time: stacked areas of used, cached
// and free blocks, fragmentation (the share of slots in running requests'
// blocks that hold nothing) and the offload tier's fill on a second axis, and
// a line at the moment shown. A hybrid cache adds a line of used blocks per
// kind of KV group: the global groups' growing with the context, the
// sliding-window groups' flat once their windows fill, and a dotted line of
// what a plain cache of the same model would hold.
// Series are decimated, and a refresh replaces their points without
// rebuilding the chart, so live updates and long recordings stay cheap.
#pragma once

#include <cstddef>
#include <limits>
#include <vector>

#include <QWidget>

class QAreaSeries;
class QChart;
class QChartView;
class QLineSeries;
class QPen;
class QValueAxis;

namespace kvscope::profiler {
class RunStore;
}

namespace kvscope::ui {

class WrappingLegend;

class OccupancyChart : public QWidget {
    Q_OBJECT
public:
    explicit OccupancyChart(QWidget* parent = nullptr);

    // The store is not owned; null shows an empty chart.
    void set_store(const profiler::RunStore* store);
    // Moves the cursor to `t_ns` (the chart shows the whole run around it;
    // until called: the latest).
    void set_time_ns(qint64 t_ns);
    // The store grew (live): takes in its new samples.
    void refresh();

    qint64 time_ns() const { return time_ns_; }
    // Series, by name: "Used", "Cached", "Free" (QAreaSeries, stacked: each
    // upper line is the running sum), "Fragmentation (%)", "Offload tier
    // fill (%)" (visible when the run has a tier) and "Shown time".
    // For attached engines: "Used (not in KV events)" (empty), "Resident"
    // and "Capacity left" (when the capacity is known). A hybrid cache:
    // "Used, global" and "Used, window W" (the groups of that window summed;
    // "(N groups)" when several).
    QChart* chart() const { return chart_; }
    // The legend under the chart (it wraps; Qt's own would cut names).
    const WrappingLegend* legend() const { return legend_; }

private:
    void update_series();
    void update_cursor();
    // Shows the offload tier's line and its legend entry, or not.
    void show_tier(bool shown);
    // One line per window of a hybrid cache's groups (none for a plain one).
    // Draws a hybrid cache's lines; returns the highest block count drawn.
    double update_group_lines();
    // A line on the time and blocks axes, drawn with `pen`.
    QLineSeries* add_blocks_line(const QPen& pen);

    const profiler::RunStore* store_ = nullptr;
    qint64 time_ns_ = std::numeric_limits<qint64>::max(); // the latest until set
    // What the series hold, so a refresh with nothing new does nothing.
    std::size_t shown_samples_ = 0;
    std::size_t shown_fragmentation_ = 0;
    std::size_t shown_attached_ = 0;
    std::size_t shown_tier_ = 0;
    std::size_t shown_group_samples_ = 0; // a hybrid cache's groups' samples
    double blocks_max_ = 1;

    QChart* chart_ = nullptr;
    QChartView* view_ = nullptr;
    WrappingLegend* legend_ = nullptr;
    QValueAxis* x_axis_ = nullptr;
    QValueAxis* blocks_axis_ = nullptr;
    QValueAxis* percent_axis_ = nullptr;
    // Running sums: used, used + cached, used + cached + free.
    QLineSeries* used_top_ = nullptr;
    QLineSeries* cached_top_ = nullptr;
    QLineSeries* free_top_ = nullptr;
    QLineSeries* fragmentation_ = nullptr;
    QLineSeries* tier_fill_ = nullptr; // the offload tier's blocks, % of its capacity
    QLineSeries* cursor_ = nullptr;
    std::vector<QLineSeries*> group_lines_; // per distinct window, global first
    // What a plain cache of the same model would hold: every group as many
    // blocks as the global ones (hidden unless the cache is hybrid).
    QLineSeries* plain_line_ = nullptr;
    QAreaSeries* used_area_ = nullptr;
    QAreaSeries* cached_area_ = nullptr;
    QAreaSeries* free_area_ = nullptr;
};

} // namespace kvscope::ui
