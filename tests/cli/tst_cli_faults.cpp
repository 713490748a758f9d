// Faults a long recording meets, each survived as users expect (issue 18):
//  - a file-size limit (a full disk) mid-recording: the run stops, or goes on
//    unrecorded, as --on-write-error says; exit status 1 and a message naming
//    the file; the file opens and keeps what was committed before;
//  - the recording deleted under the running command: noticed at the next
//    commit, the run stops with a message;
//  - the recording made read-only under it: the open file is written to the
//    end (permissions are checked at open; the writes go to the -wal, open
//    too);
// (tst_model_file_rewritten: the model file changed under a generation.)
#include "tests/support/run_process.h"
#include "tests/support/sqlite_query.h"
#include "tests/support/tiny_model.h"

#include <sqlite3.h>

#include <QElapsedTimer>
#include <QFile>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>

using kvscope::test::query_int;
using kvscope::test::run_process;

namespace {

// Whether SQLite finds the file whole.
bool integrity_ok(const QString& path) {
    sqlite3* db = nullptr;
    bool ok = false;
    if (sqlite3_open_v2(path.toUtf8().constData(), &db, SQLITE_OPEN_READONLY, nullptr) ==
        SQLITE_OK) {
        sqlite3_stmt* statement = nullptr;
        if (sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &statement, nullptr) ==
                SQLITE_OK &&
            sqlite3_step(statement) == SQLITE_ROW) {
            ok = QString::fromUtf8(
                     reinterpret_cast<const char*>(sqlite3_column_text(statement, 0))) == "ok";
        }
        sqlite3_finalize(statement);
    }
    sqlite3_close(db);
    return ok;
}

// `kvscope record` of the tiny model, slowed so that a run spans several
// commits (every 100 ms): 40 requests of 64 tokens arriving over a second,
// about 0.9 MB recorded.
QStringList slow_record(const QString& out, int throttle_ms) {
    return QStringList{"record", "--model", tiny_model_path(), "--workload", "shared-prefix"} +
           QStringList{"--requests", "40", "--max-tokens", "64", "--rate", "40", "--seed", "5"} +
           QStringList{"--throttle-ms", QString::number(throttle_ms), "--out", out};
}

// Starts `arguments`; true once its stderr has said `line` (the run has
// begun), false (with a warning) when it ended or a minute passed first.
bool start_and_wait_for(QProcess& process, const QStringList& arguments, const QString& line) {
    process.start(KVSCOPE_CLI_PATH, arguments);
    if (!process.waitForStarted(10'000)) {
        qWarning("kvscope did not start: %s", qPrintable(process.errorString()));
        return false;
    }
    QByteArray err;
    QElapsedTimer waited;
    waited.start();
    while (!err.contains(line.toUtf8()) && process.state() == QProcess::Running &&
           waited.elapsed() < 60'000) {
        process.waitForReadyRead(200);
        err += process.readAllStandardError();
    }
    if (!err.contains(line.toUtf8())) {
        qWarning("kvscope never said '%s': %s", qPrintable(line), err.constData());
        return false;
    }
    return true;
}

// Whether the run summary `printed` counts some aborted requests.
bool some_aborted(const QString& printed) {
    return QRegularExpression("[1-9][0-9]* aborted").match(printed).hasMatch();
}

} // namespace

class TestCliFaults : public QObject {
    Q_OBJECT

private slots:
    void file_size_limit_keeps_what_was_committed_data();
    void file_size_limit_keeps_what_was_committed();
    void deleted_recording_stops_the_run();
    void read_only_recording_is_written_to_the_end();
};

void TestCliFaults::file_size_limit_keeps_what_was_committed_data() {
    QTest::addColumn<QString>("policy");
    QTest::newRow("stop") << "stop";
    QTest::newRow("continue") << "continue";
}

void TestCliFaults::file_size_limit_keeps_what_was_committed() {
    QFETCH(QString, policy);
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const QString out = dir.filePath("limited.sqlite");
    // A limit of 400 KiB (bash's ulimit counts KiB) on every file the process
    // writes, under the 0.9 MB the run records: as a full disk would, it
    // fails a commit mid-run, after the schema's and the first events'.
    QStringList arguments = slow_record(out, 5);
    arguments << "--on-write-error" << policy;
    const auto result = run_process(
        "/bin/bash",
        QStringList{"-c", "ulimit -f 400; exec \"$0\" \"$@\"", KVSCOPE_CLI_PATH} + arguments);
    QVERIFY2(result.finished, "kvscope record did not finish");
    QCOMPARE(result.exit_code, 1); // not killed by SIGXFSZ (that would be -1)
    QVERIFY2(result.err.contains("writing " + out + " failed"), qPrintable(result.err));
    if (policy == "stop") {
        QVERIFY2(result.err.contains("stopping the run"), qPrintable(result.err));
        QVERIFY2(some_aborted(result.out), qPrintable(result.out));
    } else {
        QVERIFY2(result.err.contains("the run goes on unrecorded"), qPrintable(result.err));
        QVERIFY2(result.out.contains("40 finished"), qPrintable(result.out));
    }
    // Whole, readable, and holding the commits before the failure.
    QVERIFY(integrity_ok(out));
    const std::int64_t events = query_int(out.toStdString(), "SELECT count(*) FROM KVSCOPE_EVENTS");
    qInfo("%s: %lld events kept", qPrintable(policy), static_cast<long long>(events));
    QVERIFY(events > 0); // the first commits, of a tenth of a second each, fit
    QCOMPARE(query_int(out.toStdString(),
                       "SELECT count(*) FROM KVSCOPE_META WHERE key = 'schema_version'"),
             1);
    const auto stats = run_process(KVSCOPE_CLI_PATH, {"stats", out});
    QVERIFY2(stats.exit_code == 0, qPrintable(stats.err));
    QVERIFY2(stats.out.contains(QString(": %1 events over").arg(events)), qPrintable(stats.out));
}

void TestCliFaults::deleted_recording_stops_the_run() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const QString out = dir.filePath("deleted.sqlite");
    QProcess process;
    QVERIFY(start_and_wait_for(process, slow_record(out, 20), "serving 40 requests"));
    QTest::qWait(300); // a commit or two in
    for (const char* suffix : {"", "-wal", "-shm"}) {
        QFile::remove(out + suffix);
    }
    QVERIFY(process.waitForFinished(60'000));
    const QString err = QString::fromUtf8(process.readAllStandardError());
    const QString printed = QString::fromUtf8(process.readAllStandardOutput());
    QCOMPARE(process.exitStatus(), QProcess::NormalExit);
    QCOMPARE(process.exitCode(), 1);
    QVERIFY2(err.contains(out + " was deleted, moved or replaced while recording"),
             qPrintable(err));
    QVERIFY2(err.contains("stopping the run"), qPrintable(err));
    QVERIFY2(some_aborted(printed), qPrintable(printed));
}

void TestCliFaults::read_only_recording_is_written_to_the_end() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const QString out = dir.filePath("read-only.sqlite");
    QProcess process;
    QVERIFY(start_and_wait_for(process, slow_record(out, 20), "serving 40 requests"));
    QTest::qWait(200);
    QVERIFY(QFile::setPermissions(out, QFile::ReadOwner | QFile::ReadGroup | QFile::ReadOther));
    QCOMPARE(process.state(), QProcess::Running); // made read-only mid-run
    QVERIFY(process.waitForFinished(60'000));
    const QString err = QString::fromUtf8(process.readAllStandardError());
    QCOMPARE(process.exitCode(), 0);
    QVERIFY2(err.contains("recorded "), qPrintable(err));
    QVERIFY(integrity_ok(out));
    QCOMPARE(query_int(out.toStdString(),
                       "SELECT count(*) FROM KVSCOPE_META WHERE key = 'complete' AND value = "
                       "'yes'"),
             1);
    QCOMPARE(query_int(out.toStdString(),
                       "SELECT count(*) FROM KVSCOPE_EVENTS WHERE kind = (SELECT id FROM "
                       "ENUM_KVSCOPE_EVENT_KIND WHERE name = 'request_finished')"),
             std::int64_t{40});
}

QTEST_GUILESS_MAIN(TestCliFaults)
#include "tst_cli_faults.moc"
