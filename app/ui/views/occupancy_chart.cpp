#include "app/ui/views/occupancy_chart.h"

#include "app/ui/export/plot_export.h"
#include "app/ui/views/chart_series.h"
#include "app/ui/views/wrapping_legend.h"
#include "profiler/store/run_store.h"

#include <algorithm>

#include <QAreaSeries>
#include <QChart>
#include <QChartView>
#include <QLineSeries>
#include <QPen>
#include <QVBoxLayout>
#include <QValueAxis>

namespace kvscope::ui {
namespace {

using profiler::Counter;

constexpr qsizetype kSmoothPointLimit = 400;

QAreaSeries* add_area(QChart* chart, const QString& name, QLineSeries* upper, QLineSeries* lower,
                      const QColor& colour) {
    auto* area = new QAreaSeries(upper, lower);
    area->setName(name);
    area->setBrush(colour);
    area->setPen(QPen(colour.darker(130), 1));
    chart->addSeries(area);
    return area;
}

// Samples of a hybrid cache's groups (they come after each step's memory
// sample: a refresh between the two must still take them in).
std::size_t group_samples(const profiler::RunStore& store) {
    std::size_t samples = 0;
    for (const profiler::RunStore::KvGroupTrack& group : store.kv_groups()) {
        samples += group.used.values.size();
    }
    return samples;
}

} // namespace

OccupancyChart::OccupancyChart(QWidget* parent)
    : QWidget(parent)
    , chart_(new QChart) {
    chart_->setTitle("KV-cache blocks");
    chart_->setAnimationOptions(QChart::NoAnimation);
    chart_->setMargins(QMargins(4, 4, 4, 4));

    // The line series are the areas' edges, not series of the chart; the
    // chart is their parent so they outlive the areas that read them.
    used_top_ = new QLineSeries(chart_);
    cached_top_ = new QLineSeries(chart_);
    free_top_ = new QLineSeries(chart_);
    QAreaSeries* used = add_area(chart_, "Used", used_top_, nullptr, QColor(76, 120, 168));
    QAreaSeries* cached = add_area(chart_, "Cached", cached_top_, used_top_, QColor(242, 193, 78));
    QAreaSeries* free_area =
        add_area(chart_, "Free", free_top_, cached_top_, QColor(215, 215, 215));
    used_area_ = used;
    cached_area_ = cached;
    free_area_ = free_area;

    fragmentation_ = new QLineSeries(chart_);
    fragmentation_->setName("Fragmentation (%)");
    fragmentation_->setPen(QPen(QColor(200, 40, 40), 1.5));
    chart_->addSeries(fragmentation_);
    // The offload tier's fill, as a share of its capacity: the tier is often
    // many times the pool, so on the blocks axis it would flatten the rest.
    tier_fill_ = new QLineSeries(chart_);
    tier_fill_->setName("Offload tier fill (%)");
    QPen tier_pen(QColor(0, 150, 136), 1.5);
    tier_pen.setStyle(Qt::DashLine);
    tier_fill_->setPen(tier_pen);
    chart_->addSeries(tier_fill_);

    x_axis_ = new QValueAxis(chart_);
    x_axis_->setTitleText("Time (s)");
    x_axis_->setLabelFormat("%.3g");
    blocks_axis_ = new QValueAxis(chart_);
    blocks_axis_->setTitleText("Blocks");
    blocks_axis_->setLabelFormat("%d");
    percent_axis_ = new QValueAxis(chart_);
    // No title: a vertical one as long as "Fragmentation (%)" is cut in the
    // chart's room at 1440x900; the labels say percent, the legend names
    // the lines that use them.
    percent_axis_->setRange(0, 100);
    percent_axis_->setLabelFormat("%d%%");
    chart_->addAxis(x_axis_, Qt::AlignBottom);
    chart_->addAxis(blocks_axis_, Qt::AlignLeft);
    chart_->addAxis(percent_axis_, Qt::AlignRight);
    for (QAreaSeries* area : {used, cached, free_area}) {
        area->attachAxis(x_axis_);
        area->attachAxis(blocks_axis_);
    }
    for (QLineSeries* percent : {fragmentation_, tier_fill_}) {
        percent->attachAxis(x_axis_);
        percent->attachAxis(percent_axis_);
    }
    cursor_ = add_time_cursor(chart_, x_axis_, blocks_axis_);

    view_ = new QChartView(chart_, this);
    view_->setRenderHint(QPainter::Antialiasing);
    // The view's owner offers the context menu (plot export).
    view_->setContextMenuPolicy(Qt::NoContextMenu);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->setSpacing(0);
    layout->addWidget(view_, 1);
    legend_ = new WrappingLegend(chart_, this);
    legend_->set_left_out(cursor_, true);
    layout->addWidget(legend_);

    setObjectName("block_occupancy");
    add_export_menu(this);
    update_series();
    update_cursor();
}

void OccupancyChart::set_store(const profiler::RunStore* store) {
    store_ = store;
    shown_samples_ = 0;
    shown_fragmentation_ = 0;
    update_series();
    update_cursor();
}

void OccupancyChart::set_time_ns(qint64 t_ns) {
    time_ns_ = t_ns;
    update_cursor();
}

void OccupancyChart::refresh() {
    if (store_ != nullptr &&
        (store_->counter(Counter::used_blocks).t_ns.size() != shown_samples_ ||
         store_->counter(Counter::fragmentation).t_ns.size() != shown_fragmentation_ ||
         store_->counter(Counter::attached_resident).t_ns.size() != shown_attached_ ||
         store_->counter(Counter::tier_blocks).t_ns.size() != shown_tier_ ||
         group_samples(*store_) != shown_group_samples_)) {
        update_series();
    }
    update_cursor();
}

void OccupancyChart::update_series() {
    if (store_ == nullptr) {
        for (QLineSeries* series :
             {used_top_, cached_top_, free_top_, fragmentation_, tier_fill_}) {
            series->clear();
        }
        show_tier(false);
        update_group_lines();
        x_axis_->setRange(0, 1);
        blocks_axis_->setRange(0, 1);
        blocks_max_ = 1;
        legend_->refresh();
        return;
    }
    // An attached engine's events tell which blocks are resident (hashed, in
    // its prefix cache), not which of them requests use: "used" stays empty
    // and says so, and the capacity given bounds the rest.
    const bool attached = !store_->attached().state().empty() && store_->steps().empty();
    used_area_->setName(attached ? "Used (not in KV events)" : "Used");
    cached_area_->setName(attached ? "Resident" : "Cached");
    free_area_->setName(attached ? "Capacity left" : "Free");
    chart_->setTitle(attached ? "Attached engines' KV blocks" : "KV-cache blocks");
    profiler::CounterTrack attached_used;
    profiler::CounterTrack attached_cached;
    profiler::CounterTrack attached_free;
    if (attached) {
        const profiler::CounterTrack& resident = store_->counter(Counter::attached_resident);
        const auto capacity = static_cast<double>(store_->attached().capacity_blocks());
        attached_used.t_ns = resident.t_ns;
        attached_used.values.assign(resident.values.size(), 0.0);
        attached_cached = resident;
        attached_free.t_ns = resident.t_ns;
        for (const double value : resident.values) {
            attached_free.values.push_back(std::max(0.0, capacity - value));
        }
    }
    // Memory samples carry all three counts at once; the others are aligned
    // to the used-block samples' times in case a source sampled them apart.
    const profiler::CounterTrack& used =
        attached ? attached_used : store_->counter(Counter::used_blocks);
    const profiler::CounterTrack& cached_track =
        attached ? attached_cached : store_->counter(Counter::cached_blocks);
    const profiler::CounterTrack& free_track =
        attached ? attached_free : store_->counter(Counter::free_blocks);
    const std::vector<double> cached_sum = [&] {
        std::vector<double> sum = values_at(cached_track, used.t_ns);
        for (std::size_t i = 0; i < sum.size(); ++i) {
            sum[i] += used.values[i];
        }
        return sum;
    }();
    const std::vector<double> total = [&] {
        std::vector<double> sum = values_at(free_track, used.t_ns);
        for (std::size_t i = 0; i < sum.size(); ++i) {
            sum[i] += cached_sum[i];
        }
        return sum;
    }();
    const std::vector<std::size_t> picked =
        min_max_indices(used.t_ns, {&used.values, &cached_sum, &total});
    QList<QPointF> used_points;
    QList<QPointF> cached_points;
    QList<QPointF> total_points;
    used_points.reserve(static_cast<qsizetype>(picked.size()));
    cached_points.reserve(static_cast<qsizetype>(picked.size()));
    total_points.reserve(static_cast<qsizetype>(picked.size()));
    double top = attached ? static_cast<double>(store_->attached().capacity_blocks())
                          : store_->total_blocks();
    for (const std::size_t i : picked) {
        const double x = seconds_since(store_->start_ns(), used.t_ns[i]);
        used_points.append(QPointF(x, used.values[i]));
        cached_points.append(QPointF(x, cached_sum[i]));
        total_points.append(QPointF(x, total[i]));
        top = std::max(top, total[i]);
    }
    // Antialiased, dense areas take several times as long to draw, and their
    // edges are too close together for it to show.
    view_->setRenderHint(QPainter::Antialiasing, used_points.size() < kSmoothPointLimit);
    used_top_->replace(used_points);
    cached_top_->replace(cached_points);
    free_top_->replace(total_points);
    fragmentation_->replace(
        counter_points(store_->counter(Counter::fragmentation), store_->start_ns(), 100.0));

    const profiler::CounterTrack& tier = store_->counter(Counter::tier_blocks);
    show_tier(store_->tier_capacity() > 0);
    if (store_->tier_capacity() > 0) {
        QList<QPointF> fill = counter_points(tier, store_->start_ns(),
                                             100.0 / static_cast<double>(store_->tier_capacity()));
        fill.prepend(QPointF(0, 0)); // the tier starts empty
        // It holds what it last held until the run's end (update_cursor()
        // moves this point as a live run goes on).
        fill.append(QPointF(seconds_since(store_->start_ns(), store_->end_ns()), fill.back().y()));
        tier_fill_->replace(fill);
    }

    top = std::max(top, update_group_lines());
    shown_samples_ = used.t_ns.size();
    shown_tier_ = tier.t_ns.size();
    shown_fragmentation_ = store_->counter(Counter::fragmentation).t_ns.size();
    shown_attached_ = store_->counter(Counter::attached_resident).t_ns.size();
    blocks_max_ = std::max(1.0, top);
    blocks_axis_->setRange(0, blocks_max_);
    set_time_range(x_axis_, seconds_since(store_->start_ns(), store_->end_ns()));
    legend_->refresh();
}

QLineSeries* OccupancyChart::add_blocks_line(const QPen& pen) {
    auto* line = new QLineSeries(chart_);
    line->setPen(pen);
    chart_->addSeries(line);
    line->attachAxis(x_axis_);
    line->attachAxis(blocks_axis_);
    return line;
}

double OccupancyChart::update_group_lines() {
    static const std::vector<profiler::RunStore::KvGroupTrack> kNone;
    const std::vector<profiler::RunStore::KvGroupTrack>& groups =
        store_ != nullptr && store_->kv_group_count() > 1 ? store_->kv_groups() : kNone;
    // The groups of one window hold the same blocks at every step (their
    // layers see the same requests): one line per window, the groups summed.
    std::vector<std::int32_t> windows;
    for (const profiler::RunStore::KvGroupTrack& group : groups) {
        if (!group.used.values.empty() &&
            std::find(windows.begin(), windows.end(), group.window) == windows.end()) {
            windows.push_back(group.window);
        }
    }
    static const QColor kColors[] = {QColor(31, 60, 110), QColor(120, 60, 150), QColor(40, 130, 80),
                                     QColor(160, 90, 30)};
    while (group_lines_.size() < windows.size()) {
        QPen pen(kColors[group_lines_.size() % std::size(kColors)], 2);
        pen.setStyle(group_lines_.empty() ? Qt::SolidLine : Qt::DashLine);
        group_lines_.push_back(add_blocks_line(pen));
    }
    if (plain_line_ == nullptr) {
        QPen pen(QColor(90, 90, 90), 1.5);
        pen.setStyle(Qt::DotLine);
        plain_line_ = add_blocks_line(pen);
        plain_line_->setName("Plain cache would hold");
    }
    // A plain cache's blocks per block of a whole-context group, from the
    // run's settings (0: they do not say; no line then).
    const double plain_scale = store_ != nullptr ? store_->plain_cache_scale() : 0.0;
    double highest = 0;
    bool plain_drawn = false;
    shown_group_samples_ = 0;
    for (std::size_t w = 0; w < group_lines_.size(); ++w) {
        QLineSeries* line = group_lines_[w];
        if (w >= windows.size()) {
            line->clear();
            line->setVisible(false);
            continue;
        }
        // A step's groups come one after another: summed at the times of
        // the last group of the window, each earlier one's sample at or
        // before it is the same step's.
        const profiler::RunStore::KvGroupTrack* last = nullptr;
        int count = 0;
        for (const profiler::RunStore::KvGroupTrack& group : groups) {
            if (group.window == windows[w] && !group.used.values.empty()) {
                last = &group;
                ++count;
            }
        }
        profiler::CounterTrack summed;
        summed.t_ns = last->used.t_ns;
        summed.values.assign(summed.t_ns.size(), 0.0);
        for (const profiler::RunStore::KvGroupTrack& group : groups) {
            if (group.window != windows[w] || group.used.values.empty()) {
                continue;
            }
            const std::vector<double> aligned = values_at(group.used, summed.t_ns);
            for (std::size_t i = 0; i < aligned.size(); ++i) {
                summed.values[i] += aligned[i];
            }
            shown_group_samples_ += group.used.values.size();
        }
        QString name = windows[w] > 0 ? QString("Used, window %1").arg(windows[w]) : "Used, global";
        if (count > 1) {
            name += QString(" (%1 groups)").arg(count);
        }
        line->setName(name);
        line->replace(counter_points(summed, store_->start_ns(), 1.0));
        line->setVisible(true);
        for (const double value : summed.values) {
            highest = std::max(highest, value);
        }
        if (windows[w] == 0 && plain_scale > 0) {
            // Each global group holds every running sequence's blocks; a
            // plain cache holds as much in every layer.
            const double per_group = plain_scale / count;
            plain_line_->replace(counter_points(summed, store_->start_ns(), per_group));
            for (const double value : summed.values) {
                highest = std::max(highest, value * per_group);
            }
            plain_drawn = true;
        }
    }
    if (!plain_drawn) {
        plain_line_->clear();
    }
    plain_line_->setVisible(plain_drawn);
    return highest;
}

void OccupancyChart::show_tier(bool shown) {
    tier_fill_->setVisible(shown);
}

void OccupancyChart::update_cursor() {
    if (store_ == nullptr || store_->event_count() == 0) {
        cursor_->clear();
        return;
    }
    const qint64 t = std::clamp<qint64>(time_ns_, store_->start_ns(), store_->end_ns());
    // The run's length grows live; the axis follows it.
    const double end_s = std::max(1e-3, seconds_since(store_->start_ns(), store_->end_ns()));
    if (x_axis_->max() != end_s) {
        set_time_range(x_axis_, end_s);
    }
    if (tier_fill_->isVisible() && tier_fill_->count() > 1) {
        const QPointF tail = tier_fill_->at(tier_fill_->count() - 1);
        const double now_s = seconds_since(store_->start_ns(), store_->end_ns());
        if (tail.x() != now_s) {
            tier_fill_->replace(tier_fill_->count() - 1, QPointF(now_s, tail.y()));
        }
    }
    move_time_cursor(cursor_, seconds_since(store_->start_ns(), t), 0, blocks_max_);
}

} // namespace kvscope::ui
