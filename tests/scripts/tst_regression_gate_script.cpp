// scripts/regression-gate.sh, the CI gate of docs/regression-gates.md, run as
// written but on builds made already (the base and the change both this
// build's kvscope) and the tiny random-weight model: it must write both
// sides' rounds and a JSON report, print the comparison, and pass kvscope
// gate's exit status through (0 here: the same build on both sides; 1 when a
// side cannot record, with its log named), and flag a build that was made
// slower on purpose at the gate's own thresholds.
#include "tests/support/run_process.h"
#include "tests/support/tiny_model.h"

#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QTest>

using kvscope::test::run_process;

namespace {

QProcessEnvironment gate_environment(const QString& out) {
    QProcessEnvironment environment = QProcessEnvironment::systemEnvironment();
    environment.insert("KVSCOPE_MODEL", tiny_model_path());
    environment.insert("KVSCOPE_GATE_BASE_BIN", KVSCOPE_CLI_PATH);
    environment.insert("KVSCOPE_GATE_NEW_BIN", KVSCOPE_CLI_PATH);
    environment.insert("KVSCOPE_GATE_OUT", out);
    environment.insert("KVSCOPE_GATE_ROUNDS", "7");
    // Thresholds out of reach: the tiny model's timings, not the gate, would
    // decide otherwise.
    environment.insert("KVSCOPE_GATE_OPTIONS", "--threshold 1000 --robust-threshold 1000");
    return environment;
}

QString script() {
    return QStringLiteral(KVSCOPE_SOURCE_DIR "/scripts/regression-gate.sh");
}

} // namespace

class TestRegressionGateScript : public QObject {
    Q_OBJECT

private slots:
    void gates_the_same_build_without_alarm() {
        QTemporaryDir dir;
        const QString out = dir.filePath("gate");
        // The script's own record options (its default workload) on the tiny model.
        const auto result = run_process(script(), {"HEAD"}, gate_environment(out), 300'000);
        QVERIFY2(result.exit_code == 0, qPrintable(result.err + result.out));
        QVERIFY2(result.out.contains("regression gate: exit status 0"), qPrintable(result.out));
        QVERIFY2(result.out.contains("no regression") && result.out.contains("7 rounds"),
                 qPrintable(result.out));
        QVERIFY(QFile::exists(out + "/base/round-007.sqlite"));
        QVERIFY(QFile::exists(out + "/new/round-007.sqlite"));
        QFile report(out + "/report.json");
        QVERIFY(report.open(QIODevice::ReadOnly));
        const QJsonObject json = QJsonDocument::fromJson(report.readAll()).object();
        QCOMPARE(json.value("new_runs").toInt(), 7);
        QCOMPARE(json.value("regressed").toBool(), false);
    }

    // The verdict itself: the change side is this build behind a wrapper that
    // plants a regression (--slow-down: 60% more engine CPU time in every
    // forward pass), judged at the gate's default thresholds. Seen passing
    // (exit 0, wrongly) with the wrapper's slow-down set to 0.
    void a_planted_slow_down_fails_the_gate() {
        QTemporaryDir dir;
        const QString out = dir.filePath("gate");
        const QString slower = dir.filePath("kvscope-slower");
        {
            QFile wrapper(slower);
            QVERIFY(wrapper.open(QIODevice::WriteOnly));
            // Its records only: the script runs the change side's gate too.
            wrapper.write(
                "#!/bin/sh\nif [ \"$1\" = record ]; then set -- \"$@\" --slow-down 60; fi\n"
                "exec '" KVSCOPE_CLI_PATH "' \"$@\"\n");
        }
        QVERIFY(
            QFile::setPermissions(slower, QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner));
        QProcessEnvironment environment = gate_environment(out);
        environment.insert("KVSCOPE_GATE_NEW_BIN", slower);
        environment.insert("KVSCOPE_GATE_ROUNDS", "10");
        environment.insert("KVSCOPE_GATE_OPTIONS", "");
        const auto result = run_process(script(), {"HEAD"}, environment, 300'000);
        QVERIFY2(result.exit_code == 1, qPrintable(result.err + result.out));
        QVERIFY2(result.out.contains("regression gate: exit status 1"), qPrintable(result.out));
        QFile report(out + "/report.json");
        QVERIFY(report.open(QIODevice::ReadOnly));
        const QJsonObject json = QJsonDocument::fromJson(report.readAll()).object();
        QCOMPARE(json.value("regressed").toBool(), true);
    }

    void a_side_that_cannot_record_fails_the_gate() {
        QTemporaryDir dir;
        const QString out = dir.filePath("gate");
        QProcessEnvironment environment = gate_environment(out);
        environment.insert("KVSCOPE_GATE_RECORD", "--workload " + dir.filePath("missing.jsonl"));
        const auto result = run_process(script(), {"HEAD"}, environment, 300'000);
        QCOMPARE(result.exit_code, 1);
        QVERIFY2(result.err.contains("round-001.log"), qPrintable(result.err));
        QVERIFY2(result.out.contains("regression gate: exit status 1"), qPrintable(result.out));
    }
};

QTEST_GUILESS_MAIN(TestRegressionGateScript)
#include "tst_regression_gate_script.moc"
