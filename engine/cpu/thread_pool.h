// A fixed set of worker threads for data-parallel loops. The calling thread
// takes a share of the work too, so a pool of N threads runs N-way.
//
// A forward pass issues hundreds of short loops per token, so waking workers
// through a condition variable (tens of microseconds each) would dominate:
// workers spin briefly on an atomic generation counter and only sleep after
// a stretch with no work.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
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

private:
    void worker_loop();
    // Claims and runs chunks of the loop of generation `generation` until
    // none is left or another loop has begun.
    void run_chunks(std::uint32_t generation);

    std::vector<std::thread> workers_;
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
};

} // namespace kvscope::cpu
