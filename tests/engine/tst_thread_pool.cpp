// The CPU thread pool (engine/cpu/thread_pool.h): every index of every loop
// runs exactly once, whatever the thread count, grain and loop length, over
// thousands of loops back to back (the forward pass's pattern) and after
// the workers have gone to sleep; a loop returns once its chunks are done
// even when a worker arrives late, and that worker never runs a chunk of a
// loop that has returned. Beside busy threads it goes on with the caller
// alone, and stays alone while the machine's count of runnable threads says
// the cores are busy. Built and run under ThreadSanitizer too.
#include "engine/cpu/thread_pool.h"
#include "engine/util/runnable_threads.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <random>
#include <thread>
#if defined(__linux__)
#include <sched.h>
#endif
#include <vector>

#include <QElapsedTimer>
#include <QTest>

using kvscope::cpu::ThreadPool;

class TestThreadPool : public QObject {
    Q_OBJECT

private slots:
    void every_index_runs_once_data();
    void every_index_runs_once();
    void loops_after_the_workers_slept();
    void no_chunk_runs_after_its_loop_returned();
    void a_busy_machine_runs_loops_on_the_caller();
    void a_busy_pool_stays_alone_without_waking_its_workers();
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
    std::atomic<bool> bad_range{false};
    for (int loop = 0; loop < 3000; ++loop) {
        const auto count = static_cast<std::int64_t>(rng() % hits.size());
        const auto grain = static_cast<std::int64_t>(1 + rng() % 64);
        for (std::int64_t i = 0; i < count; ++i) {
            hits[static_cast<std::size_t>(i)].store(0, std::memory_order_relaxed);
        }
        pool.parallel_for(count, grain, [&](std::int64_t begin, std::int64_t end) {
            if (begin < 0 || begin >= end || end > count) {
                bad_range.store(true); // checked below, on the test's thread
            }
            for (std::int64_t i = begin; i < end; ++i) {
                hits[static_cast<std::size_t>(i)].fetch_add(1, std::memory_order_relaxed);
            }
        });
        QVERIFY2(!bad_range.load(), "a chunk outside [0, count)");
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
    // Loops of different lengths back to back, each with its own body (all
    // kept alive, so a stale body pointer would still call the right loop's
    // code and be caught): every body checks the loop running is its own,
    // and each loop's indices run once. The first loop's last chunk is
    // slow, so the thread that takes it comes late to the next loops.
    constexpr int kLoops = 2000;
    std::vector<std::atomic<int>> ran(kLoops);
    std::atomic<bool> late_call{false};
    std::atomic<int> current{-1};
    std::vector<std::function<void(std::int64_t, std::int64_t)>> bodies;
    bodies.reserve(kLoops);
    for (int loop = 0; loop < kLoops; ++loop) {
        bodies.emplace_back([&, loop](std::int64_t begin, std::int64_t end) {
            if (current.load() != loop) {
                late_call.store(true);
            }
            if (loop == 0 && end == 2 + 0) {
                QTest::qSleep(20);
            }
            ran[static_cast<std::size_t>(loop)].fetch_add(static_cast<int>(end - begin));
        });
    }
    {
        ThreadPool pool(2);
        for (int loop = 0; loop < kLoops; ++loop) {
            current.store(loop);
            pool.parallel_for(2 + loop % 13, 1, bodies[static_cast<std::size_t>(loop)]);
        }
        current.store(-1);
    } // the workers are gone: any call after the last loop has been seen
    QVERIFY2(!late_call.load(), "a chunk ran after its loop returned");
    for (int loop = 0; loop < kLoops; ++loop) {
        QCOMPARE(ran[static_cast<std::size_t>(loop)].load(), 2 + loop % 13);
    }
}

namespace {
// The cores this process may run on (a CI runner's cpuset may allow fewer
// than the machine has).
unsigned cores_allowed() {
    unsigned cores = std::max(1u, std::thread::hardware_concurrency());
#if defined(__linux__)
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    if (sched_getaffinity(0, sizeof allowed, &allowed) == 0 && CPU_COUNT(&allowed) > 0) {
        cores = static_cast<unsigned>(CPU_COUNT(&allowed));
    }
#endif
    return cores;
}

// Twice as many threads spinning as this process has cores, until stop().
class BusyThreads {
public:
    BusyThreads() {
        for (unsigned i = 0; i < 2 * cores_allowed(); ++i) {
            threads_.emplace_back([this] {
                volatile std::uint64_t spins = 0;
                while (!stop_.load(std::memory_order_relaxed)) {
                    spins = spins + 1;
                }
            });
        }
    }
    ~BusyThreads() { stop(); }
    void stop() {
        stop_.store(true);
        for (std::thread& thread : threads_) {
            thread.join();
        }
        threads_.clear();
    }

private:
    std::atomic<bool> stop_{false};
    std::vector<std::thread> threads_;
};

// One loop over `hits` that counts each index; whether each ran once.
bool counts_each_index_once(ThreadPool& pool, std::vector<std::atomic<int>>& hits) {
    for (std::atomic<int>& hit : hits) {
        hit.store(0, std::memory_order_relaxed);
    }
    pool.parallel_for(static_cast<std::int64_t>(hits.size()), 16,
                      [&](std::int64_t begin, std::int64_t end) {
                          for (std::int64_t i = begin; i < end; ++i) {
                              hits[static_cast<std::size_t>(i)].fetch_add(1);
                          }
                      });
    return std::all_of(hits.begin(), hits.end(),
                       [](const std::atomic<int>& hit) { return hit.load() == 1; });
}

// Loops until the pool sheds: a window needs 64 parallel loops and 1 ms, two
// low ones shed. The minute only bounds a broken pool (slow under TSan on a
// busy runner). Whether every loop ran each index once.
bool loops_until_it_sheds(ThreadPool& pool, std::vector<std::atomic<int>>& hits) {
    bool complete = true;
    QElapsedTimer timer;
    timer.start();
    while (timer.elapsed() < 60'000 && pool.sheds() == 0) {
        complete = counts_each_index_once(pool, hits) && complete;
    }
    return complete;
}
} // namespace

void TestThreadPool::a_busy_machine_runs_loops_on_the_caller() {
    // Beside a pool of two, twice as many spinning threads as the cores:
    // its threads get well under the share kSharedShare asks, so it goes
    // on with the caller alone (sheds) and, alone or not, still runs every
    // index of every loop once.
    BusyThreads busy;
    ThreadPool pool(2);
    std::vector<std::atomic<int>> hits(1024);
    const bool complete = loops_until_it_sheds(pool, hits);
    busy.stop();
    QVERIFY(complete);
    QVERIFY2(pool.sheds() > 0, "the pool never noticed the machine was busy");
    // Alone, it still runs loops correctly.
    std::vector<std::atomic<int>> after(1000);
    QVERIFY(counts_each_index_once(pool, after));
}

void TestThreadPool::a_busy_pool_stays_alone_without_waking_its_workers() {
    // Once alone, the pool reads the machine's count of runnable threads
    // after each stretch instead of waking its workers to measure: while
    // the spinning threads are there it does not wake them (a window with
    // them is a window of loops under contention), for far longer than it
    // would stay alone without the count (1,024 loops); when they have
    // gone, it wakes them again.
    if (kvscope::machine_runnable_threads() < 0) {
        QSKIP("this machine's count of runnable threads cannot be read (no /proc/loadavg)");
    }
    if (kvscope::whole_machine_cpus() < 0) {
        QSKIP("this process may not run on every CPU (a cpuset): the pool does not judge by the "
              "whole machine's count of runnable threads here");
    }
    BusyThreads busy;
    ThreadPool pool(2);
    std::vector<std::atomic<int>> hits(1024);
    bool complete = loops_until_it_sheds(pool, hits);
    QVERIFY2(pool.sheds() > 0, "the pool never noticed the machine was busy");
    for (int loop = 0; loop < 8192; ++loop) {
        complete = counts_each_index_once(pool, hits) && complete;
    }
    QCOMPARE(pool.probes(), 0);
    busy.stop();
    // At most 16,384 loops alone between windows, whatever the count says
    // (other tests may run beside this one); the deadline bounds a pool
    // that never wakes its workers.
    QElapsedTimer timer;
    timer.start();
    while (timer.elapsed() < 60'000 && pool.alone()) {
        complete = counts_each_index_once(pool, hits) && complete;
    }
    QVERIFY2(!pool.alone(), "the pool never woke its workers again");
    QVERIFY(complete);
}

QTEST_GUILESS_MAIN(TestThreadPool)
#include "tst_thread_pool.moc"
