// The timeline's arithmetic: nanoseconds <-> pixels, zoom and pan with their
// limits, ruler ticks, the folding that keeps a track's drawing plan within
// O(width) rectangles however many spans are in view, and counters reduced
// to one bucket per pixel column.
#include "app/ui/views/counter_columns.h"
#include "app/ui/views/span_folding.h"
#include "app/ui/views/time_axis.h"

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include <QTest>

using kvscope::profiler::LaneSpan;
using kvscope::profiler::LaneState;
using kvscope::profiler::Span;
using kvscope::profiler::StepSpan;
using kvscope::ui::FoldedRect;
using kvscope::ui::FoldOptions;
using kvscope::ui::TimeAxis;

namespace {

TimeAxis axis_over(std::int64_t data_begin, std::int64_t data_end, double width) {
    TimeAxis axis;
    axis.set_width(width);
    axis.set_data_range(data_begin, data_end);
    axis.fit_data();
    return axis;
}

// Spans of `length` ns starting every `period` ns from `first`.
std::vector<Span> regular_spans(std::size_t count, std::int64_t first, std::int64_t length,
                                std::int64_t period) {
    std::vector<Span> spans(count);
    for (std::size_t i = 0; i < count; ++i) {
        spans[i].begin_ns = first + static_cast<std::int64_t>(i) * period;
        spans[i].end_ns = spans[i].begin_ns + length;
    }
    return spans;
}

std::size_t folded_total(const std::vector<FoldedRect>& plan) {
    std::size_t total = 0;
    for (const FoldedRect& rect : plan) {
        total += rect.count;
    }
    return total;
}

} // namespace

class TestTimeAxis : public QObject {
    Q_OBJECT

private slots:
    void maps_round_trip_data();
    void maps_round_trip();
    void zoom_keeps_time_under_pointer_data();
    void zoom_keeps_time_under_pointer();
    void pan_moves_by_pixels();
    void zoom_and_pan_stay_within_limits();
    void fit_and_scroll_to_end();
    void ticks_are_round_and_spaced_data();
    void ticks_are_round_and_spaced();
    void formats_durations_data();
    void formats_durations();

    void wide_spans_stay_distinct();
    void million_tiny_spans_fold_to_width();
    void folding_accounts_for_every_visible_span_data();
    void folding_accounts_for_every_visible_span();
    void span_crossing_left_edge_is_included();
    void empty_track_has_empty_plan();
    void off_screen_spans_are_excluded();
    void open_span_ends_at_open_end();
    void rect_at_finds_the_rect_under_x();

    void counter_columns_match_sample_by_sample_data();
    void counter_columns_match_sample_by_sample();
    void counter_summary_follows_a_growing_track();
};

void TestTimeAxis::maps_round_trip_data() {
    QTest::addColumn<double>("width");
    QTest::addColumn<qint64>("begin");
    QTest::addColumn<qint64>("end");
    // Host-clock times are large: days of uptime are ~1e14 ns.
    QTest::newRow("1 ms over 1000 px") << 1000.0 << qint64(0) << qint64(1'000'000);
    QTest::newRow("1 us over 1600 px") << 1600.0 << qint64(5'000) << qint64(6'000);
    QTest::newRow("an hour at a large origin")
        << 1460.0 << qint64(123'456'789'012'345) << qint64(123'456'789'012'345 + 3'600'000'000'000);
    QTest::newRow("odd width") << 333.0 << qint64(-7'000) << qint64(93'001);
}

void TestTimeAxis::maps_round_trip() {
    QFETCH(double, width);
    QFETCH(qint64, begin);
    QFETCH(qint64, end);
    const TimeAxis axis = axis_over(begin, end, width);
    QCOMPARE(axis.begin_ns(), begin);
    QCOMPARE(axis.end_ns(), end);
    QCOMPARE(axis.x_of(begin), 0.0);
    QCOMPARE(axis.x_of(end), width);
    const std::int64_t length = end - begin;
    for (const std::int64_t t :
         {begin, begin + 1, begin + length / 3, begin + length / 2, end - 1}) {
        QVERIFY2(std::abs(axis.ns_of(axis.x_of(t)) - t) <= 1, qPrintable(QString::number(t)));
    }
    // Pixels back and forth agree to within one nanosecond's worth of pixels.
    for (const double x : {0.0, 0.5, 17.25, width / 2, width - 1}) {
        QVERIFY(std::abs(axis.x_of(axis.ns_of(x)) - x) <= 0.5 / axis.ns_per_px() + 1e-9);
    }
}

void TestTimeAxis::zoom_keeps_time_under_pointer_data() {
    QTest::addColumn<double>("x");
    QTest::addColumn<double>("factor");
    QTest::newRow("in at the middle") << 500.0 << 2.0;
    QTest::newRow("in near the left") << 37.0 << 1.19;
    QTest::newRow("in near the right") << 990.0 << 10.0;
    QTest::newRow("out from a zoomed view") << 250.0 << 0.5;
    QTest::newRow("in a lot") << 123.0 << 1000.0;
}

void TestTimeAxis::zoom_keeps_time_under_pointer() {
    QFETCH(double, x);
    QFETCH(double, factor);
    TimeAxis axis = axis_over(1'000'000'000, 2'000'000'000, 1000);
    // Start zoomed in around the middle, so zooming out has room too.
    axis.fit(1'400'000'000, 1'600'000'000);
    const std::int64_t anchor = axis.ns_of(x);
    const std::int64_t visible = axis.visible_ns();
    axis.zoom_at(x, factor);
    QVERIFY2(std::abs(axis.ns_of(x) - anchor) <= 1,
             qPrintable(QString("%1 -> %2").arg(anchor).arg(axis.ns_of(x))));
    QVERIFY(std::abs(static_cast<double>(axis.visible_ns()) - visible / factor) <= 1);
}

void TestTimeAxis::pan_moves_by_pixels() {
    TimeAxis axis = axis_over(0, 10'000'000, 1000);
    axis.fit(4'000'000, 5'000'000); // 1000 ns a pixel
    axis.pan_by(100);               // content moves right: earlier times come in
    QCOMPARE(axis.begin_ns(), 3'900'000);
    QCOMPARE(axis.visible_ns(), 1'000'000);
    axis.pan_by(-250.5);
    QCOMPARE(axis.begin_ns(), 4'150'500);
}

void TestTimeAxis::zoom_and_pan_stay_within_limits() {
    TimeAxis axis = axis_over(1'000'000, 11'000'000, 800);
    const auto margin =
        static_cast<std::int64_t>(10'000'000 * TimeAxis::kDataMargin); // of the data's length
    axis.zoom_at(400, 1e9);
    QCOMPARE(axis.visible_ns(), TimeAxis::kMinVisibleNs);
    axis.zoom_at(400, 1e-9);
    QCOMPARE(axis.visible_ns(), 10'000'000 + 2 * margin);
    QCOMPARE(axis.begin_ns(), 1'000'000 - margin);

    axis.fit(5'000'000, 6'000'000);
    axis.pan_by(1e9);
    QCOMPARE(axis.begin_ns(), 1'000'000 - margin);
    axis.pan_by(-1e9);
    QCOMPARE(axis.end_ns(), 11'000'000 + margin);
    QCOMPARE(axis.visible_ns(), 1'000'000);

    // No data yet: a minimal view, not a division by zero.
    TimeAxis empty = axis_over(0, 0, 800);
    QCOMPARE(empty.visible_ns(), TimeAxis::kMinVisibleNs);
    empty.zoom_at(100, 0.01);
    QCOMPARE(empty.visible_ns(), TimeAxis::kMinVisibleNs);
}

void TestTimeAxis::fit_and_scroll_to_end() {
    TimeAxis axis = axis_over(0, 100'000'000, 1000);
    axis.fit(20'000'000, 30'000'000);
    QCOMPARE(axis.begin_ns(), 20'000'000);
    QCOMPARE(axis.end_ns(), 30'000'000);
    // Shorter than the minimum: grows around its middle.
    axis.fit(50'000'000, 50'000'100);
    QCOMPARE(axis.visible_ns(), TimeAxis::kMinVisibleNs);
    QCOMPARE(axis.begin_ns(), 50'000'050 - TimeAxis::kMinVisibleNs / 2);
    // The data grows (live): the view follows its end with the same length.
    axis.fit(10'000'000, 20'000'000);
    axis.set_data_range(0, 300'000'000);
    axis.scroll_to_end(300'000'000);
    QCOMPARE(axis.end_ns(), 300'000'000);
    QCOMPARE(axis.visible_ns(), 10'000'000);
}

void TestTimeAxis::ticks_are_round_and_spaced_data() {
    QTest::addColumn<qint64>("begin");
    QTest::addColumn<qint64>("end");
    QTest::addColumn<qint64>("origin");
    QTest::addColumn<QStringList>("first_labels");
    QTest::newRow("10 ms") << qint64(0) << qint64(10'000'000) << qint64(0)
                           << QStringList{"0 ms", "1 ms", "2 ms"};
    QTest::newRow("relative to the origin")
        << qint64(5'000'500) << qint64(5'005'500) << qint64(5'000'000)
        << QStringList{"0.5 us", "1.0 us", "1.5 us"};
    QTest::newRow("seconds") << qint64(0) << qint64(60'000'000'000) << qint64(0)
                             << QStringList{"0 s", "10 s", "20 s"};
    QTest::newRow("fractions of a millisecond")
        << qint64(1'000'000) << qint64(3'000'000) << qint64(0)
        << QStringList{"1.0 ms", "1.2 ms", "1.4 ms"};
}

void TestTimeAxis::ticks_are_round_and_spaced() {
    QFETCH(qint64, begin);
    QFETCH(qint64, end);
    QFETCH(qint64, origin);
    QFETCH(QStringList, first_labels);
    TimeAxis axis = axis_over(0, 100'000'000'000, 1000);
    axis.fit(begin, end);
    const std::vector<kvscope::ui::TimeTick> ticks = kvscope::ui::time_ticks(axis, origin, 90);
    QVERIFY(ticks.size() >= 3);
    QStringList labels;
    for (std::size_t i = 0; i < 3; ++i) {
        labels << QString::fromStdString(ticks[i].label);
    }
    QCOMPARE(labels, first_labels);
    for (std::size_t i = 0; i < ticks.size(); ++i) {
        QVERIFY(ticks[i].ns >= axis.begin_ns() && ticks[i].ns < axis.end_ns());
        QCOMPARE(ticks[i].x, axis.x_of(ticks[i].ns));
        if (i > 0) {
            QVERIFY(ticks[i].x - ticks[i - 1].x >= 90 - 1e-9);
            // At most 5x the minimum (1, 2, 5 steps): never sparse.
            QVERIFY(ticks[i].x - ticks[i - 1].x <= 90 * 2.5 + 1e-9);
        }
    }
}

void TestTimeAxis::formats_durations_data() {
    QTest::addColumn<qint64>("ns");
    QTest::addColumn<QString>("text");
    QTest::newRow("ns") << qint64(850) << "850 ns";
    QTest::newRow("us") << qint64(12'345) << "12.3 us";
    QTest::newRow("ms") << qint64(1'500'000) << "1.50 ms";
    QTest::newRow("s") << qint64(2'000'000'000) << "2.00 s";
    QTest::newRow("rounds up a unit") << qint64(999'960) << "1.00 ms";
    QTest::newRow("long") << qint64(3'600'000'000'000) << "3600 s";
}

void TestTimeAxis::formats_durations() {
    QFETCH(qint64, ns);
    QFETCH(QString, text);
    QCOMPARE(QString::fromStdString(kvscope::ui::format_duration(ns)), text);
}

void TestTimeAxis::wide_spans_stay_distinct() {
    // 100 ns spans every 200 ns, 10 ns a pixel: each is 10 px wide.
    const std::vector<Span> spans = regular_spans(50, 0, 100, 200);
    const TimeAxis axis = axis_over(0, 10'000, 1000);
    const std::vector<FoldedRect> plan = kvscope::ui::fold_spans(spans, axis);
    QCOMPARE(plan.size(), spans.size());
    for (std::size_t i = 0; i < plan.size(); ++i) {
        QCOMPARE(plan[i].first, i);
        QCOMPARE(plan[i].count, std::size_t(1));
        QVERIFY(!plan[i].folded());
        QCOMPARE(plan[i].x0, 20.0 * static_cast<double>(i));
        QCOMPARE(plan[i].x1, 20.0 * static_cast<double>(i) + 10);
    }
}

void TestTimeAxis::million_tiny_spans_fold_to_width() {
    constexpr std::size_t kSpans = 1'000'000;
    const std::vector<Span> spans = regular_spans(kSpans, 0, 1, 2);
    const double width = 1600;
    const TimeAxis axis = axis_over(0, 2 * kSpans, width);
    const std::vector<FoldedRect> plan = kvscope::ui::fold_spans(spans, axis);
    QVERIFY(!plan.empty());
    QVERIFY2(plan.size() <= static_cast<std::size_t>(width),
             qPrintable(QString::number(plan.size())));
    QCOMPARE(folded_total(plan), kSpans);
    // Evenly spaced tiny spans are all close: one block covers them.
    QCOMPARE(plan.size(), std::size_t(1));
    QVERIFY(plan.front().folded());

    // Clustered: bursts of tiny spans with wide gaps fold per burst.
    std::vector<Span> bursts;
    for (std::int64_t burst = 0; burst < 100; ++burst) {
        for (std::int64_t i = 0; i < 10'000; ++i) {
            const std::int64_t begin = burst * 1'000'000 + i * 10;
            bursts.push_back({begin, begin + 5, 0, -1});
        }
    }
    const TimeAxis bursts_axis = axis_over(0, 100'000'000, width);
    const std::vector<FoldedRect> burst_plan = kvscope::ui::fold_spans(bursts, bursts_axis);
    QCOMPARE(burst_plan.size(), std::size_t(100));
    QCOMPARE(folded_total(burst_plan), bursts.size());
}

void TestTimeAxis::folding_accounts_for_every_visible_span_data() {
    // The view as shares of the track's length.
    QTest::addColumn<double>("from");
    QTest::addColumn<double>("to");
    QTest::addColumn<double>("min_px");
    QTest::newRow("all") << 0.0 << 1.0 << 3.0;
    QTest::newRow("10%") << 0.2 << 0.3 << 3.0;
    QTest::newRow("1%") << 0.3 << 0.31 << 3.0;
    QTest::newRow("0.1%") << 0.5 << 0.501 << 3.0;
    QTest::newRow("0.01%") << 0.4 << 0.4001 << 3.0;
    QTest::newRow("all, 1 px") << 0.0 << 1.0 << 1.0;
    QTest::newRow("1%, 8 px") << 0.6 << 0.61 << 8.0;
}

void TestTimeAxis::folding_accounts_for_every_visible_span() {
    QFETCH(double, from);
    QFETCH(double, to);
    QFETCH(double, min_px);
    // Bursts of spans whose durations and gaps share a scale, the scales
    // random over six orders of magnitude, and now and then a span long
    // enough to stand alone in the whole view: every zoom level sees wide
    // spans, narrow ones that fold, and narrow ones standing alone. (The
    // engine itself, not a distribution, so every standard library agrees.)
    std::mt19937_64 random(42);
    const auto around = [&](std::int64_t scale) {
        return scale * (1 + static_cast<std::int64_t>(random() % 9));
    };
    std::vector<Span> spans;
    std::int64_t t = 0;
    for (int burst = 0; burst < 2'000; ++burst) {
        if (burst % 200 == 0) {
            spans.push_back({t, t + 100'000'000, 0, -1});
            t += 100'000'000;
        }
        std::int64_t scale = 1;
        for (auto e = random() % 6; e > 0; --e) {
            scale *= 10;
        }
        t += around(scale * 10); // apart from the burst before
        for (int i = 0; i < 20; ++i) {
            t += around(scale) - scale;
            const std::int64_t length = around(scale);
            spans.push_back({t, t + length, 0, -1});
            t += length;
        }
    }
    const double width = 1000;
    TimeAxis axis = axis_over(0, t, width);
    const auto at = [t](double share) {
        return static_cast<std::int64_t>(share * static_cast<double>(t));
    };
    axis.fit(at(from), at(to));
    const FoldOptions options{min_px, 0};
    const std::vector<FoldedRect> plan = kvscope::ui::fold_spans(spans, axis, options);
    const kvscope::ui::IndexRange visible = kvscope::ui::visible_spans(spans, axis, options);

    QVERIFY(visible.size() > 0);
    QCOMPARE(folded_total(plan), visible.size());
    QVERIFY(plan.size() <= 2 * static_cast<std::size_t>(width / min_px) + 4);
    // The rectangles tile the visible spans in order, each a contiguous run.
    std::size_t next = visible.first;
    const double px = 1 / axis.ns_per_px();
    // One nanosecond of rounding in the pixel threshold.
    const double tolerance = px + 1e-9;
    for (std::size_t r = 0; r < plan.size(); ++r) {
        const FoldedRect& rect = plan[r];
        QCOMPARE(rect.first, next);
        next += rect.count;
        QVERIFY(rect.x0 <= rect.x1);
        if (r > 0) {
            QVERIFY(plan[r - 1].x1 <= rect.x0);
        }
        for (std::size_t i = rect.first; rect.folded() && i < next; ++i) {
            // Folded spans are narrow and close to the one before.
            QVERIFY((spans[i].end_ns - spans[i].begin_ns) * px < min_px + tolerance);
            if (i > rect.first) {
                QVERIFY((spans[i].begin_ns - spans[i - 1].end_ns) * px < min_px + tolerance);
            }
        }
        // A run stops only where the next span is wide or far.
        if (next < visible.last) {
            const Span& last_in = spans[next - 1];
            const Span& after = spans[next];
            const bool last_narrow = (last_in.end_ns - last_in.begin_ns) * px < min_px - tolerance;
            const bool after_narrow = (after.end_ns - after.begin_ns) * px < min_px - tolerance;
            if (last_narrow && after_narrow) {
                QVERIFY((after.begin_ns - last_in.end_ns) * px >= min_px - tolerance);
            }
        }
    }
    QCOMPARE(next, visible.last);
}

void TestTimeAxis::span_crossing_left_edge_is_included() {
    const std::vector<Span> spans = {
        {0, 1'000, 0, -1}, {1'000, 2'000, 0, -1}, {2'500, 2'600, 0, -1}};
    TimeAxis axis = axis_over(0, 3'000, 1000);
    axis.fit(500, 1'500); // 1 ns a pixel
    const std::vector<FoldedRect> plan = kvscope::ui::fold_spans(spans, axis);
    QCOMPARE(plan.size(), std::size_t(2));
    QCOMPARE(plan[0].first, std::size_t(0));
    QVERIFY(plan[0].x0 < 0);
    QCOMPARE(plan[0].x1, 500.0);
    QCOMPARE(plan[1].first, std::size_t(1));
    QVERIFY(plan[1].x1 > 1000);
    const kvscope::ui::IndexRange range = kvscope::ui::visible_spans(spans, axis);
    QCOMPARE(range.first, std::size_t(0));
    QCOMPARE(range.last, std::size_t(2));
}

void TestTimeAxis::empty_track_has_empty_plan() {
    const TimeAxis axis = axis_over(0, 1'000'000, 1000);
    QVERIFY(kvscope::ui::fold_spans(std::vector<Span>{}, axis).empty());
    QCOMPARE(kvscope::ui::visible_spans(std::vector<Span>{}, axis).size(), std::size_t(0));
}

void TestTimeAxis::off_screen_spans_are_excluded() {
    const std::vector<Span> spans = {
        {0, 100, 0, -1}, {200, 300, 0, -1}, {5'000, 6'000, 0, -1}, {9'000, 9'500, 0, -1}};
    TimeAxis axis = axis_over(0, 10'000, 1000);
    axis.fit(1'000, 4'000);
    QVERIFY(kvscope::ui::fold_spans(spans, axis).empty());
    // A span ending exactly at the left edge, or starting at the right, is off screen.
    axis.fit(300, 5'000);
    QVERIFY(kvscope::ui::fold_spans(spans, axis).empty());
    axis.fit(250, 5'500);
    const std::vector<FoldedRect> plan = kvscope::ui::fold_spans(spans, axis);
    QCOMPARE(plan.size(), std::size_t(2));
    QCOMPARE(plan[0].first, std::size_t(1));
    QCOMPARE(plan[1].first, std::size_t(2));
}

void TestTimeAxis::open_span_ends_at_open_end() {
    std::vector<StepSpan> steps(2);
    steps[0].begin_ns = 0;
    steps[0].end_ns = 400;
    steps[1].begin_ns = 500;
    steps[1].end_ns = -1; // still running
    const TimeAxis axis = axis_over(0, 1'000, 1000);
    const std::vector<FoldedRect> plan = kvscope::ui::fold_spans(steps, axis, {3, 800});
    QCOMPARE(plan.size(), std::size_t(2));
    QCOMPARE(plan[1].x0, 500.0);
    QCOMPARE(plan[1].x1, 800.0);

    const std::vector<LaneSpan> lanes = {{100, 200, LaneState::waiting},
                                         {200, -1, LaneState::decode}};
    const std::vector<FoldedRect> lane_plan = kvscope::ui::fold_spans(lanes, axis, {3, 1'000});
    QCOMPARE(lane_plan.size(), std::size_t(2));
    QCOMPARE(lane_plan[1].x1, 1000.0);
}

void TestTimeAxis::rect_at_finds_the_rect_under_x() {
    const std::vector<FoldedRect> plan = {{10, 20, 0, 1}, {30, 30.2, 1, 1}, {50, 80, 2, 5}};
    QVERIFY(kvscope::ui::rect_at(plan, 5) == nullptr);
    QCOMPARE(kvscope::ui::rect_at(plan, 10)->first, std::size_t(0));
    QCOMPARE(kvscope::ui::rect_at(plan, 19.9)->first, std::size_t(0));
    QVERIFY(kvscope::ui::rect_at(plan, 25) == nullptr);
    // Narrower than a pixel: painted a pixel wide, found a pixel wide.
    QCOMPARE(kvscope::ui::rect_at(plan, 30.8)->first, std::size_t(1));
    QCOMPARE(kvscope::ui::rect_at(plan, 60)->count, std::size_t(5));
    QVERIFY(kvscope::ui::rect_at(plan, 80) == nullptr);
}

namespace {

// The reference: every sample in view, one by one.
kvscope::ui::CounterColumns brute_force_columns(const kvscope::profiler::CounterTrack& track,
                                                const TimeAxis& axis) {
    kvscope::ui::CounterColumns result;
    result.columns.resize(static_cast<std::size_t>(std::ceil(axis.width())));
    for (std::size_t i = 0; i < track.t_ns.size(); ++i) {
        if (track.t_ns[i] < axis.begin_ns()) {
            result.carried = track.values[i];
            result.has_carried = true;
            continue;
        }
        const double x = std::floor(axis.x_of(track.t_ns[i]));
        if (x >= static_cast<double>(result.columns.size())) {
            break;
        }
        kvscope::ui::CounterColumn& column = result.columns[static_cast<std::size_t>(x)];
        const double value = track.values[i];
        column.low = column.has_samples ? std::min(column.low, value) : value;
        column.high = column.has_samples ? std::max(column.high, value) : value;
        column.last = value;
        column.has_samples = true;
    }
    return result;
}

kvscope::profiler::CounterTrack random_walk(std::size_t samples, std::uint64_t seed) {
    std::mt19937_64 random(seed);
    kvscope::profiler::CounterTrack track;
    std::int64_t t = 0;
    double value = 1000;
    for (std::size_t i = 0; i < samples; ++i) {
        t += 1 + static_cast<std::int64_t>(random() % 2'000);
        value += static_cast<double>(random() % 21) - 10;
        track.t_ns.push_back(t);
        track.values.push_back(value);
    }
    return track;
}

void compare_columns(const kvscope::ui::CounterColumns& got,
                     const kvscope::ui::CounterColumns& want) {
    QCOMPARE(got.has_carried, want.has_carried);
    if (want.has_carried) {
        QCOMPARE(got.carried, want.carried);
    }
    QCOMPARE(got.columns.size(), want.columns.size());
    for (std::size_t c = 0; c < want.columns.size(); ++c) {
        QVERIFY2(got.columns[c].has_samples == want.columns[c].has_samples,
                 qPrintable(QString("column %1").arg(c)));
        if (want.columns[c].has_samples) {
            QCOMPARE(got.columns[c].low, want.columns[c].low);
            QCOMPARE(got.columns[c].high, want.columns[c].high);
            QCOMPARE(got.columns[c].last, want.columns[c].last);
        }
    }
}

} // namespace

void TestTimeAxis::counter_columns_match_sample_by_sample_data() {
    QTest::addColumn<double>("from");
    QTest::addColumn<double>("to");
    QTest::newRow("all: ~700 samples a column") << 0.0 << 1.0;
    QTest::newRow("10%") << 0.3 << 0.4;
    QTest::newRow("1%: a few a column") << 0.5 << 0.51;
    QTest::newRow("0.01%: empty columns between samples") << 0.7 << 0.7001;
    QTest::newRow("the start, with no sample before it") << 0.0 << 0.001;
}

void TestTimeAxis::counter_columns_match_sample_by_sample() {
    QFETCH(double, from);
    QFETCH(double, to);
    const kvscope::profiler::CounterTrack track = random_walk(1'000'000, 7);
    const std::int64_t length = track.t_ns.back();
    TimeAxis axis = axis_over(0, length, 1460);
    axis.fit(static_cast<std::int64_t>(from * static_cast<double>(length)),
             static_cast<std::int64_t>(to * static_cast<double>(length)));
    kvscope::ui::CounterSummary summary;
    summary.update(track);
    compare_columns(summary.columns(track, axis), brute_force_columns(track, axis));
}

void TestTimeAxis::counter_summary_follows_a_growing_track() {
    const kvscope::profiler::CounterTrack full = random_walk(50'000, 11);
    kvscope::profiler::CounterTrack growing;
    kvscope::ui::CounterSummary summary;
    // Grows in uneven steps (live), summarised after each, as painting does.
    for (const std::size_t size : {std::size_t(10), std::size_t(64), std::size_t(65),
                                   std::size_t(1'000), std::size_t(33'333), full.t_ns.size()}) {
        growing.t_ns.assign(full.t_ns.begin(),
                            full.t_ns.begin() + static_cast<std::ptrdiff_t>(size));
        growing.values.assign(full.values.begin(),
                              full.values.begin() + static_cast<std::ptrdiff_t>(size));
        summary.update(growing);
        const TimeAxis axis = axis_over(0, growing.t_ns.back(), 300);
        compare_columns(summary.columns(growing, axis), brute_force_columns(growing, axis));
    }
    // Another, shorter track: summarised afresh, not mixed with the old one.
    const kvscope::profiler::CounterTrack other = random_walk(5'000, 12);
    summary.update(other);
    const TimeAxis axis = axis_over(0, other.t_ns.back(), 300);
    compare_columns(summary.columns(other, axis), brute_force_columns(other, axis));
}

QTEST_APPLESS_MAIN(TestTimeAxis)
#include "tst_time_axis.moc"
