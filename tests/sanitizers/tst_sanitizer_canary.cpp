// Proves that a sanitizer's report fails a suite in the sanitized builds, with
// the options and suppressions the presets give ctest. A child copy of this
// binary commits one planted error of a kind its build checks (a data race, a
// heap overflow, a leak, a signed overflow) where suites' code runs: on a
// QThread started from a slot of Qt's event loop (the race's other side is
// that slot), under Qt's frames, which the suppressions for Qt's own code must
// not hide. The child must die of it with the sanitizer's report and status;
// its twin with the error taken out must finish clean, so the Qt scaffolding
// itself raises nothing.
//
// Built only in the sanitize and tsan builds (tests/sanitizers/CMakeLists.txt).
#include "tests/support/run_process.h"

#include <atomic>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <thread>

#include <QCoreApplication>
#include <QRegularExpression>
#include <QThread>
#include <QTimer>
#include <QtTest>

namespace {

// KVSCOPE_SANITIZE as the build set it, for example "address,undefined".
bool built_with(const char* sanitizer) {
    return QByteArray(KVSCOPE_SANITIZERS).split(',').contains(sanitizer);
}

// The status a report ends a process with: ThreadSanitizer's own 66, and the
// 86 the sanitize preset sets for ASan, LSan and UBSan.
constexpr int kThreadSanitizerStatus = 66;
constexpr int kPresetStatus = 86;

constexpr const char* kPlantOption = "--plant=";

// Keeps the planted errors from being optimised away.
void* volatile g_sink_pointer = nullptr;
volatile int g_sink_int = 0;

// One planted error (or, with `clean`, the same code without it), committed
// on a QThread started from a slot of a running event loop.
int run_plant(const QByteArray& plant, bool clean, int& argc, char** argv) {
    QCoreApplication app(argc, argv);
    int status = 2; // unknown plant
    QTimer::singleShot(0, &app, [&] {
        if (plant == "race") {
            // The worker writes, the loop's thread reads after seeing a flag:
            // relaxed, the flag orders nothing and the read races the write.
            int shared = 0;
            std::atomic<int> written{0};
            const auto store_order = clean ? std::memory_order_release : std::memory_order_relaxed;
            const auto load_order = clean ? std::memory_order_acquire : std::memory_order_relaxed;
            QThread* worker = QThread::create([&] {
                shared = 1;
                written.store(1, store_order);
            });
            worker->start();
            while (written.load(load_order) == 0) {
                std::this_thread::yield();
            }
            g_sink_int = shared;
            worker->wait();
            delete worker;
            status = 0;
        } else if (plant == "overflow" || plant == "leak" || plant == "ub") {
            QThread* worker = QThread::create([&] {
                if (plant == "overflow") {
                    // Read by the C library's memcpy, called through a
                    // pointer the compiler cannot see through: UBSan's
                    // object-size check would catch a read it can see
                    // first, and this row is ASan's.
                    void* (*volatile copy)(void*, const void*, std::size_t) = std::memcpy;
                    int* values = new int[4]{1, 2, 3, 4};
                    volatile int index = clean ? 3 : 4;
                    int value = 0;
                    copy(&value, values + index, sizeof value);
                    g_sink_int = value;
                    delete[] values;
                } else if (plant == "leak") {
                    g_sink_pointer = std::malloc(64);
                    if (clean) {
                        std::free(g_sink_pointer);
                    }
                    g_sink_pointer = nullptr;
                } else {
                    volatile int big = INT_MAX - 1;
                    volatile int step = clean ? 1 : 2;
                    g_sink_int = big + step;
                }
            });
            worker->start();
            worker->wait();
            delete worker;
            status = 0;
        }
        app.exit(status);
    });
    return app.exec();
}

} // namespace

class TestSanitizerCanary : public QObject {
    Q_OBJECT

private slots:
    void initTestCase() {
        // What is under test is the presets' options and suppressions:
        // without them a report would still fail the child, proving less.
        const char* options = built_with("thread") ? "TSAN_OPTIONS" : "LSAN_OPTIONS";
        if (!qEnvironmentVariable(options).contains("suppressions=")) {
            QSKIP(qPrintable(QString("%1 names no suppressions: run this through ctest --preset "
                                     "sanitize or tsan, which set the options under test")
                                 .arg(options)));
        }
    }

    void plantedErrorFailsTheRun_data() {
        QTest::addColumn<QString>("plant");
        QTest::addColumn<QString>("report");
        QTest::addColumn<int>("status");
        if (built_with("thread")) {
            QTest::newRow("race") << "race"
                                  << "WARNING: ThreadSanitizer: data race"
                                  << kThreadSanitizerStatus;
        }
        if (built_with("address")) {
            QTest::newRow("heap overflow")
                << "overflow"
                << "ERROR: AddressSanitizer: heap-buffer-overflow" << kPresetStatus;
            QTest::newRow("leak") << "leak"
                                  << "ERROR: LeakSanitizer: detected memory leaks" << kPresetStatus;
        }
        if (built_with("undefined")) {
            QTest::newRow("signed overflow")
                << "ub"
                << "runtime error: signed integer overflow" << kPresetStatus;
        }
    }

    void plantedErrorFailsTheRun() {
        QFETCH(QString, plant);
        QFETCH(QString, report);
        QFETCH(int, status);
        const auto result = run_child(plant);
        QVERIFY2(result.finished, "the planted error hung its child");
        QVERIFY2(result.err.contains(report),
                 qPrintable("no '" + report + "' report; stderr:\n" + result.err));
        QCOMPARE(result.exit_code, status);
    }

    void twinWithoutTheErrorIsClean_data() { plantedErrorFailsTheRun_data(); }

    void twinWithoutTheErrorIsClean() {
        QFETCH(QString, plant);
        const auto result = run_child(plant + ",clean");
        QVERIFY2(result.finished, "the clean twin hung");
        // Reports only: with print_suppressions a clean run still names the
        // suppressions it matched.
        static const QRegularExpression report("(WARNING|ERROR): \\w+Sanitizer|runtime error");
        QVERIFY2(!result.err.contains(report),
                 qPrintable("the clean twin of " + plant + " raised a report:\n" + result.err));
        QCOMPARE(result.exit_code, 0);
    }

private:
    static kvscope::test::ProcessResult run_child(const QString& plant) {
        return kvscope::test::run_process(QCoreApplication::applicationFilePath(),
                                          {QString(kPlantOption) + plant});
    }
};

int main(int argc, char** argv) {
    if (argc == 2 && std::strncmp(argv[1], kPlantOption, std::strlen(kPlantOption)) == 0) {
        const QByteArray spec(argv[1] + std::strlen(kPlantOption));
        const bool clean = spec.endsWith(",clean");
        int child_argc = 1; // the plant is not an option for Qt
        return run_plant(clean ? spec.chopped(6) : spec, clean, child_argc, argv);
    }
    QCoreApplication app(argc, argv);
    TestSanitizerCanary canary;
    return QTest::qExec(&canary, argc, argv);
}

#include "tst_sanitizer_canary.moc"
