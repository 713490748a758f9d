#include "app/ui/views/chart_series.h"

#include <algorithm>
#include <cmath>

#include <QChart>
#include <QLegendMarker>
#include <QLineSeries>
#include <QPen>
#include <QValueAxis>

namespace kvscope::ui {

std::vector<std::size_t> min_max_indices(const std::vector<std::int64_t>& t_ns,
                                         const std::vector<const std::vector<double>*>& lines,
                                         std::size_t max_points) {
    const std::size_t n = t_ns.size();
    std::vector<std::size_t> picked;
    if (n <= max_points || lines.empty() || max_points < 2 + 2 * lines.size()) {
        picked.resize(std::min(n, std::max<std::size_t>(max_points, 2)));
        if (picked.size() == n) {
            for (std::size_t i = 0; i < n; ++i) {
                picked[i] = i;
            }
            return picked;
        }
        // Too few points allowed for one bucket: evenly spaced samples.
        for (std::size_t i = 0; i < picked.size(); ++i) {
            picked[i] = i * (n - 1) / (picked.size() - 1);
        }
        return picked;
    }
    // The first and last sample take two points; each bucket takes up to two
    // per line.
    const std::size_t buckets = (max_points - 2) / (2 * lines.size());
    const double first = static_cast<double>(t_ns.front());
    const double span = static_cast<double>(t_ns.back()) - first;
    const auto bucket_of = [&](std::size_t i) {
        if (span <= 0) {
            return std::size_t{0};
        }
        const double share = (static_cast<double>(t_ns[i]) - first) / span;
        return std::min(buckets - 1,
                        static_cast<std::size_t>(share * static_cast<double>(buckets)));
    };

    picked.reserve(max_points);
    picked.push_back(0);
    std::vector<std::size_t> low(lines.size());
    std::vector<std::size_t> high(lines.size());
    std::vector<std::size_t> bucket_points;
    const auto flush = [&] {
        bucket_points.assign(low.begin(), low.end());
        bucket_points.insert(bucket_points.end(), high.begin(), high.end());
        std::sort(bucket_points.begin(), bucket_points.end());
        for (const std::size_t i : bucket_points) {
            if (i > picked.back()) {
                picked.push_back(i);
            }
        }
    };
    std::size_t current = bucket_of(0);
    std::fill(low.begin(), low.end(), 0);
    std::fill(high.begin(), high.end(), 0);
    for (std::size_t i = 1; i < n; ++i) {
        const std::size_t bucket = bucket_of(i);
        if (bucket != current) {
            flush();
            current = bucket;
            std::fill(low.begin(), low.end(), i);
            std::fill(high.begin(), high.end(), i);
            continue;
        }
        for (std::size_t l = 0; l < lines.size(); ++l) {
            const std::vector<double>& values = *lines[l];
            if (values[i] < values[low[l]]) {
                low[l] = i;
            }
            if (values[i] > values[high[l]]) {
                high[l] = i;
            }
        }
    }
    flush();
    if (picked.back() != n - 1) {
        picked.push_back(n - 1);
    }
    return picked;
}

std::vector<double> values_at(const profiler::CounterTrack& track,
                              const std::vector<std::int64_t>& times, double fallback) {
    std::vector<double> values;
    values.reserve(times.size());
    std::size_t taken = 0; // samples at or before the current time
    for (const std::int64_t t : times) {
        while (taken < track.t_ns.size() && track.t_ns[taken] <= t) {
            ++taken;
        }
        values.push_back(taken > 0 ? track.values[taken - 1] : fallback);
    }
    return values;
}

double seconds_since(std::int64_t start_ns, std::int64_t t_ns) {
    return static_cast<double>(t_ns - start_ns) * 1e-9;
}

QList<QPointF> counter_points(const profiler::CounterTrack& track, std::int64_t start_ns,
                              double scale, std::size_t max_points) {
    const std::vector<std::size_t> picked =
        min_max_indices(track.t_ns, {&track.values}, max_points);
    QList<QPointF> points;
    points.reserve(static_cast<qsizetype>(picked.size()));
    for (const std::size_t i : picked) {
        points.append(QPointF(seconds_since(start_ns, track.t_ns[i]), track.values[i] * scale));
    }
    return points;
}

void set_time_range(QValueAxis* axis, double end_s) {
    end_s = std::max(end_s, 1e-3);
    const double rough = end_s / 6;
    const double power = std::pow(10.0, std::floor(std::log10(rough)));
    const double mantissa = rough / power;
    const double step = (mantissa <= 1 ? 1 : mantissa <= 2 ? 2 : mantissa <= 5 ? 5 : 10) * power;
    axis->setTickType(QValueAxis::TicksDynamic);
    axis->setTickAnchor(0);
    axis->setTickInterval(step);
    axis->setRange(0, end_s);
}

QLineSeries* add_time_cursor(QChart* chart, QAbstractAxis* x, QAbstractAxis* y) {
    auto* cursor = new QLineSeries(chart);
    cursor->setName("Shown time");
    QPen pen(QColor(40, 40, 40));
    pen.setWidthF(1.5);
    pen.setStyle(Qt::DashLine);
    cursor->setPen(pen);
    chart->addSeries(cursor);
    cursor->attachAxis(x);
    cursor->attachAxis(y);
    for (QLegendMarker* marker : chart->legend()->markers(cursor)) {
        marker->setVisible(false);
    }
    return cursor;
}

void move_time_cursor(QLineSeries* cursor, double x_s, double y_min, double y_max) {
    cursor->replace(QList<QPointF>{QPointF(x_s, y_min), QPointF(x_s, y_max)});
}

} // namespace kvscope::ui
