// A model file rewritten in place (as `cp` over it does: truncated, then
// other bytes) while `kvscope generate` runs on it: the generation goes on
// and writes the text it writes on the untouched file. Why it holds: the CPU
// backend packs the default model's Q4_1 matrices into buffers of its own at
// load, and reads nothing from the file's map afterwards; a model whose
// weights were read in place from the map would die of SIGBUS on truncation
// (issue 18 notes this). Needs the real model: generating with it takes
// seconds, long enough to change the file midway.
#include "engine/model_path.h"
#include "tests/support/run_process.h"

#include <QElapsedTimer>
#include <QFile>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

using kvscope::test::run_process;

class TestModelFileRewritten : public QObject {
    Q_OBJECT

private slots:
    void generation_goes_on_with_the_loaded_weights();
};

void TestModelFileRewritten::generation_goes_on_with_the_loaded_weights() {
    const kvscope::ModelPath model = kvscope::resolve_model_path();
    if (const std::string problem = kvscope::model_path_problem(model); !problem.empty()) {
        QSKIP(qPrintable("needs the model (run scripts/setup.sh): " +
                         QString::fromStdString(problem)));
    }
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const QString copy = dir.filePath("model.gguf");
    QVERIFY(QFile::copy(QString::fromStdString(model.path.string()), copy));
    const QStringList arguments{"generate", "--model",       copy, "-p", "The history of", "-n",
                                "48",       "--temperature", "0"};
    const auto untouched = run_process(KVSCOPE_CLI_PATH, arguments);
    QVERIFY2(untouched.exit_code == 0, qPrintable(untouched.err));

    QProcess process;
    process.start(KVSCOPE_CLI_PATH, arguments);
    QVERIFY(process.waitForStarted(10'000));
    QByteArray text;
    QElapsedTimer waited;
    waited.start();
    while (text.isEmpty() && process.state() == QProcess::Running && waited.elapsed() < 60'000) {
        process.waitForReadyRead(100);
        text += process.readAllStandardOutput();
    }
    QVERIFY2(!text.isEmpty(), "no text within a minute");
    // The first words are out: rewrite the file in place as `cp` over it
    // would (truncate, then other bytes), under the map the weights came from.
    QFile file(copy);
    QVERIFY(file.open(QIODevice::ReadWrite));
    const qint64 size = file.size();
    QVERIFY(file.resize(0));
    QVERIFY(file.write(QByteArray(static_cast<qsizetype>(size / 2), '\x5a')) == size / 2);
    file.close();
    // Still generating: the rest of the text comes after the file changed.
    QVERIFY2(process.state() == QProcess::Running, "generation ended before the rewrite");
    QVERIFY(process.waitForFinished(120'000));
    text += process.readAllStandardOutput();
    const QString err = QString::fromUtf8(process.readAllStandardError());
    QCOMPARE(process.exitStatus(), QProcess::NormalExit); // no SIGBUS
    QVERIFY2(process.exitCode() == 0, qPrintable(err));
    QCOMPARE(QString::fromUtf8(text), untouched.out);
}

QTEST_GUILESS_MAIN(TestModelFileRewritten)
#include "tst_model_file_rewritten.moc"
