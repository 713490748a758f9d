// The app's hand-offs between threads (app/ui/workers/thread_handoff.h):
// every call arrives once, in order, with what its sender packed, whichever
// thread ends up freeing it. Run under ThreadSanitizer (label `threads`) this
// is what proves the hand-offs ordered: the receiver often runs a call before
// its sender has returned from queueing it, and the sender then frees the
// parcel; a hand-off that told ThreadSanitizer only "sent" and "received"
// was reported there as a race (seen in CI on tst_attach_window).
#include "app/ui/workers/thread_handoff.h"

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <QCoreApplication>
#include <QElapsedTimer>
#include <QObject>
#include <QThread>
#include <QThreadPool>
#include <QtTest>

using kvscope::ui::emit_on_own_thread;
using kvscope::ui::run_on_pool;
using kvscope::ui::run_on_thread_of;

namespace {

constexpr int kCalls = 400;

// What a call carries: a heap buffer the sender filled, read by the receiver.
std::vector<int> payload(int index) {
    return std::vector<int>(16, index);
}

class Reporter : public QObject {
    Q_OBJECT
public:
    void report_from_worker(int index) {
        emit_on_own_thread(this, &Reporter::reported, index, std::string(32, 'x'));
    }
signals:
    void reported(int index, std::string text);
};

bool wait_for(const std::function<bool()>& done, int timeout_ms = 60000) {
    QElapsedTimer clock;
    clock.start();
    while (!done() && clock.elapsed() < timeout_ms) {
        QCoreApplication::processEvents(QEventLoop::AllEvents, 10);
    }
    return done();
}

} // namespace

class TestThreadHandoff : public QObject {
    Q_OBJECT

private slots:
    // A worker queues calls to the main thread, pausing now and then so the
    // main thread is idle and runs each one at once, often before the worker
    // has left run_on_thread_of.
    void callsReachTheMainThreadInOrder() {
        QObject receiver;
        std::vector<int> seen;
        const auto main_thread = QThread::currentThread();
        QThread* worker = QThread::create([&receiver, main_thread, &seen] {
            for (int i = 0; i < kCalls; ++i) {
                run_on_thread_of(&receiver, [&seen, main_thread, data = payload(i)] {
                    QVERIFY(QThread::currentThread() == main_thread);
                    seen.push_back(data.front() + data.back() - data[7]);
                });
                if (i % 4 == 0) {
                    QThread::usleep(200);
                }
            }
        });
        worker->start();
        QVERIFY(wait_for([&] { return seen.size() == kCalls; }));
        worker->wait();
        for (int i = 0; i < kCalls; ++i) {
            QCOMPARE(seen[i], i);
        }
        delete worker;
    }

    // Tasks on a pool, each handing its result back to the main thread.
    void poolTasksRunAndReport() {
        QThreadPool pool;
        pool.setMaxThreadCount(2);
        QObject receiver;
        int sum = 0;
        int arrived = 0;
        for (int i = 0; i < kCalls; ++i) {
            run_on_pool(pool, [&receiver, &sum, &arrived, data = payload(i)] {
                const int value = data.front();
                run_on_thread_of(&receiver, [&sum, &arrived, value, text = std::string(24, 'y')] {
                    sum += value + static_cast<int>(text.size()) - 24;
                    ++arrived;
                });
            });
        }
        QVERIFY(wait_for([&] { return arrived == kCalls; }));
        pool.waitForDone();
        QCOMPARE(sum, kCalls * (kCalls - 1) / 2);
    }

    // A worker's signal reaches a direct receiver (a QSignalSpy) on the
    // thread its sender lives on.
    void signalsEmittedOnTheOwnersThread() {
        Reporter reporter;
        QSignalSpy spy(&reporter, &Reporter::reported);
        QThread* worker = QThread::create([&reporter] {
            for (int i = 0; i < kCalls; ++i) {
                reporter.report_from_worker(i);
                if (i % 4 == 0) {
                    QThread::usleep(200);
                }
            }
        });
        worker->start();
        QVERIFY(wait_for([&] { return spy.size() == kCalls; }));
        worker->wait();
        for (int i = 0; i < kCalls; ++i) {
            QCOMPARE(spy.at(i).at(0).toInt(), i);
        }
        delete worker;
    }

    // Calls still queued when their context goes are dropped, not run, and
    // what they carried is freed.
    void callsToADestroyedContextAreDropped() {
        auto context = std::make_unique<QObject>();
        auto witness = std::make_shared<int>(0);
        std::atomic<bool> queued{false};
        QThread* worker = QThread::create([&context, &queued, witness] {
            for (int i = 0; i < 50; ++i) {
                run_on_thread_of(context.get(), [witness] { ++*witness; });
            }
            queued = true;
        });
        worker->start();
        worker->wait();
        QVERIFY(queued);
        delete worker; // it holds a copy of the witness too
        context.reset();
        QCoreApplication::processEvents();
        QCOMPARE(*witness, 0);
        QCOMPARE(witness.use_count(), 1L);
    }
};

QTEST_GUILESS_MAIN(TestThreadHandoff)
#include "tst_thread_handoff.moc"
