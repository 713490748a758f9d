// The occupancy chart stacks used, cached and free blocks over time with
// fragmentation on a second axis; series are decimated so long runs stay
// fast, yet keep their spikes; refresh() takes in what a live store adds.
#include "app/ui/export/plot_export.h"
#include "app/ui/views/chart_series.h"
#include "app/ui/views/occupancy_chart.h"
#include "engine/events/typed_events.h"
#include "profiler/store/run_store.h"
#include "tests/app/sample_kv_run.h"

#include <QAbstractAxis>
#include <QAreaSeries>
#include <QChart>
#include <QFile>
#include <QLineSeries>
#include <QTemporaryDir>
#include <QTest>
#include <QValueAxis>

using kvscope::events::EventKind;
using kvscope::ui::OccupancyChart;
namespace test = kvscope::test;

namespace {

QAbstractSeries* series_named(QChart* chart, const QString& name) {
    for (QAbstractSeries* series : chart->series()) {
        if (series->name() == name) {
            return series;
        }
    }
    return nullptr;
}

QList<QPointF> upper_points(QChart* chart, const QString& name) {
    auto* area = qobject_cast<QAreaSeries*>(series_named(chart, name));
    return area != nullptr ? area->upperSeries()->points() : QList<QPointF>{};
}

QList<QPointF> line_points(QChart* chart, const QString& name) {
    auto* line = qobject_cast<QLineSeries*>(series_named(chart, name));
    return line != nullptr ? line->points() : QList<QPointF>{};
}

// `samples` memory samples 1 ms apart: 100 used, 50 cached of 1000, but 900
// used at `spike` and 3 at `dip`.
void append_samples(kvscope::profiler::RunStore& store, int first, int samples, int spike,
                    int dip) {
    for (int i = first; i < first + samples; ++i) {
        const int used = i == spike ? 900 : i == dip ? 3 : 100;
        store.append(test::kv_event(10 + i, EventKind::memory_sample, -1, -1, used, 50,
                                    1000 - 50 - used, 1000));
        store.append(test::kv_event(10 + i, EventKind::cache_fill, -1, -1, i % 10, 10));
    }
}

} // namespace

class TestOccupancyChart : public QObject {
    Q_OBJECT

private slots:
    void min_max_keeps_extremes_data();
    void min_max_keeps_extremes();
    void stacks_used_cached_free();
    void decimates_long_runs_keeping_spikes();
    void refresh_takes_in_new_samples();
    void a_hybrid_cache_gets_a_line_per_kind_of_group();
    void cursor_marks_the_shown_time();
    void exports_as_svg();
};

void TestOccupancyChart::min_max_keeps_extremes_data() {
    QTest::addColumn<int>("samples");
    QTest::addColumn<int>("max_points");
    QTest::newRow("fewer than the limit") << 10 << 100;
    QTest::newRow("exactly the limit") << 100 << 100;
    QTest::newRow("ten times the limit") << 20000 << 2000;
    QTest::newRow("tiny limit") << 1000 << 5;
}

void TestOccupancyChart::min_max_keeps_extremes() {
    QFETCH(int, samples);
    QFETCH(int, max_points);
    std::vector<std::int64_t> t;
    std::vector<double> a;
    std::vector<double> b;
    for (int i = 0; i < samples; ++i) {
        t.push_back(i * 1000 + (i % 3)); // uneven spacing
        a.push_back(i % 7);
        b.push_back(-(i % 5));
    }
    a[static_cast<std::size_t>(samples / 2)] = 1e6;
    b[static_cast<std::size_t>(samples / 3)] = -1e6;
    const std::vector<std::size_t> picked =
        kvscope::ui::min_max_indices(t, {&a, &b}, static_cast<std::size_t>(max_points));
    QVERIFY(picked.size() <= static_cast<std::size_t>(max_points));
    QVERIFY(std::is_sorted(picked.begin(), picked.end()));
    QVERIFY(std::adjacent_find(picked.begin(), picked.end()) == picked.end());
    QCOMPARE(picked.front(), std::size_t{0});
    QCOMPARE(picked.back(), static_cast<std::size_t>(samples - 1));
    if (samples <= max_points) {
        QCOMPARE(picked.size(), static_cast<std::size_t>(samples));
    } else if (max_points >= 6) {
        QVERIFY(std::count(picked.begin(), picked.end(), samples / 2) == 1);
        QVERIFY(std::count(picked.begin(), picked.end(), samples / 3) == 1);
        QVERIFY(picked.size() > static_cast<std::size_t>(max_points) / 2);
    }
}

void TestOccupancyChart::stacks_used_cached_free() {
    kvscope::profiler::RunStore store;
    test::append_all(store, test::sample_run_events());
    OccupancyChart chart;
    chart.resize(640, 360);
    chart.set_store(&store);
    chart.show();
    QVERIFY(QTest::qWaitForWindowExposed(&chart));

    // Samples at 14, 22, 32, 41, 48 and 62 ms; x counts from the first event (1 ms).
    const QList<QPointF> used = upper_points(chart.chart(), "Used");
    const QList<QPointF> cached = upper_points(chart.chart(), "Cached");
    const QList<QPointF> free = upper_points(chart.chart(), "Free");
    QCOMPARE(used.size(), 6);
    QCOMPARE(cached.size(), 6);
    QCOMPARE(free.size(), 6);
    QCOMPARE(used[0].x(), 0.013);
    QCOMPARE(used[3], QPointF(0.040, 0));
    QCOMPARE(cached[3], QPointF(0.040, 2));
    QCOMPARE(free[3], QPointF(0.040, 16));
    QCOMPARE(used[4].y(), 2.0);
    QCOMPARE(cached[4].y(), 3.0);
    QCOMPARE(free[5].y(), 16.0);

    // Fragmentation in percent: 2 of 20 slots empty at 22 ms.
    const QList<QPointF> fragmentation = line_points(chart.chart(), "Fragmentation (%)");
    QCOMPARE(fragmentation.size(), 3);
    QCOMPARE(fragmentation[1], QPointF(0.021, 10.0));
    auto* blocks_axis = qobject_cast<QValueAxis*>(
        chart.chart()->axes(Qt::Vertical, series_named(chart.chart(), "Used")).value(0));
    QVERIFY(blocks_axis != nullptr);
    QCOMPARE(blocks_axis->max(), 16.0);
}

void TestOccupancyChart::decimates_long_runs_keeping_spikes() {
    kvscope::profiler::RunStore store;
    store.append(test::kv_event(1, EventKind::run_config, -1, -1, 1000, 16));
    append_samples(store, 0, 50000, 31337, 4242);
    OccupancyChart chart;
    chart.set_store(&store);
    const QList<QPointF> used = upper_points(chart.chart(), "Used");
    // Three stacked edges: a bucket per six points; flat buckets take one.
    QVERIFY2(used.size() <= 2000 && used.size() > 300, qPrintable(QString::number(used.size())));
    const auto [low, high] = std::minmax_element(
        used.begin(), used.end(), [](QPointF a, QPointF b) { return a.y() < b.y(); });
    QCOMPARE(high->y(), 900.0);
    QCOMPARE(low->y(), 3.0);
    // The stacked edges share their x, so the areas never cross.
    const QList<QPointF> free = upper_points(chart.chart(), "Free");
    QCOMPARE(free.size(), used.size());
    QCOMPARE(free.last().x(), used.last().x());
    QCOMPARE(used.last().x(), (10 + 49999 - 1) * 1e-3);
    QVERIFY(line_points(chart.chart(), "Fragmentation (%)").size() <= 2000);
}

void TestOccupancyChart::a_hybrid_cache_gets_a_line_per_kind_of_group() {
    // A global group growing 10, 20, 30 blocks and two window groups flat
    // at 5 each: "Used, global" and "Used, window 512 (2 groups)". Blocks
    // of 2 layer slots for 5 layers (the last window group padded).
    kvscope::profiler::RunStore store;
    kvscope::events::EngineEvent config = kvscope::events::to_event(kvscope::events::RunConfig{
        .blocks = 1000,
        .block_size = 16,
        .settings = R"({"kv_groups":[{"layers":[4],"window":0},{"layers":[0,1],"window":512},)"
                    R"({"layers":[2,3],"window":512}],"layers_per_block":2})"});
    config.time_ns = 1'000'000;
    store.append(config);
    for (int step = 0; step < 3; ++step) {
        const std::int64_t t = 10 + step;
        store.append(test::kv_event(t, EventKind::memory_sample, -1, -1, 10 * (step + 1) + 10, 0,
                                    1000 - 10 * (step + 1) - 10, 1000));
        for (int group = 0; group < 3; ++group) {
            kvscope::events::EngineEvent e = kvscope::events::to_event(
                kvscope::events::GroupBlocks{.group = group,
                                             .window = group == 0 ? 0 : 512,
                                             .used_blocks = group == 0 ? 10 * (step + 1) : 5,
                                             .cached_blocks = 0});
            e.time_ns = t * 1'000'000;
            store.append(e);
        }
    }
    OccupancyChart chart;
    chart.resize(640, 360);
    chart.set_store(&store);
    const QList<QPointF> global = line_points(chart.chart(), "Used, global");
    const QList<QPointF> windows = line_points(chart.chart(), "Used, window 512 (2 groups)");
    QCOMPARE(global.size(), 3);
    QCOMPARE(windows.size(), 3);
    QCOMPARE(global[2].y(), 30.0);
    QCOMPARE(windows[0].y(), 10.0);
    QCOMPARE(windows[2].y(), 10.0);
    // A plain cache of the same model holds what the global group holds in
    // every one of the 5 layers, 2 slots a block: 2.5 times the global
    // line, 75 at the end, over the pool's 60 blocks in use, and the axis
    // makes room for it.
    const QList<QPointF> plain_cache = line_points(chart.chart(), "Plain cache would hold");
    QCOMPARE(plain_cache.size(), 3);
    QCOMPARE(plain_cache[0].y(), 25.0);
    QCOMPARE(plain_cache[2].y(), 75.0);
    for (QAbstractAxis* axis : chart.chart()->axes(Qt::Vertical)) {
        if (auto* value_axis = qobject_cast<QValueAxis*>(axis);
            value_axis != nullptr && value_axis->titleText().contains("lock")) {
            QVERIFY(value_axis->max() >= 75.0);
        }
    }

    // A plain run's store shows no such lines.
    kvscope::profiler::RunStore plain;
    test::append_all(plain, test::sample_run_events());
    chart.set_store(&plain);
    for (QAbstractSeries* series : chart.chart()->series()) {
        QVERIFY2((!series->name().startsWith("Used, ") && !series->name().startsWith("Plain")) ||
                     !series->isVisible(),
                 qPrintable(series->name()));
    }
}

void TestOccupancyChart::refresh_takes_in_new_samples() {
    kvscope::profiler::RunStore store;
    store.append(test::kv_event(1, EventKind::run_config, -1, -1, 1000, 16));
    append_samples(store, 0, 10, -1, -1);
    OccupancyChart chart;
    chart.set_store(&store);
    QCOMPARE(upper_points(chart.chart(), "Used").size(), 10);
    append_samples(store, 10, 5, 12, -1);
    QCOMPARE(upper_points(chart.chart(), "Used").size(), 10); // not until refresh()
    chart.refresh();
    const QList<QPointF> used = upper_points(chart.chart(), "Used");
    QCOMPARE(used.size(), 15);
    QCOMPARE(used[12].y(), 900.0);
    chart.set_store(nullptr);
    QVERIFY(upper_points(chart.chart(), "Used").isEmpty());
}

void TestOccupancyChart::cursor_marks_the_shown_time() {
    kvscope::profiler::RunStore store;
    test::append_all(store, test::sample_run_events());
    OccupancyChart chart;
    chart.set_store(&store);
    // Until a time is set: the latest.
    QCOMPARE(line_points(chart.chart(), "Shown time"),
             (QList<QPointF>{QPointF(0.061, 0), QPointF(0.061, 16)}));
    chart.set_time_ns(25 * test::kMs);
    QCOMPARE(line_points(chart.chart(), "Shown time"),
             (QList<QPointF>{QPointF(0.024, 0), QPointF(0.024, 16)}));
    chart.set_time_ns(0); // before the run: its start
    QCOMPARE(line_points(chart.chart(), "Shown time").value(0), QPointF(0, 0));
}

void TestOccupancyChart::exports_as_svg() {
    kvscope::profiler::RunStore store;
    test::append_all(store, test::sample_run_events());
    OccupancyChart chart;
    chart.resize(640, 360);
    chart.set_store(&store);
    chart.show();
    QVERIFY(QTest::qWaitForWindowExposed(&chart));
    QTemporaryDir dir;
    const QString path = dir.filePath("occupancy.svg");
    QCOMPARE(kvscope::ui::export_widget(chart, path), QString());
    QFile file(path);
    QVERIFY(file.open(QIODevice::ReadOnly));
    const QByteArray svg = file.readAll();
    QVERIFY(svg.contains("<svg") && svg.contains("</svg>"));
    QVERIFY(svg.contains("Fragmentation"));
    QCOMPARE(chart.contextMenuPolicy(), Qt::ActionsContextMenu);
    QCOMPARE(chart.actions().value(0)->text(), kvscope::ui::export_action_text());
}

QTEST_MAIN(TestOccupancyChart)
#include "tst_occupancy_chart.moc"
