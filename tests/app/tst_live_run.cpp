// The app end to end with the real model: a live run fills the views and is
// recorded; pause holds the engine; the recording reopens and replays to the
// same block map; the speculative and offload demos show what they teach;
// bad models and bad files end in messages, not crashes.
#include "app/ui/main_window.h"
#include "app/ui/panels/quality_panel.h"
#include "app/ui/panels/replay_bar.h"
#include "app/ui/panels/run_panel.h"
#include "app/ui/run/engine_controller.h"
#include "app/ui/run/teaching_presets.h"
#include "app/ui/views/block_map_view.h"
#include "app/ui/views/occupancy_chart.h"
#include "engine/model_path.h"
#include "profiler/recording/recording_reader.h"
#include "profiler/store/run_store.h"
#include "tests/support/sanitized_build.h"

#include <algorithm>

#include <QChart>
#include <QCheckBox>
#include <QComboBox>
#include <QFile>
#include <QLineSeries>
#include <QMessageBox>
#include <QPushButton>
#include <QSignalSpy>
#include <QSlider>
#include <QSpinBox>
#include <QTemporaryDir>
#include <QTest>

using kvscope::ui::MainWindow;

namespace {

#define REQUIRE_MODEL()                                                                            \
    do {                                                                                           \
        if (const std::string problem =                                                            \
                kvscope::model_path_problem(kvscope::resolve_model_path());                        \
            !problem.empty()) {                                                                    \
            QSKIP(qPrintable("needs the model (run scripts/setup.sh): " +                          \
                             QString::fromStdString(problem)));                                    \
        }                                                                                          \
    } while (false)

// A small, quick run: shared-prefix requests a little apart, so later ones
// hit the first one's cached prefix.
kvscope::ui::RunSettings small_run(const QString& record_path) {
    kvscope::ui::RunSettings s;
    s.workload = "shared-prefix";
    s.preset.requests = 4;
    s.preset.rate = 4.0;
    s.preset.max_tokens = 6;
    s.cache.num_blocks = 64;
    s.backend.threads = 2;
    s.record_path = record_path.toStdString();
    return s;
}

} // namespace

class TestLiveRun : public QObject {
    Q_OBJECT

private slots:
    void live_run_fills_views_then_replays_exactly();
    void pause_holds_the_engine();
    void quality_panel_reports_what_formats_cost();
    void missing_model_is_a_message();
    void record_path_moves_on_to_a_free_name();
    void cache_policy_is_a_run_setting();
    void speculative_demo_shows_verify_steps_and_rollbacks();
    void offload_tier_is_a_run_setting();
    void hybrid_cache_gives_way_to_eviction_and_the_tier();
    void offload_demo_loads_documents_back_from_the_tier();
    void hybrid_demo_shows_each_group_against_a_plain_cache();
    void bad_recording_is_a_message();
};

void TestLiveRun::live_run_fills_views_then_replays_exactly() {
    REQUIRE_MODEL();
    QTemporaryDir dir;
    const QString path = dir.filePath("live.sqlite");
    MainWindow window;
    window.show();
    window.run_panel()->apply_settings(small_run(path));
    QSignalSpy finished(&window, &MainWindow::run_finished);
    QTest::mouseClick(window.run_panel()->start_button(), Qt::LeftButton);
    QCOMPARE(window.mode(), MainWindow::Mode::live);
    QTRY_VERIFY_WITH_TIMEOUT(finished.count() == 1, 180000 * kvscope::test::kSlowdown);
    QVERIFY2(finished.at(0).at(0).toString().contains("4 of 4 requests finished"),
             qPrintable(finished.at(0).at(0).toString()));

    const kvscope::profiler::RunStore* live = window.store();
    QVERIFY(live != nullptr);
    QCOMPARE(live->requests().size(), std::size_t{4});
    int hits = 0;
    for (const auto& r : live->requests()) {
        QCOMPARE(r.outcome, std::string("finished"));
        QVERIFY(!r.prompt_pieces.empty()); // text reached the app
        QCOMPARE(static_cast<int>(r.output_pieces.size()), r.generated);
        hits += r.cached_tokens > 0 ? 1 : 0;
    }
    QVERIFY2(hits > 0, "no request hit the shared prefix");
    QVERIFY(!live->prefix_nodes().empty());
    QVERIFY(!live->steps().empty());
    QVERIFY(!live->cpu_ops().spans.empty());
    const auto& used = live->counter(kvscope::profiler::Counter::used_blocks);
    QVERIFY(*std::max_element(used.values.begin(), used.values.end()) > 0);
    const kvscope::profiler::BlockMapState live_end = live->block_map_now();
    const std::int64_t live_events = live->event_count();

    // Reopen what was recorded: the same events, the same block map.
    QSignalSpy opened(&window, &MainWindow::recording_opened);
    window.open_recording(path);
    QTRY_VERIFY_WITH_TIMEOUT(opened.count() == 1, 60000);
    QCOMPARE(window.mode(), MainWindow::Mode::replay);
    const kvscope::profiler::RunStore* replay = window.store();
    QCOMPARE(replay->event_count(), live_events);
    const kvscope::profiler::BlockMapState replay_end = replay->block_map_at(replay->end_ns());
    QCOMPARE(replay_end.blocks().size(), live_end.blocks().size());
    for (std::size_t b = 0; b < live_end.blocks().size(); ++b) {
        QCOMPARE(replay_end.blocks()[b].use(), live_end.blocks()[b].use());
        QCOMPARE(replay_end.blocks()[b].hash, live_end.blocks()[b].hash);
    }

    // Scrub to the middle: every view shows that moment.
    QSlider* slider = window.replay_bar()->slider();
    slider->setValue(slider->maximum() / 2);
    const qint64 middle = window.shown_time_ns();
    QVERIFY(middle > replay->start_ns() && middle < replay->end_ns());
    QCOMPARE(window.block_map()->time_ns(), middle);
    // Play runs the cursor forward on its own.
    window.replay_bar()->set_speed(10.0);
    QTest::mouseClick(window.replay_bar()->play_button(), Qt::LeftButton);
    QTRY_VERIFY_WITH_TIMEOUT(window.shown_time_ns() > middle, 5000);
}

void TestLiveRun::pause_holds_the_engine() {
    REQUIRE_MODEL();
    MainWindow window;
    window.show();
    kvscope::ui::RunSettings settings = small_run(QString());
    settings.preset.requests = 16;
    settings.preset.max_tokens = 64;
    window.run_panel()->apply_settings(settings);
    QSignalSpy finished(&window, &MainWindow::run_finished);
    QTest::mouseClick(window.run_panel()->start_button(), Qt::LeftButton);
    QTRY_VERIFY_WITH_TIMEOUT(window.store() && window.store()->steps().size() > 3,
                             120000 * kvscope::test::kSlowdown);
    QTest::mouseClick(window.run_panel()->pause_button(), Qt::LeftButton);
    QVERIFY(window.engine()->paused());
    // The step under way ends, however long it takes, and the views catch up.
    QTRY_VERIFY_WITH_TIMEOUT(window.engine()->holding(), 60000);
    const std::int64_t run = window.engine()->steps_run();
    QTRY_COMPARE_WITH_TIMEOUT(static_cast<std::int64_t>(window.store()->steps().size()), run,
                              10000);
    const std::size_t steps = window.store()->steps().size();
    QTest::qWait(700); // held: no step in this time
    QCOMPARE(window.engine()->steps_run(), run);
    QCOMPARE(window.store()->steps().size(), steps);
    QTest::mouseClick(window.run_panel()->pause_button(), Qt::LeftButton); // resume
    QTRY_VERIFY_WITH_TIMEOUT(window.store()->steps().size() > steps, 30000);
    QTest::mouseClick(window.run_panel()->stop_button(), Qt::LeftButton);
    QTRY_VERIFY_WITH_TIMEOUT(finished.count() == 1, 60000);
    QVERIFY2(finished.at(0).at(0).toString().startsWith("Stopped"),
             qPrintable(finished.at(0).at(0).toString()));
    QVERIFY(window.run_panel()->start_button()->isEnabled());
}

void TestLiveRun::quality_panel_reports_what_formats_cost() {
    REQUIRE_MODEL();
    kvscope::ui::QualityPanel panel;
    QSignalSpy measured(&panel, &kvscope::ui::QualityPanel::measured);
    QSignalSpy failed(&panel, &kvscope::ui::QualityPanel::failed);
    kvscope::ui::RunSettings settings;
    settings.cache_format = {kvscope::kv::KvFormat::q8_0, kvscope::kv::KvFormat::q4_0};
    settings.eviction.kind = kvscope::kv::EvictionKind::streaming;
    settings.eviction.budget = 256;
    settings.backend.threads = 2;
    panel.measure(settings);
    QVERIFY(panel.measuring());
    QTRY_VERIFY_WITH_TIMEOUT(measured.count() + failed.count() == 1,
                             300000 * kvscope::test::kSlowdown);
    QCOMPARE(failed.count(), 0);
    const QString text = measured.at(0).at(0).toString();
    // Per 32 values q8_0 takes 34 bytes and q4_0 18, f16 64 each: 52 of 128, 59% less.
    QVERIFY2(text.contains("K q8_0, V q4_0") && text.contains("(59% less)"), qPrintable(text));
    QVERIFY2(text.contains("streaming") && text.contains("KL "), qPrintable(text));
    QVERIFY(!panel.measuring());
}

void TestLiveRun::missing_model_is_a_message() {
    QTemporaryDir dir;
    MainWindow window;
    window.show();
    kvscope::ui::RunSettings settings = small_run(QString());
    settings.model_path = dir.filePath("absent.gguf").toStdString();
    window.run_panel()->apply_settings(settings);
    QTest::mouseClick(window.run_panel()->start_button(), Qt::LeftButton);
    QMessageBox* box = nullptr;
    QTRY_VERIFY((box = window.findChild<QMessageBox*>("runFailedMessage")) != nullptr);
    QVERIFY2(box->text().contains("absent.gguf"), qPrintable(box->text()));
    QVERIFY(window.run_panel()->start_button()->isEnabled());
    QVERIFY(!window.engine()->running());
}

void TestLiveRun::record_path_moves_on_to_a_free_name() {
    QTemporaryDir dir;
    kvscope::ui::RunPanel panel;
    panel.apply_settings(small_run(dir.filePath("run.sqlite")));
    panel.advance_record_path(); // nothing there yet: keep the name
    QCOMPARE(QString::fromStdString(panel.settings().record_path), dir.filePath("run.sqlite"));
    for (const char* name : {"run.sqlite", "run-2.sqlite"}) {
        QFile file(dir.filePath(name));
        QVERIFY(file.open(QIODevice::WriteOnly));
    }
    panel.advance_record_path();
    QCOMPARE(QString::fromStdString(panel.settings().record_path), dir.filePath("run-3.sqlite"));
}

void TestLiveRun::cache_policy_is_a_run_setting() {
    QTemporaryDir dir;
    kvscope::ui::RunPanel panel;
    kvscope::ui::RunSettings settings = small_run(dir.filePath("run.sqlite"));
    settings.cache_policy = kvscope::kv::CachePolicy::lfu;
    panel.apply_settings(settings);
    QCOMPARE(panel.settings().cache_policy, kvscope::kv::CachePolicy::lfu);
    auto* combo = panel.findChild<QComboBox*>("cachePolicy");
    QVERIFY(combo != nullptr && combo->isEnabled());
    settings.prefix_caching = false;
    panel.apply_settings(settings);
    QVERIFY(!combo->isEnabled()); // no cache to reclaim from
    QVERIFY(QString::fromStdString(panel.settings().describe()).contains("prefix caching off"));
    settings.prefix_caching = true;
    panel.apply_settings(settings);
    QVERIFY(
        QString::fromStdString(panel.settings().describe()).contains("prefix caching on (lfu)"));
}

void TestLiveRun::speculative_demo_shows_verify_steps_and_rollbacks() {
    REQUIRE_MODEL();
    QTemporaryDir dir;
    const QString path = dir.filePath("spec.sqlite");
    MainWindow window;
    window.show();
    const kvscope::ui::TeachingPreset* demo =
        kvscope::ui::find_teaching_preset("speculative-decoding");
    QVERIFY(demo != nullptr);
    kvscope::ui::RunSettings settings = demo->settings;
    settings.preset.requests = 2; // quick: the demo's own settings otherwise
    settings.preset.max_tokens = 48;
    settings.preset.rate = 50.0;
    settings.record_path = path.toStdString();
    window.run_panel()->apply_settings(settings);
    QCOMPARE(window.run_panel()->settings().speculative.method, kvscope::spec::DraftMethod::ngram);
    QSignalSpy finished(&window, &MainWindow::run_finished);
    QTest::mouseClick(window.run_panel()->start_button(), Qt::LeftButton);
    QTRY_VERIFY_WITH_TIMEOUT(finished.count() == 1, 180000 * kvscope::test::kSlowdown);
    const QString summary = finished.at(0).at(0).toString();
    QVERIFY2(summary.contains("speculation kept"), qPrintable(summary));

    // The timeline's steps carry what they verified; some draft was rolled
    // back, and the block map showed its slots at that moment.
    QSignalSpy opened(&window, &MainWindow::recording_opened);
    window.open_recording(path);
    QTRY_VERIFY_WITH_TIMEOUT(opened.count() == 1, 60000);
    const kvscope::profiler::RunStore* replay = window.store();
    int verifying = 0;
    int rolled_back_moments = 0;
    for (const kvscope::profiler::StepSpan& step : replay->steps()) {
        QVERIFY(step.accepted <= step.drafted);
        if (step.drafted == 0) {
            continue;
        }
        ++verifying;
        if (step.accepted < step.drafted && step.end_ns > 0) {
            const kvscope::profiler::BlockMapState map = replay->block_map_at(step.end_ns);
            for (const kvscope::profiler::BlockState& b : map.blocks()) {
                if (b.rolled_back > 0) {
                    QVERIFY(b.use() == kvscope::profiler::BlockUse::used);
                    ++rolled_back_moments;
                    break;
                }
            }
        }
    }
    QVERIFY2(verifying > 0, "no step verified a draft");
    QVERIFY2(rolled_back_moments > 0, "no rejected draft left slots in a block");
    QVERIFY2(window.block_map()->legend_entries().contains("Rolled-back draft slots"),
             qPrintable(window.block_map()->legend_entries().join(" | ")));
}

void TestLiveRun::offload_tier_is_a_run_setting() {
    QTemporaryDir dir;
    kvscope::ui::RunPanel panel;
    kvscope::ui::RunSettings settings = small_run(dir.filePath("run.sqlite"));
    QCOMPARE(panel.settings().offload.capacity_blocks, std::int64_t{0});
    settings.offload.medium = kvscope::kv::TierMedium::file;
    settings.offload.capacity_blocks = 300;
    settings.offload_write_through = true;
    panel.apply_settings(settings);
    const kvscope::ui::RunSettings back = panel.settings();
    QCOMPARE(back.offload.medium, kvscope::kv::TierMedium::file);
    QCOMPARE(back.offload.capacity_blocks, std::int64_t{300});
    QVERIFY(back.offload_write_through);
    QVERIFY2(QString::fromStdString(back.describe()).contains("offload tier of 300 blocks in file"),
             back.describe().c_str());
    auto* blocks = panel.findChild<QSpinBox*>("offloadBlocks");
    QVERIFY(blocks != nullptr && blocks->isEnabled());
    settings.offload = {};
    settings.offload_write_through = false;
    panel.apply_settings(settings);
    QVERIFY(!blocks->isEnabled());
    QCOMPARE(panel.settings().offload.capacity_blocks, std::int64_t{0});
}

void TestLiveRun::hybrid_cache_gives_way_to_eviction_and_the_tier() {
    // The engine refuses token eviction and the offload tier with a hybrid
    // cache: choosing either turns the box off (saying why) and the run
    // takes one plain table; choosing neither gives the box back.
    QTemporaryDir dir;
    kvscope::ui::RunPanel panel;
    auto* hybrid = panel.findChild<QCheckBox*>("hybridKv");
    QVERIFY(hybrid != nullptr && hybrid->isEnabled() && hybrid->isChecked());
    kvscope::ui::RunSettings settings = small_run(dir.filePath("run.sqlite"));
    settings.eviction.kind = kvscope::kv::EvictionKind::streaming;
    settings.eviction.budget = 256;
    panel.apply_settings(settings);
    QVERIFY(!hybrid->isEnabled());
    QVERIFY(hybrid->toolTip().contains("token eviction"));
    QVERIFY(!panel.settings().hybrid_kv);
    settings.eviction = {};
    settings.offload.medium = kvscope::kv::TierMedium::memory;
    settings.offload.capacity_blocks = 64;
    panel.apply_settings(settings);
    QVERIFY(!hybrid->isEnabled());
    QVERIFY(hybrid->toolTip().contains("offload tier"));
    QVERIFY(!panel.settings().hybrid_kv);
    settings.offload = {};
    panel.apply_settings(settings);
    QVERIFY(hybrid->isEnabled());
    QVERIFY(panel.settings().hybrid_kv);
}

void TestLiveRun::offload_demo_loads_documents_back_from_the_tier() {
    REQUIRE_MODEL();
    QTemporaryDir dir;
    const QString path = dir.filePath("offload.sqlite");
    MainWindow window;
    window.show();
    const kvscope::ui::TeachingPreset* demo = kvscope::ui::find_teaching_preset("offload-tier");
    QVERIFY(demo != nullptr);
    kvscope::ui::RunSettings settings = demo->settings;
    settings.preset.requests = 8; // the six documents, then two of them again
    settings.preset.max_tokens = 2;
    settings.record_path = path.toStdString();
    window.run_panel()->apply_settings(settings);
    QCOMPARE(window.run_panel()->settings().offload.capacity_blocks, std::int64_t{512});
    QSignalSpy finished(&window, &MainWindow::run_finished);
    QTest::mouseClick(window.run_panel()->start_button(), Qt::LeftButton);
    QTRY_VERIFY_WITH_TIMEOUT(finished.count() == 1, 180000 * kvscope::test::kSlowdown);
    const QString summary = finished.at(0).at(0).toString();
    QVERIFY2(summary.contains("the offload tier gave"), qPrintable(summary));

    // Replayed: blocks were loaded back from the tier at some moment, the
    // tier's fill is a series, and the legend counts the tier's blocks.
    QSignalSpy opened(&window, &MainWindow::recording_opened);
    window.open_recording(path);
    QTRY_VERIFY_WITH_TIMEOUT(opened.count() == 1, 60000);
    const kvscope::profiler::RunStore* replay = window.store();
    QCOMPARE(replay->tier_capacity(), std::int64_t{512});
    QCOMPARE(replay->tier_medium(), std::string("memory"));
    const kvscope::profiler::CounterTrack& tier =
        replay->counter(kvscope::profiler::Counter::tier_blocks);
    QVERIFY2(!tier.values.empty(), "no block went to the tier");
    QVERIFY(*std::max_element(tier.values.begin(), tier.values.end()) <= 512);
    int loaded = 0;
    for (const kvscope::profiler::StepSpan& step : replay->steps()) {
        if (step.end_ns <= 0) {
            continue;
        }
        const kvscope::profiler::BlockMapState map = replay->block_map_at(step.end_ns);
        for (const kvscope::profiler::BlockState& b : map.blocks()) {
            loaded += b.tier == kvscope::profiler::BlockState::Tier::loaded ? 1 : 0;
        }
        if (loaded > 0) {
            break;
        }
    }
    QVERIFY2(loaded > 0, "no block in the map came back from the tier");
    const QStringList legend = window.block_map()->legend_entries();
    QVERIFY2(legend.filter("Offload tier (memory):").size() == 1, qPrintable(legend.join(" | ")));
    QVERIFY(legend.contains("Loaded from the offload tier"));
}

void TestLiveRun::hybrid_demo_shows_each_group_against_a_plain_cache() {
    // The demo on the real Gemma 3 270M, two questions over its long
    // document: six groups of 3 layers; the window groups hold about a
    // window and a chunk per request while the global group holds the
    // document; the chart's plain-cache line is six times the global one.
    const std::optional<std::filesystem::path> gemma = kvscope::named_model_path("gemma-3-270m");
    if (!gemma || !std::filesystem::exists(*gemma)) {
        QSKIP("needs Gemma 3 270M (scripts/setup.sh fetches it)");
    }
    MainWindow window;
    window.show();
    const kvscope::ui::TeachingPreset* demo = kvscope::ui::find_teaching_preset("hybrid-attention");
    QVERIFY(demo != nullptr);
    window.run_panel()->choose_preset("hybrid-attention");
    QVERIFY(window.run_panel()->findChild<QCheckBox*>("hybridKv")->isChecked());
    QCOMPARE(window.run_panel()->settings().model_path, std::string("gemma-3-270m"));
    kvscope::ui::RunSettings settings = window.run_panel()->settings();
    settings.preset.requests = 2;
    settings.preset.rate = 50.0;
    settings.preset.max_tokens = 2;
    window.run_panel()->apply_settings(settings);
    QSignalSpy finished(&window, &MainWindow::run_finished);
    QTest::mouseClick(window.run_panel()->start_button(), Qt::LeftButton);
    QTRY_VERIFY_WITH_TIMEOUT(finished.count() == 1, 300000 * kvscope::test::kSlowdown);

    const kvscope::profiler::RunStore* store = window.store();
    QCOMPARE(store->kv_group_count(), 6);
    const auto peak = [](const kvscope::profiler::CounterTrack& track) {
        return track.values.empty() ? 0.0
                                    : *std::max_element(track.values.begin(), track.values.end());
    };
    const double global_peak = peak(store->kv_groups()[0].used);
    QCOMPARE(store->kv_groups()[0].window, 0);
    // Two requests of ~3,000 tokens sharing the document: ~190 blocks.
    QVERIFY2(global_peak > 150, qPrintable(QString::number(global_peak)));
    // A step of 512 tokens: at most ceil((511 + 512) / 16) + 1 = 65 blocks a request.
    for (std::size_t g = 1; g < 6; ++g) {
        QCOMPARE(store->kv_groups()[g].window, 512);
        const double window_peak = peak(store->kv_groups()[g].used);
        QVERIFY2(window_peak <= 2 * 65 && window_peak < global_peak / 2,
                 qPrintable(QString("group %1 peaked at %2 blocks").arg(g).arg(window_peak)));
    }
    QLineSeries* plain_line = nullptr;
    for (QAbstractSeries* series : window.occupancy()->chart()->series()) {
        if (series->name() == "Plain cache would hold") {
            plain_line = qobject_cast<QLineSeries*>(series);
        }
    }
    QVERIFY(plain_line != nullptr && plain_line->isVisible());
    double plain_peak = 0;
    for (const QPointF& point : plain_line->points()) {
        plain_peak = std::max(plain_peak, point.y());
    }
    QCOMPARE(plain_peak, 6 * global_peak);
    const QStringList bands = window.block_map()->band_labels();
    QVERIFY2(bands.filter("window 512").size() == 5, qPrintable(bands.join(" | ")));
}

void TestLiveRun::bad_recording_is_a_message() {
    QTemporaryDir dir;
    const QString path = dir.filePath("junk.sqlite");
    QFile junk(path);
    QVERIFY(junk.open(QIODevice::WriteOnly));
    junk.write(QByteArray(4096, 'j'));
    junk.close();
    MainWindow window;
    window.show();
    QSignalSpy failed(&window, &MainWindow::recording_failed);
    window.open_recording(path);
    QTRY_VERIFY_WITH_TIMEOUT(failed.count() == 1, 30000);
    QVERIFY2(failed.at(0).at(0).toString().contains("not a kvscope recording"),
             qPrintable(failed.at(0).at(0).toString()));
    QCOMPARE(window.mode(), MainWindow::Mode::empty);
    QTRY_VERIFY(window.findChild<QMessageBox*>("openFailedMessage") != nullptr);
}

QTEST_MAIN(TestLiveRun)
#include "tst_live_run.moc"
