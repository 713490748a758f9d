// A fuzz target as a Qt Test suite: every seed under corpus/<target> and every
// input kept under regressions/<target> (the crashes fuzzing found, after
// their fix) goes through LLVMFuzzerTestOneInput, one test row each. Built
// in every test build with its own compiler, so the seeds and past crashes
// are checked on every CI run, with or without libFuzzer.
#include <cstdint>
#include <cstdlib>

#include <QDir>
#include <QFile>
#include <QTest>

#if KVSCOPE_FUZZ_NEEDS_MODEL
#include "engine/session/model_loading.h"
#endif

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);

class ReplayCorpus : public QObject {
    Q_OBJECT

    // The seeds, then the kept crashes, each in name order.
    static QStringList inputs() {
        QStringList files;
        for (const QString& kind : {QString("corpus"), QString("regressions")}) {
            const QDir dir(QString(KVSCOPE_SOURCE_DIR) + "/tests/fuzz/" + kind + "/" +
                           KVSCOPE_FUZZ_TARGET);
            for (const QString& file : dir.entryList(QDir::Files, QDir::Name)) {
                files << dir.filePath(file);
            }
        }
        return files;
    }

private slots:
    void initTestCase() {
#if KVSCOPE_FUZZ_NEEDS_MODEL
        try {
            (void)kvscope::session::model_file("");
        } catch (const std::exception& error) {
            QSKIP(qPrintable(QString("this target needs the model: ") + error.what()));
        }
#endif
        // A data function cannot fail the suite: say here when there is
        // nothing to replay (seeds missing from a checkout, say).
        QVERIFY2(!inputs().isEmpty(), "no seeds under tests/fuzz/corpus/" KVSCOPE_FUZZ_TARGET);
        if (LLVMFuzzerInitialize != nullptr) {
            char name[] = "replay";
            char* args[] = {name, nullptr};
            int argc = 1;
            char** argv = args;
            LLVMFuzzerInitialize(&argc, &argv);
        }
    }

    void input_data() {
        QTest::addColumn<QString>("file");
        for (const QString& file : inputs()) {
            QTest::newRow(qPrintable(file.section('/', -3))) << file;
        }
    }

    void input() {
        QFETCH(QString, file);
        QFile in(file);
        QVERIFY2(in.open(QIODevice::ReadOnly), qPrintable(file));
        const QByteArray bytes = in.readAll();
        // The target aborts on a broken invariant and crashes on a bug: either
        // fails this suite with the target's own message above.
        LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.constData()),
                               static_cast<std::size_t>(bytes.size()));
    }
};

QTEST_GUILESS_MAIN(ReplayCorpus)
#include "replay_main.moc"
