// Every main view rendered to PNG from one recording made the same way each
// time (`kvscope record`, shared-prefix preset, seed 1, real model): checks
// that each view draws what the recording holds, and writes the images the
// README shows. KVSCOPE_SCREENSHOT_DIR=docs/images (scripts/update-screenshots.sh)
// puts them there; otherwise they go to the build directory.
#include "app/ui/export/plot_export.h"
#include "app/ui/main_window.h"
#include "app/ui/panels/replay_bar.h"
#include "app/ui/panels/requests_panel.h"
#include "app/ui/views/block_map_view.h"
#include "app/ui/views/occupancy_chart.h"
#include "app/ui/views/prefix_view.h"
#include "app/ui/views/request_colors.h"
#include "app/ui/views/timeline_view.h"
#include "app/ui/views/wrapping_legend.h"
#include "engine/events/typed_events.h"
#include "engine/model_path.h"
#include "profiler/store/run_store.h"
#include "tests/support/cut_chart_text.h"
#include "tests/support/run_process.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <memory>

#include <QAreaSeries>
#include <QChart>
#include <QChartView>
#include <QDir>
#include <QFile>
#include <QImage>
#include <QLineSeries>
#include <QSet>
#include <QSignalSpy>
#include <QTabWidget>
#include <QTableView>
#include <QTemporaryDir>
#include <QTest>

using kvscope::ui::MainWindow;

class TestViewRenders : public QObject {
    Q_OBJECT

private slots:
    void initTestCase();
    void each_view_renders_the_recording_data();
    void each_view_renders_the_recording();
    void block_marks_are_painted();
    void no_chart_text_is_cut_at_the_screenshot_size();

private:
    // `window` at the README screenshot's size, the recording open in it.
    void open_at_screenshot_size(MainWindow& window) {
        window.resize(1440, 900);
        window.show();
        QVERIFY(QTest::qWaitForWindowExposed(&window));
        QSignalSpy opened(&window, &MainWindow::recording_opened);
        window.open_recording(recording_);
        QTRY_VERIFY_WITH_TIMEOUT(opened.count() == 1, 60000);
    }

    QTemporaryDir dir_;
    QString recording_;
    QDir output_;
};

namespace {

// Distinct colours in a sample of pixels: a blank or one-colour view has few.
int colour_variety(const QImage& image) {
    QSet<QRgb> colours;
    for (int y = 0; y < image.height(); y += 3) {
        for (int x = 0; x < image.width(); x += 3) {
            colours.insert(image.pixel(x, y));
        }
    }
    return static_cast<int>(colours.size());
}

// The pixel of `image` (a grab at `ratio` device pixels per pixel) at `pos`.
QColor pixel(const QImage& image, qreal ratio, QPointF pos) {
    return image.pixelColor((pos * ratio).toPoint());
}

QString rgb(const QColor& c) {
    return QString("#%1").arg(c.rgb() & 0xffffff, 6, 16, QChar('0'));
}

// Every block of the map at `moment` painted as its state says: a used
// block's square in the colour of the request that owns it (a shared one
// with a border of another colour), a cached block in its request's tint
// hatched in its colour, a free one grey. Returns the first difference.
QString check_block_map(const kvscope::ui::BlockMapView& map, const QImage& image, qreal ratio,
                        const kvscope::profiler::BlockMapState& state) {
    using kvscope::profiler::BlockUse;
    using kvscope::ui::request_color;
    using kvscope::ui::request_tint;
    if (map.block_count() != static_cast<int>(state.blocks().size())) {
        return QString("%1 blocks painted, the state has %2")
            .arg(map.block_count())
            .arg(state.blocks().size());
    }
    std::array<int, 4> seen{}; // free, one owner, shared, cached
    for (int b = 0; b < map.block_count(); ++b) {
        const kvscope::profiler::BlockState& block = state.blocks()[static_cast<std::size_t>(b)];
        const QRect square = map.block_rect(b);
        if (square.width() < 12 || map.block_at(square.center()) != b) {
            return QString("block %1: square %2x%3 at (%4, %5), block_at says %6")
                .arg(b)
                .arg(square.width())
                .arg(square.height())
                .arg(square.x())
                .arg(square.y())
                .arg(map.block_at(square.center()));
        }
        const QColor centre = pixel(image, ratio, QRectF(square).center());
        // Inside a shared block's border, clear of its reference count.
        const QPointF inner(square.left() + square.width() / 4.0 + 0.5,
                            square.top() + square.height() / 4.0 + 0.5);
        QString problem;
        switch (block.use()) {
        case BlockUse::free:
            ++seen[0];
            if (centre != kvscope::ui::BlockMapView::free_color()) {
                problem = "free, painted " + rgb(centre);
            }
            break;
        case BlockUse::used: {
            const QColor owner = request_color(block.owners.front());
            if (block.ref_count() == 1) {
                ++seen[1];
                if (centre != owner) {
                    problem = QString("owned by request %1 (%2), painted %3")
                                  .arg(block.owners.front())
                                  .arg(rgb(owner), rgb(centre));
                }
            } else {
                ++seen[2];
                const QColor inside = pixel(image, ratio, inner);
                const QColor corner =
                    pixel(image, ratio, QPointF(square.topLeft()) + QPointF(0.5, 0.5));
                if (inside != owner || corner == owner) {
                    problem = QString("shared, first owner request %1 (%2), painted %3 inside, %4 "
                                      "on its border")
                                  .arg(block.owners.front())
                                  .arg(rgb(owner), rgb(inside), rgb(corner));
                }
            }
            break;
        }
        case BlockUse::cached: {
            ++seen[3];
            // The tint with the colour's hatch lines: only those two colours,
            // both present.
            QSet<QRgb> colours;
            for (int y = square.top(); y <= square.bottom(); ++y) {
                for (int x = square.left(); x <= square.right(); ++x) {
                    colours.insert(pixel(image, ratio, QPointF(x + 0.5, y + 0.5)).rgb());
                }
            }
            const QSet<QRgb> expected{request_tint(block.cached_by).rgb(),
                                      request_color(block.cached_by).rgb()};
            if (colours != expected) {
                problem = QString("cached by request %1, painted %2 colours, not its tint and "
                                  "colour")
                              .arg(block.cached_by)
                              .arg(colours.size());
            }
            break;
        }
        }
        if (!problem.isEmpty()) {
            return QString("block %1: %2").arg(b).arg(problem);
        }
    }
    // The moment shows every kind but cached (its prefix is still in use).
    if (seen[0] == 0 || seen[1] == 0 || seen[2] == 0) {
        return QString("the moment has %1 free, %2 single-owner, %3 shared blocks: the check "
                       "misses a kind")
            .arg(seen[0])
            .arg(seen[1])
            .arg(seen[2]);
    }
    return {};
}

QLineSeries* upper_series(const QChart& chart, const QString& name) {
    for (QAbstractSeries* series : chart.series()) {
        if (series->name() == name) {
            if (auto* area = qobject_cast<QAreaSeries*>(series)) {
                return area->upperSeries();
            }
        }
    }
    return nullptr;
}

// The chart's stacked series against the block map the recording's block
// events rebuild at each sample's time, and the areas' fill under a few of
// those points. Returns the first difference.
QString check_occupancy(const QWidget& widget, const kvscope::ui::OccupancyChart& chart,
                        const QImage& image, qreal ratio, const kvscope::profiler::RunStore& store,
                        qint64 moment) {
    using kvscope::profiler::Counter;
    const QLineSeries* used = upper_series(*chart.chart(), "Used");
    const QLineSeries* cached = upper_series(*chart.chart(), "Cached");
    const QLineSeries* free_top = upper_series(*chart.chart(), "Free");
    if (used == nullptr || cached == nullptr || free_top == nullptr) {
        return "the chart lacks a Used, Cached or Free area";
    }
    const kvscope::profiler::CounterTrack& samples = store.counter(Counter::used_blocks);
    // A run this short is drawn point for point (no decimation).
    if (samples.t_ns.size() < 20 || used->count() != static_cast<qsizetype>(samples.t_ns.size()) ||
        cached->count() != used->count() || free_top->count() != used->count()) {
        return QString("%1 samples, %2/%3/%4 points")
            .arg(samples.t_ns.size())
            .arg(used->count())
            .arg(cached->count())
            .arg(free_top->count());
    }
    auto* view = widget.findChild<QChartView*>();
    // The edges are no series of the chart: map through the area they top.
    QAbstractSeries* area = chart.chart()->series().constFirst();
    const auto position = [&](double x, double y) {
        const QPointF in_chart = chart.chart()->mapToPosition(QPointF(x, y), area);
        return QPointF(
            view->mapTo(&widget, view->mapFromScene(chart.chart()->mapToScene(in_chart))));
    };
    const double moment_x = static_cast<double>(moment - store.start_ns()) / 1e9;
    const double cursor_px = position(moment_x, 0).x();
    int used_pixels = 0;
    int cached_pixels = 0;
    int free_pixels = 0;
    for (qsizetype i = 0; i < used->count(); ++i) {
        const qint64 t = samples.t_ns[static_cast<std::size_t>(i)];
        const kvscope::profiler::BlockCounts counts = store.block_map_at(t).counts();
        const QPointF u = used->at(i);
        const QPointF c = cached->at(i);
        const QPointF f = free_top->at(i);
        double x = static_cast<double>(t - store.start_ns()) / 1e9;
        if (std::abs(u.x() - x) > 1e-9 || c.x() != u.x() || f.x() != u.x() ||
            u.y() != counts.used || c.y() != counts.used + counts.cached ||
            f.y() != counts.used + counts.cached + counts.free || f.y() != store.total_blocks()) {
            return QString("at %1 s the chart stacks %2 / %3 / %4 blocks, the block map has %5 "
                           "used, %6 cached, %7 free of %8")
                .arg(x)
                .arg(u.y())
                .arg(c.y())
                .arg(f.y())
                .arg(counts.used)
                .arg(counts.cached)
                .arg(counts.free)
                .arg(store.total_blocks());
        }
        // Halfway to the next point when nothing changes in between (the
        // edges there are flat, far from the probes), clear of the cursor
        // line: each area's fill.
        if (i + 1 == used->count() || used->at(i + 1).y() != u.y() ||
            cached->at(i + 1).y() != c.y()) {
            continue;
        }
        const double x_next = used->at(i + 1).x();
        const double probe_px = (position(x, 0).x() + position(x_next, 0).x()) / 2;
        if (position(x_next, 0).x() - position(x, 0).x() < 4 ||
            std::abs(probe_px - cursor_px) < 4) {
            continue;
        }
        x = (x + x_next) / 2;
        if (u.y() >= 4) {
            const QColor p = pixel(image, ratio, position(x, u.y() / 2));
            if (p != QColor(76, 120, 168)) {
                return QString("at %1 s, %2 blocks high, the used area is %3")
                    .arg(x)
                    .arg(u.y() / 2)
                    .arg(rgb(p));
            }
            ++used_pixels;
        }
        if (c.y() - u.y() >= 4) {
            const QColor p = pixel(image, ratio, position(x, (u.y() + c.y()) / 2));
            if (p != QColor(242, 193, 78)) {
                return QString("at %1 s the cached area is %2").arg(x).arg(rgb(p));
            }
            ++cached_pixels;
        }
        if (f.y() - c.y() >= 4) {
            const QColor p = pixel(image, ratio, position(x, (c.y() + f.y()) / 2));
            if (p != QColor(215, 215, 215)) {
                return QString("at %1 s the free area is %2").arg(x).arg(rgb(p));
            }
            ++free_pixels;
        }
    }
    if (used_pixels < 5 || free_pixels < 5) { // cached: where it holds still
        return QString("only %1 used, %2 cached and %3 free pixels checked")
            .arg(used_pixels)
            .arg(cached_pixels)
            .arg(free_pixels);
    }
    return {};
}

// A lane for each request (and none for a request the run does not have),
// and spans painted where the steps and request states are: a pixel near
// the right end of every span wide enough to hold one (clear of its text and
// of the cursor) in its phase or state colour, and the gaps between steps
// in none of the phase colours. Returns the first difference.
QString check_timeline(const kvscope::ui::TimelineView& timeline, const QImage& image, qreal ratio,
                       qint64 moment) {
    using kvscope::ui::TimelineView;
    const kvscope::profiler::RunStore& store = *timeline.store();
    const QRect area = timeline.track_area();
    const kvscope::ui::TimeAxis& axis = timeline.axis();
    const double cursor_px = area.left() + axis.x_of(moment);
    // Where a span [begin, end) can be checked: 2 px inside its right end.
    const auto probe_x = [&](qint64 begin, qint64 end) -> double {
        const double x0 = area.left() + axis.x_of(begin);
        const double x1 = area.left() + axis.x_of(end);
        if (x1 - x0 < 8 || (cursor_px > x0 - 4 && cursor_px < x1 + 4)) {
            return -1;
        }
        return std::floor(x1) - 2.5;
    };
    std::vector<QRect> lanes;
    std::int64_t last_id = -1;
    for (const kvscope::profiler::RequestRecord& request : store.requests()) {
        const QRect lane = timeline.row_rect(QString("Request %1").arg(request.id));
        if (lane.isEmpty() || lane.top() < area.top() || lane.bottom() > area.bottom() ||
            (!lanes.empty() &&
             (lane.top() <= lanes.back().bottom() || lane.height() != lanes.back().height()))) {
            return QString("request %1 has no lane of its own below the last").arg(request.id);
        }
        lanes.push_back(lane);
        last_id = std::max(last_id, request.id);
        int probed = 0;
        for (const kvscope::profiler::LaneSpan& span : request.lanes) {
            const double x = probe_x(span.begin_ns, span.end_ns);
            if (x < 0) {
                continue;
            }
            const QColor p = pixel(image, ratio, QPointF(x, lane.center().y() + 0.5));
            if (p != TimelineView::lane_color(span.state)) {
                return QString("request %1's %2 span is painted %3")
                    .arg(request.id)
                    .arg(QString::fromUtf8(kvscope::profiler::lane_state_name(span.state)))
                    .arg(rgb(p));
            }
            ++probed;
        }
        if (probed == 0) {
            return QString("no span of request %1 wide enough to check").arg(request.id);
        }
    }
    if (lanes.size() != store.requests().size() ||
        !timeline.row_rect(QString("Request %1").arg(last_id + 1)).isEmpty()) {
        return QString("%1 lanes for %2 requests").arg(lanes.size()).arg(store.requests().size());
    }
    const QRect steps = timeline.row_rect("Steps");
    const double y = steps.center().y() + 0.5;
    QSet<QRgb> phase_colours;
    for (const kvscope::profiler::StepSpan& step : store.steps()) {
        phase_colours.insert(TimelineView::phase_color(step.phase()).rgb());
    }
    int probed_steps = 0;
    int probed_gaps = 0;
    for (std::size_t i = 0; i < store.steps().size(); ++i) {
        const kvscope::profiler::StepSpan& step = store.steps()[i];
        if (const double x = probe_x(step.begin_ns, step.end_ns); x >= 0) {
            const QColor p = pixel(image, ratio, QPointF(x, y));
            if (p != TimelineView::phase_color(step.phase())) {
                return QString("step %1 is painted %2, its phase colour is %3")
                    .arg(step.step)
                    .arg(rgb(p), rgb(TimelineView::phase_color(step.phase())));
            }
            ++probed_steps;
        }
        if (i + 1 < store.steps().size()) {
            const qint64 next = store.steps()[i + 1].begin_ns;
            if (const double x = probe_x(step.end_ns, next); x >= 0) {
                const QColor p = pixel(image, ratio, QPointF(x, y));
                if (phase_colours.contains(p.rgb())) {
                    return QString("the idle gap after step %1 is painted like a step")
                        .arg(step.step);
                }
                ++probed_gaps;
            }
        }
    }
    // (This run steps back to back: gaps are checked where there are some.)
    if (probed_steps < 5) {
        return QString("only %1 steps and %2 gaps wide enough to check")
            .arg(probed_steps)
            .arg(probed_gaps);
    }
    return {};
}

} // namespace

void TestViewRenders::initTestCase() {
    if (const std::string problem = kvscope::model_path_problem(kvscope::resolve_model_path());
        !problem.empty()) {
        QSKIP(qPrintable("needs the model (run scripts/setup.sh): " +
                         QString::fromStdString(problem)));
    }
    QVERIFY(dir_.isValid());
    recording_ = dir_.filePath("demo.sqlite");
    const kvscope::test::ProcessResult recorded = kvscope::test::run_process(
        KVSCOPE_CLI_PATH,
        {"record", "--workload", "shared-prefix", "--requests", "8", "--rate", "8", "-n", "48",
         "--seed", "1", "--cache-tokens", "1024", "--out", recording_},
        QProcessEnvironment::systemEnvironment(), 300'000);
    QVERIFY2(recorded.finished && recorded.exit_code == 0, qPrintable(recorded.err));
    const QByteArray target = qgetenv("KVSCOPE_SCREENSHOT_DIR");
    output_ = QDir(target.isEmpty() ? QString(KVSCOPE_BINARY_DIR "/screenshots")
                                    : QString::fromLocal8Bit(target));
    QVERIFY(output_.mkpath("."));
}

void TestViewRenders::each_view_renders_the_recording_data() {
    QTest::addColumn<QString>("view");
    for (const char* view :
         {"window", "block-map", "occupancy", "timeline", "prefix-hits", "requests"}) {
        QTest::newRow(view) << QString(view);
    }
}

void TestViewRenders::each_view_renders_the_recording() {
    QFETCH(QString, view);
    MainWindow window;
    open_at_screenshot_size(window);
    if (QTest::currentTestFailed()) {
        return;
    }
    const kvscope::profiler::RunStore* store = window.store();
    QCOMPARE(store->requests().size(), std::size_t{8});
    // A moment with requests decoding and the prefix shared: 60% into the run,
    // or later if the last request had not yet come by then (arrivals are
    // paced in wall-clock time, so on a fast machine the run is short).
    qint64 last_admitted = 0;
    for (const kvscope::profiler::RequestRecord& r : store->requests()) {
        last_admitted = std::max<qint64>(last_admitted, std::max(r.arrival_ns, r.admitted_ns));
    }
    const qint64 moment = std::max<qint64>(
        store->start_ns() + (store->end_ns() - store->start_ns()) * 6 / 10, last_admitted + 1);
    window.replay_bar()->set_time_ns(moment);
    window.show_time(moment);
    window.requests()->select_request(3);

    // Each view on its own at a size that suits it, on the window's store.
    std::unique_ptr<QWidget> single;
    QSize size(1000, 560);
    if (view == "block-map") {
        auto* map = new kvscope::ui::BlockMapView;
        single.reset(map);
        map->set_store(store);
        map->set_time_ns(moment);
        size = QSize(720, 360);
        // The map at that moment holds blocks of running requests, some shared.
        const kvscope::profiler::BlockCounts counts = store->block_map_at(moment).counts();
        QVERIFY(counts.used > 0 && counts.shared > 0);
    } else if (view == "occupancy") {
        auto* chart = new kvscope::ui::OccupancyChart;
        single.reset(chart);
        chart->set_store(store);
        chart->set_time_ns(moment);
        size = QSize(720, 360);
    } else if (view == "timeline") {
        auto* timeline = new kvscope::ui::TimelineView;
        single.reset(timeline);
        timeline->set_store(store);
        timeline->fit_all();
        timeline->set_cursor_ns(moment);
        size = QSize(1200, 520);
    } else if (view == "prefix-hits") {
        auto* prefix = new kvscope::ui::PrefixView;
        single.reset(prefix);
        prefix->set_store(store);
        prefix->set_time_ns(moment);
    } else if (view == "requests") {
        auto* requests = new kvscope::ui::RequestsPanel;
        single.reset(requests);
        requests->set_store(store);
        requests->set_time_ns(moment);
        requests->select_request(3);
    }
    QWidget* widget = &window;
    if (single) {
        single->resize(size);
        single->show();
        QVERIFY(QTest::qWaitForWindowExposed(single.get()));
        widget = single.get();
    }
    if (view == "requests") {
        QCOMPARE(static_cast<kvscope::ui::RequestsPanel*>(widget)->table()->model()->rowCount(), 8);
    }
    QTest::qWait(50); // charts lay out on the next event loop turn
    const QString path = output_.filePath("kvscope-ui-" + view + ".png");
    const QString error = kvscope::ui::export_widget(*widget, path);
    QVERIFY2(error.isEmpty(), qPrintable(error));
    const QImage image(path);
    QVERIFY2(!image.isNull(), qPrintable(path));
    QCOMPARE(image.size(), widget->size() * widget->devicePixelRatio());
    QVERIFY2(
        colour_variety(image) > 12,
        qPrintable(QString("%1 looks blank (%2 colours)").arg(path).arg(colour_variety(image))));
    // What each view must draw from the recording.
    const qreal ratio = widget->devicePixelRatio();
    QString problem;
    if (view == "block-map") {
        problem = check_block_map(*static_cast<kvscope::ui::BlockMapView*>(widget), image, ratio,
                                  store->block_map_at(moment));
    } else if (view == "occupancy") {
        problem = check_occupancy(*widget, *static_cast<kvscope::ui::OccupancyChart*>(widget),
                                  image, ratio, *store, moment);
    } else if (view == "timeline") {
        problem =
            check_timeline(*static_cast<kvscope::ui::TimelineView*>(widget), image, ratio, moment);
    }
    QVERIFY2(problem.isEmpty(), qPrintable(view + ": " + problem));
    qInfo("wrote %s", qPrintable(path));
}

void TestViewRenders::block_marks_are_painted() {
    // Synthetic events: block 0 loaded back from the offload tier, block 1
    // holding three slots of a rejected draft, block 2 free.
    namespace ev = kvscope::events;
    const auto at = [](std::int64_t t, ev::EngineEvent e) {
        e.time_ns = t;
        return e;
    };
    kvscope::profiler::RunStore store;
    store.append(at(1, ev::to_event(ev::RunConfig{
                           .blocks = 3,
                           .block_size = 4,
                           .settings = "{\"offload_tier\":\"memory\",\"offload_blocks\":8}"})));
    store.append(at(2, ev::to_event(ev::BlockAllocated{.block = 0, .request = 0})));
    store.append(at(3, ev::to_event(ev::BlockReloaded{
                           .block = 0, .request = 0, .hash = 5, .bytes = 64, .tier_blocks = 1})));
    store.append(at(4, ev::to_event(ev::BlockAllocated{.block = 1, .request = 1})));
    store.append(at(5, ev::to_event(ev::DraftVerified{
                           .request = 1, .drafted = 3, .accepted = 0, .entries = 1})));
    kvscope::ui::BlockMapView view;
    view.resize(420, 260);
    view.set_store(&store);
    const QImage image = view.grab().toImage();
    const qreal ratio = image.devicePixelRatio();
    const QRect loaded = view.block_rect(0);
    const QRect drafted = view.block_rect(1);
    QVERIFY(loaded.width() >= 12);
    // The tier's corner, top right; the band along the bottom, 3 of 4 slots.
    QCOMPARE(rgb(pixel(image, ratio, QPointF(loaded.right() - 1.5, loaded.top() + 1.5))),
             rgb(QColor(0, 150, 136)));
    QCOMPARE(rgb(pixel(image, ratio, QPointF(loaded.left() + 1.5, loaded.bottom() - 1.5))),
             rgb(kvscope::ui::request_color(0)));
    QCOMPARE(rgb(pixel(image, ratio, QPointF(drafted.center().x() + 0.5, drafted.bottom() - 1.5))),
             rgb(QColor(220, 30, 30)));
    QCOMPARE(rgb(pixel(image, ratio, QPointF(drafted.center().x() + 0.5, drafted.top() + 1.5))),
             rgb(kvscope::ui::request_color(1)));
    const QStringList legend = view.legend_entries();
    QVERIFY2(legend.contains("Rolled-back draft slots"), qPrintable(legend.join(" | ")));
    QVERIFY2(legend.contains("Offload tier (memory): 1 of 8 blocks"),
             qPrintable(legend.join(" | ")));
}

void TestViewRenders::no_chart_text_is_cut_at_the_screenshot_size() {
    MainWindow window;
    open_at_screenshot_size(window);
    if (QTest::currentTestFailed()) {
        return;
    }
    // Each tab in turn: the charts under the window's tabs too.
    for (int tab = 0; tab < window.tabs()->count(); ++tab) {
        if (!window.tabs()->isTabVisible(tab)) {
            continue;
        }
        window.tabs()->setCurrentIndex(tab);
        QTRY_VERIFY(kvscope::test::charts_laid_out(window)); // on the next event loop turns
        const QStringList cut = kvscope::test::cut_chart_texts(window);
        QVERIFY2(cut.isEmpty(), qPrintable(window.tabs()->tabText(tab) + ": " + cut.join("; ")));
    }
    QVERIFY(window.occupancy()->legend()->entries().contains("Fragmentation (%)"));
}

QTEST_MAIN(TestViewRenders)
#include "tst_view_renders.moc"
