// The CPU thread pool (engine/cpu/thread_pool.h): every index of every loop
// runs exactly once, whatever the thread count, grain and loop length, over
// thousands of loops back to back (the forward pass's pattern) and after
// the workers have gone to sleep; a loop returns once its chunks are done
// even when a worker arrives late, and that worker never runs a chunk of a
// loop that has returned. Built and run under ThreadSanitizer too.
#include "engine/cpu/thread_pool.h"

#include <atomic>
#include <random>
#include <vector>

#include <QTest>

using kvscope::cpu::ThreadPool;

class TestThreadPool : public QObject {
    Q_OBJECT

private slots:
    void every_index_runs_once_data();
    void every_index_runs_once();
    void loops_after_the_workers_slept();
    void no_chunk_runs_after_its_loop_returned();
};

void TestThreadPool::every_index_runs_once_data() {
    QTest::addColumn<int>("threads");
    for (const int threads : {1, 2, 3, 4}) {
        QTest::addRow("%d threads", threads) << threads;
    }
}

void TestThreadPool::every_index_runs_once() {
    QFETCH(int, threads);
    ThreadPool pool(threads);
    std::mt19937 rng(static_cast<unsigned>(threads));
    std::vector<std::atomic<int>> hits(5000);
    for (int loop = 0; loop < 3000; ++loop) {
        const auto count = static_cast<std::int64_t>(rng() % hits.size());
        const auto grain = static_cast<std::int64_t>(1 + rng() % 64);
        for (std::int64_t i = 0; i < count; ++i) {
            hits[static_cast<std::size_t>(i)].store(0, std::memory_order_relaxed);
        }
        pool.parallel_for(count, grain, [&](std::int64_t begin, std::int64_t end) {
            QVERIFY(begin >= 0 && begin < end && end <= count);
            for (std::int64_t i = begin; i < end; ++i) {
                hits[static_cast<std::size_t>(i)].fetch_add(1, std::memory_order_relaxed);
            }
        });
        for (std::int64_t i = 0; i < count; ++i) {
            if (hits[static_cast<std::size_t>(i)].load(std::memory_order_relaxed) != 1) {
                QFAIL(qPrintable(QString("loop %1 (%2 indices, grain %3): index %4 ran %5 times")
                                     .arg(loop)
                                     .arg(count)
                                     .arg(grain)
                                     .arg(i)
                                     .arg(hits[static_cast<std::size_t>(i)].load())));
            }
        }
    }
}

void TestThreadPool::loops_after_the_workers_slept() {
    // Idle workers sleep after a couple of milliseconds; the next loops wake
    // them and still run every index once.
    ThreadPool pool(3);
    for (int round = 0; round < 5; ++round) {
        QTest::qWait(10);
        std::atomic<std::int64_t> sum{0};
        pool.parallel_for(10000, 16, [&](std::int64_t begin, std::int64_t end) {
            std::int64_t local = 0;
            for (std::int64_t i = begin; i < end; ++i) {
                local += i;
            }
            sum.fetch_add(local);
        });
        QCOMPARE(sum.load(), std::int64_t{10000} * 9999 / 2);
    }
}

void TestThreadPool::no_chunk_runs_after_its_loop_returned() {
    // One chunk of the first loop takes a while, so whichever thread runs it
    // (a worker, usually) is late for the loops after it: they run without
    // it, each index once, and no chunk of an earlier loop runs after the
    // loop returned (the counters of each loop are checked after the next
    // ones started).
    ThreadPool pool(2);
    std::vector<std::atomic<int>> ran(64);
    std::atomic<bool> late_call{false};
    std::atomic<int> current{-1};
    for (int loop = 0; loop < 64; ++loop) {
        current.store(loop);
        pool.parallel_for(8, 1, [&](std::int64_t begin, std::int64_t end) {
            if (current.load() != loop) {
                late_call.store(true);
            }
            if (loop == 0 && begin == 7) {
                QTest::qSleep(20);
            }
            ran[static_cast<std::size_t>(loop)].fetch_add(static_cast<int>(end - begin));
        });
    }
    QVERIFY2(!late_call.load(), "a chunk ran after its loop returned");
    for (int loop = 0; loop < 64; ++loop) {
        QCOMPARE(ran[static_cast<std::size_t>(loop)].load(), 8);
    }
}

QTEST_GUILESS_MAIN(TestThreadPool)
#include "tst_thread_pool.moc"
