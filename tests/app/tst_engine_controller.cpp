// The app's engine controller on the tiny test model (no download needed):
// a run ends with a summary and a complete recording; a stop mid-run leaves a
// valid, readable file marked interrupted; settings problems and a record
// path that cannot be written end in a message, never a crash, and leave the
// controller ready for the next run.
#include "app/ui/run/engine_controller.h"
#include "profiler/recording/recording.h"
#include "profiler/recording/recording_reader.h"
#include "profiler/recording/recording_stats.h"
#include "tests/support/tiny_model.h"

#include <QDir>
#include <QFile>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

using kvscope::ui::EngineController;
using kvscope::ui::RunSettings;

namespace {

RunSettings tiny_run(const QString& record_path) {
    RunSettings s;
    s.model_path = tiny_model_path();
    s.workload = "shared-prefix";
    s.preset.requests = 6;
    s.preset.rate = 50.0;
    s.preset.max_tokens = 8;
    s.cache.num_blocks = 64;
    s.backend.threads = 1;
    s.record_path = record_path.toStdString();
    return s;
}

// Waits for the run to end either way; returns the spies' counts.
void wait_for_end(QSignalSpy& finished, QSignalSpy& failed) {
    QTRY_VERIFY_WITH_TIMEOUT(finished.count() + failed.count() > 0, 120000);
}

} // namespace

class TestEngineController : public QObject {
    Q_OBJECT

private slots:
    void a_run_ends_with_a_complete_recording();
    void stop_while_recording_leaves_a_valid_file();
    void settings_problems_are_messages_data();
    void settings_problems_are_messages();
    void unwritable_record_path_is_a_message_data();
    void unwritable_record_path_is_a_message();
};

void TestEngineController::a_run_ends_with_a_complete_recording() {
    QTemporaryDir dir;
    const QString path = dir.filePath("tiny.sqlite");
    EngineController controller;
    QSignalSpy finished(&controller, &EngineController::finished);
    QSignalSpy failed(&controller, &EngineController::failed);
    QVERIFY(controller.start(tiny_run(path)));
    QVERIFY(!controller.start(tiny_run(path))); // one run at a time
    wait_for_end(finished, failed);
    QVERIFY2(failed.isEmpty(), qPrintable(failed.value(0).value(0).toString()));
    const QString summary = finished.at(0).at(0).toString();
    QVERIFY2(summary.startsWith("Done in") && summary.contains("of 6 requests finished") &&
                 summary.contains(path),
             qPrintable(summary));
    QVERIFY(!controller.running());

    QCOMPARE(kvscope::profiler::recording_problem(path.toStdString()), std::string());
    const auto metadata = kvscope::profiler::recording_metadata(path.toStdString());
    QCOMPARE(metadata.at("complete"), std::string("yes"));
    QCOMPARE(metadata.at("recorded_by"), std::string("kvscope-ui"));
    const auto stats = kvscope::profiler::compute_stats(path.toStdString());
    QCOMPARE(stats.requests, std::int64_t{6});
    // Every request ended one way or another (a random model may stop early
    // on its end token, never later than max_tokens).
    QCOMPARE(stats.finished + stats.aborted + stats.rejected, std::int64_t{6});
    QVERIFY(stats.generated_tokens >= 6 && stats.generated_tokens <= 6 * 8);
    QVERIFY(stats.steps > 0);
}

void TestEngineController::stop_while_recording_leaves_a_valid_file() {
    QTemporaryDir dir;
    const QString path = dir.filePath("stopped.sqlite");
    RunSettings settings = tiny_run(path);
    settings.preset.requests = 2000; // far more than the test waits for
    settings.preset.rate = 20.0;
    settings.preset.max_tokens = 64;
    EngineController controller;
    QSignalSpy finished(&controller, &EngineController::finished);
    QSignalSpy failed(&controller, &EngineController::failed);
    QVERIFY(controller.start(settings));
    QTRY_VERIFY_WITH_TIMEOUT(controller.steps_run() >= 5, 60000);
    controller.stop();
    wait_for_end(finished, failed);
    QVERIFY2(failed.isEmpty(), qPrintable(failed.value(0).value(0).toString()));
    const QString summary = finished.at(0).at(0).toString();
    QVERIFY2(summary.startsWith("Stopped after"), qPrintable(summary));
    QVERIFY(!controller.running());

    QCOMPARE(kvscope::profiler::recording_problem(path.toStdString()), std::string());
    const auto metadata = kvscope::profiler::recording_metadata(path.toStdString());
    QCOMPARE(metadata.at("complete"), std::string("interrupted"));
    const auto stats = kvscope::profiler::compute_stats(path.toStdString());
    QVERIFY2(stats.steps >= 5, qPrintable(QString::number(stats.steps)));
    QVERIFY(stats.requests > 0 && stats.requests < 2000);

    // The controller takes a new run after a stop.
    const QString again = dir.filePath("again.sqlite");
    QVERIFY(controller.start(tiny_run(again)));
    QTRY_VERIFY_WITH_TIMEOUT(finished.count() + failed.count() == 2, 120000);
    QCOMPARE(failed.count(), 0);
    QCOMPARE(kvscope::profiler::recording_problem(again.toStdString()), std::string());
}

void TestEngineController::settings_problems_are_messages_data() {
    QTest::addColumn<QString>("field");
    QTest::addColumn<QString>("message");
    QTest::newRow("block size") << "block_size"
                                << "the block size must be between 1 and 1024 tokens";
    QTest::newRow("one block") << "blocks"
                               << "the KV cache needs at least 2 blocks";
    QTest::newRow("no requests") << "requests"
                                 << "the workload needs at least one request";
    QTest::newRow("no arrivals") << "rate"
                                 << "the arrival rate must be above 0";
    QTest::newRow("no tokens") << "max_tokens"
                               << "at least one token";
    QTest::newRow("no sequences") << "max_num_seqs"
                                  << "at least one sequence";
}

void TestEngineController::settings_problems_are_messages() {
    QFETCH(QString, field);
    QFETCH(QString, message);
    RunSettings settings = tiny_run(QString());
    if (field == "block_size") {
        settings.block_size = 0;
    } else if (field == "blocks") {
        settings.cache.num_blocks = 1;
    } else if (field == "requests") {
        settings.preset.requests = 0;
    } else if (field == "rate") {
        settings.preset.rate = 0;
    } else if (field == "max_tokens") {
        settings.preset.max_tokens = 0;
    } else if (field == "max_num_seqs") {
        settings.scheduler.max_num_seqs = 0;
    }
    EngineController controller;
    QSignalSpy started(&controller, &EngineController::started);
    QSignalSpy failed(&controller, &EngineController::failed);
    QVERIFY(!controller.start(settings));
    QCOMPARE(failed.count(), 1);
    QVERIFY2(failed.at(0).at(0).toString().contains(message),
             qPrintable(failed.at(0).at(0).toString()));
    QCOMPARE(started.count(), 0);
    QVERIFY(!controller.running());
    // Nothing is left half-started: a good run follows.
    QSignalSpy finished(&controller, &EngineController::finished);
    QVERIFY(controller.start(tiny_run(QString())));
    QTRY_VERIFY_WITH_TIMEOUT(finished.count() + failed.count() == 2, 120000);
    QCOMPARE(finished.count(), 1);
}

void TestEngineController::unwritable_record_path_is_a_message_data() {
    QTest::addColumn<QString>("where");
    QTest::addColumn<QString>("message");
    QTest::newRow("missing folder") << "missing/run.sqlite"
                                    << "cannot create";
    QTest::newRow("existing file") << "taken.sqlite"
                                   << "exists";
    QTest::newRow("a folder") << "folder"
                              << "exists";
}

void TestEngineController::unwritable_record_path_is_a_message() {
    QFETCH(QString, where);
    QFETCH(QString, message);
    QTemporaryDir dir;
    QFile taken(dir.filePath("taken.sqlite"));
    QVERIFY(taken.open(QIODevice::WriteOnly));
    taken.write("a recording to compare with");
    taken.close();
    QVERIFY(QDir(dir.path()).mkdir("folder"));
    const QString path = dir.filePath(where);

    EngineController controller;
    QSignalSpy finished(&controller, &EngineController::finished);
    QSignalSpy failed(&controller, &EngineController::failed);
    controller.start(tiny_run(path));
    wait_for_end(finished, failed);
    QCOMPARE(finished.count(), 0);
    const QString text = failed.at(0).at(0).toString();
    QVERIFY2(text.contains(message) && text.contains(path), qPrintable(text));
    QTRY_VERIFY(!controller.running());
    QCOMPARE(controller.steps_run(), std::int64_t{0}); // the engine never ran
    // A file in the way is never overwritten.
    QFile check(dir.filePath("taken.sqlite"));
    QVERIFY(check.open(QIODevice::ReadOnly));
    QCOMPARE(check.readAll(), QByteArray("a recording to compare with"));
}

QTEST_MAIN(TestEngineController)
#include "tst_engine_controller.moc"
