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
    // per thread, claimed dynamically; returns when all are done. Loops shorter than `grain` per
    // thread run on the caller alone. Not reentrant: one loop at a time.
    void parallel_for(std::int64_t count, std::int64_t grain,
                      const std::function<void(std::int64_t, std::int64_t)>& body);

private:
    void worker_loop();
    void run_share();

    std::vector<std::thread> workers_;
    std::atomic<std::uint64_t> generation_{0};
    std::atomic<int> remaining_{0};
    std::atomic<bool> stopping_{false};
    std::mutex sleep_mutex_;
    std::condition_variable sleep_cv_;
    std::atomic<int> sleepers_{0};

    const std::function<void(std::int64_t, std::int64_t)>* body_ = nullptr;
    std::int64_t count_ = 0;
    std::int64_t chunk_ = 0;
    std::atomic<std::int64_t> next_{0}; // first index of the next unclaimed chunk
};

} // namespace kvscope::cpu
