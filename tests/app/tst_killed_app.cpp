// kvscope-ui killed (SIGKILL) in the middle of a live run it records
// (--demo --record): the partial recording opens in the app afterwards, with
// the events of every commit before the kill (issue 18's faults). Needs the
// real model, which the demo runs.
#include "app/ui/main_window.h"
#include "engine/model_path.h"
#include "tests/support/sqlite_query.h"

#include <QElapsedTimer>
#include <QFile>
#include <QProcess>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

using kvscope::test::query_int;
using kvscope::ui::MainWindow;

namespace {} // namespace

class TestKilledApp : public QObject {
    Q_OBJECT

private slots:
    void partial_recording_of_a_killed_app_opens();
};

void TestKilledApp::partial_recording_of_a_killed_app_opens() {
    if (const std::string problem = kvscope::model_path_problem(kvscope::resolve_model_path());
        !problem.empty()) {
        QSKIP(qPrintable("needs the model (run scripts/setup.sh): " +
                         QString::fromStdString(problem)));
    }
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const QString path = dir.filePath("killed.sqlite");

    QProcess app;
    QProcessEnvironment environment = QProcessEnvironment::systemEnvironment();
    environment.insert("QT_QPA_PLATFORM", "offscreen");
    app.setProcessEnvironment(environment);
    app.start(KVSCOPE_UI_PATH, {"--demo", "--record", path});
    QVERIFY(app.waitForStarted(10'000));
    // Killed once a few hundred events are in: mid-run (the demo's run is
    // tens of thousands), past its first commits.
    std::int64_t seen = -1;
    QElapsedTimer waited;
    waited.start();
    while (seen < 500 && app.state() == QProcess::Running && waited.elapsed() < 120'000) {
        QTest::qWait(100);
        seen = query_int(path.toStdString(), "SELECT count(*) FROM KVSCOPE_EVENTS");
    }
    QVERIFY2(seen >= 500, qPrintable("the app recorded " + QString::number(seen) +
                                     " events; its output: " + app.readAllStandardError()));
    // Still recording (the -wal goes when the recording closes), so the kill
    // lands mid-run, not on an app idling after its demo.
    QCOMPARE(app.state(), QProcess::Running);
    QVERIFY(QFile::exists(path + "-wal"));
    app.kill();
    QVERIFY(app.waitForFinished(10'000));
    QCOMPARE(app.exitStatus(), QProcess::CrashExit);

    MainWindow window;
    QSignalSpy opened(&window, &MainWindow::recording_opened);
    QSignalSpy failed(&window, &MainWindow::recording_failed);
    window.open_recording(path);
    QTRY_VERIFY_WITH_TIMEOUT(opened.count() + failed.count() == 1, 60'000);
    QVERIFY2(failed.isEmpty(),
             failed.isEmpty() ? "" : qPrintable(failed.first().first().toString()));
    QCOMPARE(window.mode(), MainWindow::Mode::replay);
    const kvscope::profiler::RunStore* replay = window.store();
    QVERIFY2(replay->event_count() >= seen,
             qPrintable(QString("%1 events opened, %2 seen").arg(replay->event_count()).arg(seen)));
    QVERIFY(!replay->steps().empty());
    QVERIFY(replay->end_ns() > replay->start_ns());
}

QTEST_MAIN(TestKilledApp)
#include "tst_killed_app.moc"
