// Polls attached engines' Prometheus /metrics pages, each URL on its own
// thread every interval, and keeps the samples kvscope cares about
// (attached_metrics.h). The attach loop takes what arrived with take(): the
// threads only ever hold a small mutex to hand over, so a slow engine never
// stalls the attach loop and a slow attach loop never stalls the polling (a
// full queue drops the oldest scrape and counts it).
#pragma once

#include "profiler/attach/attached_metrics.h"
#include "profiler/attach/http_get.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace kvscope::attach {

struct MetricsPollerOptions {
    std::vector<std::string> urls; // URL i polled for source i
    std::chrono::milliseconds interval{1000};
    HttpGetOptions http;
    std::size_t queue_scrapes = 64; // scrapes held for take() before the oldest is dropped
};

// One successful poll's kept samples.
struct MetricsScrape {
    std::int64_t source = 0;
    std::vector<MetricSample> samples;
};

struct MetricsEndpointStatus {
    std::string url;
    std::int64_t polls = 0;
    std::int64_t failures = 0;  // no reply, not 2xx, or nothing in it parsed
    std::int64_t bad_lines = 0; // lines skipped in replies that did parse
    std::int64_t dropped = 0;   // scrapes the attach loop did not take in time
    bool failing = false;       // the last poll failed
    std::string last_error;     // why the latest failure failed (kept after a recovery)
};

class MetricsPoller {
public:
    // Starts one thread per URL; the first poll is at once.
    explicit MetricsPoller(MetricsPollerOptions options);
    ~MetricsPoller(); // stops and joins (cancelling a request in flight)
    MetricsPoller(const MetricsPoller&) = delete;
    MetricsPoller& operator=(const MetricsPoller&) = delete;

    // The scrapes that arrived since the last call, oldest first.
    std::vector<MetricsScrape> take();
    std::vector<MetricsEndpointStatus> status() const;
    const MetricsPollerOptions& options() const { return options_; }

private:
    void run(std::size_t index);

    MetricsPollerOptions options_;
    mutable std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<MetricsScrape> queue_;
    std::vector<MetricsEndpointStatus> status_;
    std::atomic<bool> stop_{false};
    std::vector<std::thread> threads_;
};

} // namespace kvscope::attach
