// A fixed set of worker threads for data-parallel loops. The calling thread
// takes a share of the work too, so a pool of N threads runs N-way.
//
// A forward pass issues hundreds of short loops per token, so waking workers
// through a condition variable (tens of microseconds each) would dominate:
// workers spin briefly on an atomic generation counter and only sleep after
// a stretch with no work. A wait that goes on yields the core, and where
// other processes keep the cores busy (the pool's threads get well under
// their share of them) the pool goes on with the caller alone, its workers
// asleep, while the machine stays that busy: one thread with a core to
// itself is faster then than several that share cores and wait on each
// other.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <ctime>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kvscope::cpu {

class ThreadPool {
public:
    // 0 threads: one per hardware thread.
    explicit ThreadPool(int threads = 0);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int size() const { return static_cast<int>(workers_.size()) + 1; }

    // Calls body(begin, end) on disjoint chunks covering [0, count), a few
    // per thread, claimed dynamically; returns when all are done, whether
    // or not every worker took part. Loops shorter than `grain` per thread
    // run on the caller alone. Not reentrant: one loop at a time. The body
    // must not throw (a worker's exception ends the program, and the
    // caller's would leave workers running chunks of a body gone).
    void parallel_for(std::int64_t count, std::int64_t grain,
                      const std::function<void(std::int64_t, std::int64_t)>& body);

    // Times the pool went on with the caller alone because the machine's
    // cores were busy with other work too (see thread_pool.cpp). Read it
    // from the thread that calls parallel_for.
    std::int64_t sheds() const { return sheds_; }
    // Times the pool, having gone on alone, woke its workers to measure the
    // machine again (after a stretch alone; not after an idle gap, which
    // ends it too). Read it from the thread that calls parallel_for.
    std::int64_t probes() const { return probes_; }
    // Whether the pool is going on alone: the next parallel loop runs on the
    // caller alone unless an idle gap of kIdleNs comes first.
    bool alone() const { return solo_loops_ > 0; }

private:
    void worker_loop();
    // CPU time of the caller's thread and the workers' so far; -1 when a
    // clock cannot be read.
    std::int64_t pool_cpu_ns() const;
    // Threads pool_cpu_ns() counts: the caller and the workers it can.
    int measured_threads() const;
    // Whether the loop starting at `now` runs on the caller alone; opens
    // (or restarts, after a gap) the window being measured if not.
    bool runs_alone(std::int64_t now);
    // Closes the window when it is long enough, and sheds the workers when
    // the pool got too little of the cores in it.
    void measure_window(std::int64_t now);
    // What the machine's count of runnable threads says of the pool's
    // chances now: that its threads would get too few cores (busy), enough
    // (free), or nothing (the count cannot be read).
    enum class Outlook { busy, free, unknown };
    Outlook outlook() const;
    // Whether the pool's threads, getting `cores` cores between them, get
    // too few to gain from running together (kSharedShare, kSoloCores).
    bool short_of_cores(double cores) const;
    // At the end of a stretch alone: another stretch, or wake the workers
    // for a window (a probe).
    void after_stretch_alone();
    // Claims and runs chunks of the loop of generation `generation` until
    // none is left or another loop has begun.
    void run_chunks(std::uint32_t generation);

    std::vector<std::thread> workers_;
#if defined(__linux__)
    std::vector<clockid_t> worker_clocks_; // each worker's CPU-time clock
#endif
    std::atomic<std::uint64_t> generation_{0}; // bumped for each loop: wakes the workers
    std::atomic<bool> stopping_{false};
    std::mutex sleep_mutex_;
    std::condition_variable sleep_cv_;
    std::atomic<int> sleepers_{0};

    // The current loop. A loop ends when its chunks are done, not when
    // every worker has come by: a worker the OS has not run yet (another
    // busy process) holds up nobody, and finds the loop gone when it
    // arrives. Claims are made on `claim_`, which holds the loop's
    // generation (high 32 bits) beside the count of its chunks not yet
    // claimed (low 32 bits), so a late worker's claim on a loop that has
    // ended fails and it never calls a body that has returned.
    std::atomic<std::uint64_t> claim_{0};
    std::atomic<std::int64_t> done_{0}; // chunks of the current loop finished
    std::atomic<const std::function<void(std::int64_t, std::int64_t)>*> body_{nullptr};
    std::atomic<std::int64_t> count_{0};
    std::atomic<std::int64_t> chunk_{0};
    std::atomic<std::int64_t> chunks_{0};

    // The caller's own (parallel_for is not reentrant; one calling thread,
    // whose CPU clock the windows read): the window of parallel loops being
    // measured, and loops to run alone before trying the workers again.
    bool window_open_ = false;
    int window_loops_ = 0;
    std::int64_t window_wall_ns_ = 0;
    std::int64_t window_cpu_ns_ = 0;
    std::int64_t last_end_ns_ = 0; // when the last loop ended
    int low_windows_ = 0;          // in a row, the pool's share of the cores low
    int solo_loops_ = 0;           // left in this stretch alone
    int alone_loops_ = 0;          // run alone since the last probe
    int solo_limit_ = 0;           // alone before the next probe, unless outlook() is busy
                                   // or a trusted free
    int solo_period_;              // solo_limit_ at the next shed
    bool free_probe_ = false;      // the window open was asked for by a free outlook
    bool trust_free_ = true;       // no free outlook's probe came out low since a full window
    std::int64_t sheds_ = 0;
    std::int64_t probes_ = 0;
    const int machine_cpus_; // whole_machine_cpus(): -1 where outlook() cannot judge
};

} // namespace kvscope::cpu
