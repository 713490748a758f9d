// Every main view rendered to PNG from one recording made the same way each
// time (`kvscope record`, shared-prefix preset, seed 1, real model): checks
// that each view draws what the recording holds, and writes the images the
// README shows. KVSCOPE_SCREENSHOT_DIR=docs/images (scripts/update-screenshots.sh)
// puts them there; otherwise they go to the build directory.
#include "../support/run_process.h"
#include "app/ui/export/plot_export.h"
#include "app/ui/main_window.h"
#include "app/ui/panels/replay_bar.h"
#include "app/ui/panels/requests_panel.h"
#include "app/ui/views/block_map_view.h"
#include "app/ui/views/occupancy_chart.h"
#include "app/ui/views/prefix_view.h"
#include "app/ui/views/timeline_view.h"
#include "engine/model_path.h"

#include <memory>

#include <QDir>
#include <QFile>
#include <QImage>
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

private:
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
        {"record", "--workload", "shared-prefix", "--requests", "8", "--rate", "4", "-n", "24",
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
    window.resize(1440, 900);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    QSignalSpy opened(&window, &MainWindow::recording_opened);
    window.open_recording(recording_);
    QTRY_VERIFY_WITH_TIMEOUT(opened.count() == 1, 60000);
    const kvscope::profiler::RunStore* store = window.store();
    QCOMPARE(store->requests().size(), std::size_t{8});
    // A moment with requests decoding and the prefix shared: 60% into the run.
    const qint64 moment = store->start_ns() + (store->end_ns() - store->start_ns()) * 6 / 10;
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
    qInfo("wrote %s", qPrintable(path));
}

QTEST_MAIN(TestViewRenders)
#include "tst_view_renders.moc"
