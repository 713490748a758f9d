#include "engine/cpu/thread_pool.h"

#include "engine/util/cpu_clock.h"
#include "engine/util/host_clock.h"
#include "engine/util/runnable_threads.h"

#include <algorithm>
#if defined(__linux__)
#include <pthread.h>
#include <time.h>
#endif
#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define KVSCOPE_CPU_RELAX() _mm_pause()
#else
#define KVSCOPE_CPU_RELAX() std::this_thread::yield()
#endif

namespace kvscope::cpu {
namespace {
// How long an idle worker spins before sleeping: long enough to bridge the
// gaps between the loops of one forward pass, short enough not to burn a
// core between steps.
constexpr auto kSpinBeforeSleep = std::chrono::milliseconds(2);

constexpr std::int64_t kChunksPerThread = 4;

// Polls of a wait before it yields the core instead of pausing: past this a
// thread it waits for has likely been preempted, and spinning on holds the
// core that thread (or another process) could run on.
constexpr int kPausesBeforeYield = 2048;

// Sharing the machine. The pool's threads spin between loops, so while it
// works all of them are runnable: where other processes keep the cores busy
// too, the OS shares the cores out among everyone, the caller gets only its
// share (two thirds of a core with two threads and one busy process on two
// cores), the serial work between loops slows down with it, and a preempted
// worker holds loops up. One thread alone would get a whole core. So the
// caller measures, over windows of kWindowLoops parallel loops lasting
// kWindowMinNs or more (more for larger pools, whose clocks cost more to
// read), how much CPU time the pool's threads got (the caller's and the
// workers', which also catches a caller left a core of its own while its
// worker shares the other). When that is under kSharedShare of their wall
// time and under kSoloCores cores (a pool still getting more than that
// gains from its threads) in kLowWindows windows in a row, it runs loops
// alone (its workers go to sleep), in stretches of kStretchLoops.
//
// After each stretch it reads the machine's count of runnable threads (a few
// microseconds; waking the workers for a window costs a window of loops run
// under contention): while the count says the pool's threads would still get
// too few cores it stays alone, up to kMaxSoloLoops between windows (a window
// still comes then, in case the count misleads: it is the whole machine's, and
// a container's cores may be fewer, or weighed otherwise); once the count says
// the cores are free it wakes the workers for a window at once (and, should
// that window still find the pool short of cores, stops believing a free count
// until a window at full share). Where the count cannot be read, or the process
// may not run on every CPU (a cpuset: the count is the whole machine's), a
// window comes after kSoloLoops alone, four times as many each time the machine
// is still busy, up to kMaxSoloLoops. A window at full share starts over. A
// window restarts after a gap of kGapNs between loops (the engine idle between
// requests: wall time that no thread wanted), and stretches alone end after
// kIdleNs of it. A passing hiccup on an idle machine so costs a few steps'
// parallelism at most.
constexpr int kWindowLoops = 64;
constexpr std::int64_t kWindowMinNs = 1'000'000;
constexpr std::int64_t kWindowNsPerThread = 100'000;
constexpr double kSharedShare = 0.8;
constexpr double kSoloCores = 1.5;
constexpr int kLowWindows = 2;
constexpr int kStretchLoops = 256;
constexpr int kSoloLoops = 1024;
constexpr int kMaxSoloLoops = 16384;
constexpr std::int64_t kGapNs = 2'000'000; // the workers' spin before they sleep
constexpr std::int64_t kIdleNs = 100'000'000;
static_assert(kSoloLoops % kStretchLoops == 0 && kMaxSoloLoops % kStretchLoops == 0,
              "periods alone end where stretches do");

// Waits until `done()` with pauses, then yields.
template <class Done>
void wait_until(Done&& done) {
    for (int polls = 0; !done();) {
        if (polls < kPausesBeforeYield) {
            KVSCOPE_CPU_RELAX();
            ++polls;
        } else {
            std::this_thread::yield();
        }
    }
}
} // namespace

ThreadPool::ThreadPool(int threads)
    : solo_period_(kSoloLoops)
    , machine_cpus_(whole_machine_cpus()) {
    if (threads <= 0) {
        threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    }
    workers_.reserve(static_cast<std::size_t>(threads));
#if defined(__linux__)
    worker_clocks_.reserve(static_cast<std::size_t>(threads));
#endif
    for (int i = 1; i < threads; ++i) {
        workers_.emplace_back([this] { worker_loop(); });
#if defined(__linux__)
        clockid_t cpu_clock{};
        if (pthread_getcpuclockid(workers_.back().native_handle(), &cpu_clock) == 0) {
            worker_clocks_.push_back(cpu_clock);
        }
#endif
    }
#if defined(__linux__)
    if (worker_clocks_.size() != workers_.size()) {
        worker_clocks_.clear(); // the caller's share alone, then
    }
#endif
}

int ThreadPool::measured_threads() const {
#if defined(__linux__)
    return 1 + static_cast<int>(worker_clocks_.size());
#else
    return 1;
#endif
}

std::int64_t ThreadPool::pool_cpu_ns() const {
    std::int64_t total = thread_cpu_ns();
#if defined(__linux__)
    for (const clockid_t cpu_clock : worker_clocks_) {
        timespec now{};
        if (clock_gettime(cpu_clock, &now) != 0) {
            return -1;
        }
        total += static_cast<std::int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
    }
#endif
    return total;
}

bool ThreadPool::runs_alone(std::int64_t now) {
    if (solo_loops_ > 0 && now - last_end_ns_ > kIdleNs) {
        solo_loops_ = 0; // the machine may have changed: measure again
        alone_loops_ = 0;
        solo_period_ = kSoloLoops;
        low_windows_ = 0;
    }
    if (solo_loops_ > 0) {
        ++alone_loops_;
        if (--solo_loops_ == 0) {
            after_stretch_alone();
        }
        return true;
    }
    if (!window_open_ || now - last_end_ns_ > kGapNs) {
        window_open_ = true;
        window_loops_ = 0;
        window_wall_ns_ = now;
        window_cpu_ns_ = pool_cpu_ns();
    }
    return false;
}

ThreadPool::Outlook ThreadPool::outlook() const {
    const int runnable = machine_cpus_ > 0 ? machine_runnable_threads() : -1;
    if (runnable < 0) {
        return Outlook::unknown;
    }
    // The count includes the caller and the workers not asleep.
    const int workers_awake =
        static_cast<int>(workers_.size()) - std::max(0, sleepers_.load(std::memory_order_relaxed));
    const int others = std::max(0, runnable - 1 - workers_awake);
    // The cores the pool's threads would get with the others beside them,
    // judged as a window judges what they got.
    const double threads = measured_threads();
    const double cpus = machine_cpus_;
    const double cores = threads + others <= cpus ? threads : cpus * threads / (threads + others);
    return short_of_cores(cores) ? Outlook::busy : Outlook::free;
}

bool ThreadPool::short_of_cores(double cores) const {
    return cores < std::min(kSharedShare * measured_threads(), kSoloCores);
}

void ThreadPool::after_stretch_alone() {
    Outlook now = outlook();
    if (now == Outlook::free && !trust_free_) {
        now = Outlook::unknown;
    }
    const int limit = now == Outlook::busy ? kMaxSoloLoops : solo_limit_;
    if (now != Outlook::free && alone_loops_ < limit) {
        solo_loops_ = kStretchLoops;
        return;
    }
    // The next parallel loop opens a window with the workers.
    free_probe_ = now == Outlook::free;
    alone_loops_ = 0;
    ++probes_;
}

void ThreadPool::measure_window(std::int64_t now) {
    if (++window_loops_ < kWindowLoops ||
        now - window_wall_ns_ < std::max(kWindowMinNs, kWindowNsPerThread * size())) {
        return;
    }
    const std::int64_t cpu = pool_cpu_ns();
    const std::int64_t wall = now - window_wall_ns_;
    const std::int64_t ran = cpu - window_cpu_ns_;
    // The next window starts here, on these samples.
    window_loops_ = 0;
    window_wall_ns_ = now;
    window_cpu_ns_ = cpu;
    if (cpu < 0 || ran < 0) {
        return; // a clock could not be read: no verdict
    }
    const bool shared = short_of_cores(static_cast<double>(ran) / static_cast<double>(wall));
    if (free_probe_ && shared) {
        // The count said the cores were free, yet the pool got too few: it
        // misleads here (a container's cores, say), so it no longer ends
        // stretches alone early until a window gets the pool its share.
        trust_free_ = false;
    }
    free_probe_ = false;
    low_windows_ = shared ? low_windows_ + 1 : 0;
    if (!shared) {
        solo_period_ = kSoloLoops;
        trust_free_ = true;
    } else if (low_windows_ >= kLowWindows) {
        // One more low window after this period sheds again.
        low_windows_ = kLowWindows - 1;
        solo_loops_ = kStretchLoops;
        alone_loops_ = 0;
        solo_limit_ = solo_period_;
        solo_period_ = std::min(4 * solo_period_, kMaxSoloLoops);
        window_open_ = false;
        ++sheds_;
    }
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard lock(sleep_mutex_);
        stopping_.store(true);
    }
    sleep_cv_.notify_all();
    for (std::thread& worker : workers_) {
        worker.join();
    }
}

void ThreadPool::run_chunks(std::uint32_t generation) {
    for (;;) {
        // The claim word counts the loop's chunks left down, so whether one
        // is left is read from the same word the claim changes: a late
        // worker can never take a chunk of the next loop under its own
        // loop's generation.
        std::uint64_t claim = claim_.load(std::memory_order_acquire);
        for (;;) {
            if (static_cast<std::uint32_t>(claim >> 32) != generation ||
                (claim & 0xffffffffu) == 0) {
                return; // the loop is done, or another one has begun
            }
            if (claim_.compare_exchange_weak(claim, claim - 1, std::memory_order_acq_rel,
                                             std::memory_order_acquire)) {
                break;
            }
        }
        // The claim acquired this loop's fields; the loop cannot end (and
        // the next one rewrite them) before this chunk is counted done.
        const std::int64_t index = chunks_.load(std::memory_order_relaxed) -
                                   static_cast<std::int64_t>(claim & 0xffffffffu);
        const std::int64_t chunk = chunk_.load(std::memory_order_relaxed);
        const std::int64_t begin = index * chunk;
        (*body_.load(std::memory_order_relaxed))(
            begin, std::min(count_.load(std::memory_order_relaxed), begin + chunk));
        done_.fetch_add(1, std::memory_order_acq_rel);
    }
}

void ThreadPool::worker_loop() {
    std::uint64_t seen = 0;
    for (;;) {
        auto spin_until = std::chrono::steady_clock::now() + kSpinBeforeSleep;
        int polls = 0;
        while (generation_.load(std::memory_order_acquire) == seen) {
            if (stopping_.load(std::memory_order_relaxed)) {
                return;
            }
            KVSCOPE_CPU_RELAX();
            if (++polls % 1024 == 0 && std::chrono::steady_clock::now() > spin_until) {
                std::unique_lock lock(sleep_mutex_);
                sleepers_.fetch_add(1);
                sleep_cv_.wait(lock, [&] {
                    return stopping_.load() || generation_.load(std::memory_order_acquire) != seen;
                });
                sleepers_.fetch_sub(1);
                spin_until = std::chrono::steady_clock::now() + kSpinBeforeSleep;
            }
        }
        if (stopping_.load()) {
            return;
        }
        // Loops it slept through are over; the newest may be too.
        seen = generation_.load(std::memory_order_acquire);
        run_chunks(static_cast<std::uint32_t>(seen));
    }
}

void ThreadPool::parallel_for(std::int64_t count, std::int64_t grain,
                              const std::function<void(std::int64_t, std::int64_t)>& body) {
    if (count <= 0) {
        return;
    }
    if (workers_.empty() || count < 2 * std::max<std::int64_t>(1, grain)) {
        body(0, count);
        return;
    }
    if (runs_alone(host_now_ns())) { // the machine is busy (see kSharedShare)
        body(0, count);
        last_end_ns_ = host_now_ns();
        return;
    }
    // A few chunks per thread, taken first come first served: on a shared
    // machine one core often runs slower, and even shares would wait for it.
    const std::int64_t chunk = std::max<std::int64_t>(std::max<std::int64_t>(1, grain),
                                                      (count + kChunksPerThread * size() - 1) /
                                                          (kChunksPerThread * size()));
    const std::int64_t chunks = (count + chunk - 1) / chunk;
    body_.store(&body, std::memory_order_relaxed);
    count_.store(count, std::memory_order_relaxed);
    chunk_.store(chunk, std::memory_order_relaxed);
    chunks_.store(chunks, std::memory_order_relaxed);
    done_.store(0, std::memory_order_relaxed);
    const std::uint64_t generation = generation_.load(std::memory_order_relaxed) + 1;
    // Claimable from here on; the release publishes the loop's fields.
    claim_.store((static_cast<std::uint64_t>(static_cast<std::uint32_t>(generation)) << 32) |
                     static_cast<std::uint64_t>(chunks),
                 std::memory_order_release);
    {
        // Publishing under the mutex pairs with a worker's check before it
        // sleeps, so no wake-up is lost.
        std::lock_guard lock(sleep_mutex_);
        generation_.store(generation, std::memory_order_release);
    }
    if (sleepers_.load() > 0) {
        sleep_cv_.notify_all();
    }
    run_chunks(static_cast<std::uint32_t>(generation));
    // Chunks a worker claimed may still be running.
    wait_until([&] { return done_.load(std::memory_order_acquire) == chunks; });
    body_.store(nullptr, std::memory_order_relaxed);
    last_end_ns_ = host_now_ns();
    measure_window(last_end_ns_);
}

} // namespace kvscope::cpu
