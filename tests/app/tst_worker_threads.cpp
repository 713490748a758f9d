// WorkerThreads, the one way the app runs long work off the window's thread:
// every piece runs, a stop reaches the pieces it should, and nothing outlives
// its owner. Under ThreadSanitizer (label threads) the start and the joins
// also order what the work wrote before the owner reads it.
#include "app/ui/workers/worker_threads.h"

#include <atomic>
#include <chrono>
#include <optional>
#include <thread>
#include <vector>

#include <QTest>

using kvscope::ui::WorkerThreads;

namespace {

// Spins until asked to stop (or a minute passes, so a broken stop fails the
// test instead of hanging it); says whether the stop came.
bool run_until_stopped(const std::stop_token& stop) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(1);
    while (!stop.stop_requested()) {
        if (std::chrono::steady_clock::now() > give_up) {
            return false;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
}

} // namespace

class TestWorkerThreads : public QObject {
    Q_OBJECT

private slots:
    void work_runs_and_wait_joins_it();
    void stop_reaches_every_piece();
    void a_source_stops_its_own_piece_only();
    void the_owner_going_stops_and_joins();
    void finished_pieces_are_not_busy();
};

void TestWorkerThreads::work_runs_and_wait_joins_it() {
    WorkerThreads workers;
    std::vector<int> written; // no lock: the join orders it before the read
    workers.start([&written](const std::stop_token&) {
        for (int i = 0; i < 1000; ++i) {
            written.push_back(i);
        }
    });
    workers.wait();
    QCOMPARE(written.size(), std::size_t{1000});
    QCOMPARE(written.back(), 999);
    QVERIFY(!workers.busy());
}

void TestWorkerThreads::stop_reaches_every_piece() {
    WorkerThreads workers;
    std::atomic<int> stopped{0};
    for (int i = 0; i < 3; ++i) {
        workers.start([&stopped](const std::stop_token& stop) {
            if (run_until_stopped(stop)) {
                ++stopped;
            }
        });
    }
    QVERIFY(workers.busy());
    workers.stop();
    workers.wait();
    QCOMPARE(stopped.load(), 3);
    QVERIFY(!workers.busy());
}

void TestWorkerThreads::a_source_stops_its_own_piece_only() {
    WorkerThreads workers;
    std::atomic<bool> first_stopped{false};
    std::atomic<bool> second_stopped{false};
    std::stop_source first = workers.start(
        [&first_stopped](const std::stop_token& stop) { first_stopped = run_until_stopped(stop); });
    workers.start([&second_stopped](const std::stop_token& stop) {
        second_stopped = run_until_stopped(stop);
    });
    first.request_stop(); // a Cancel button's
    QTRY_VERIFY(first_stopped.load());
    QVERIFY(workers.busy()); // the second still runs
    QVERIFY(!second_stopped.load());
    workers.stop();
    workers.wait();
    QVERIFY(second_stopped.load());
}

void TestWorkerThreads::the_owner_going_stops_and_joins() {
    std::atomic<bool> stopped{false};
    std::atomic<bool> returned{false};
    {
        WorkerThreads workers;
        workers.start([&](const std::stop_token& stop) {
            stopped = run_until_stopped(stop);
            std::this_thread::sleep_for(std::chrono::milliseconds(50)); // returns late
            returned = true;
        });
    }
    QVERIFY(stopped.load());
    QVERIFY(returned.load()); // joined before the owner went
}

void TestWorkerThreads::finished_pieces_are_not_busy() {
    WorkerThreads workers;
    for (int round = 0; round < 50; ++round) {
        workers.start([](const std::stop_token&) {});
    }
    QTRY_VERIFY(!workers.busy()); // each returned; starting more reaps them
    std::atomic<bool> ran{false};
    workers.start([&ran](const std::stop_token&) { ran = true; });
    workers.wait();
    QVERIFY(ran.load());
}

QTEST_GUILESS_MAIN(TestWorkerThreads)
#include "tst_worker_threads.moc"
