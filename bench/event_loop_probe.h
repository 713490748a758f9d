// How long a Qt window's event loop stays busy at a stretch: a 1 ms timer's
// lateness is the time input and paints waited, so a stretch under 16 ms is a
// frame kept at 60 Hz. Beside it, the window thread's CPU time between two
// ticks (the work it did at a stretch), its time waiting for a core (the
// kernel's schedstat) and the process's RSS once a second. The UI benchmarks
// (attach_ui_frames.cpp, live_ui_frames.cpp) share it and its table rows.
#pragma once

#include "bench/process_stats.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <vector>

#include <QElapsedTimer>
#include <QTimer>

namespace kvscope::bench {

inline double percentile(std::vector<double> values, double p) {
    if (values.empty()) {
        return 0;
    }
    std::sort(values.begin(), values.end());
    const auto index = static_cast<std::size_t>(p * static_cast<double>(values.size() - 1));
    return values[index];
}

class EventLoopProbe {
public:
    // Ticks from now on; those of the first `warmup_s` are not counted.
    explicit EventLoopProbe(double warmup_s)
        : warmup_s_(warmup_s) {
        last_cpu_ns_ = thread_cpu_ns();
        last_wait_ns_ = runqueue_wait_ns();
        clock_.start();
        last_ns_ = clock_.nsecsElapsed();
        timer_.setTimerType(Qt::PreciseTimer);
        timer_.setInterval(1);
        QObject::connect(&timer_, &QTimer::timeout, [this] { tick(); });
        timer_.start();
    }

    void stop() { timer_.stop(); }
    bool active() const { return timer_.isActive(); }
    double p99_ms() const { return percentile(stalls_ms_, 0.99); }

    // The table rows of what it saw over `watched_s` seconds.
    void print_rows(double watched_s) const {
        std::printf("| event loop busy at a stretch, ms: median / p99 / p99.9 / max | %.2f / "
                    "%.2f / %.2f / %.2f |\n",
                    percentile(stalls_ms_, 0.5), percentile(stalls_ms_, 0.99),
                    percentile(stalls_ms_, 0.999), percentile(stalls_ms_, 1.0));
        std::printf("| the longest, at (s from the start) | %.1f |\n", worst_at_s_);
        double work_total_ms = 0;
        for (const double w : work_ms_) {
            work_total_ms += w;
        }
        const double late = std::max(late_ms_, 1e-9);
        std::printf("| stretches over 16 ms: the window's work / waiting for a core / the rest | "
                    "%.0f%% / %.0f%% / %.0f%% |\n",
                    100.0 * late_work_ms_ / late, 100.0 * late_waiting_ms_ / late,
                    100.0 * (late_ms_ - late_work_ms_ - late_waiting_ms_) / late);
        std::printf("| window thread's share of a core while watched | %.0f%% |\n",
                    100.0 * work_total_ms / (watched_s * 1e3));
        std::printf("| window thread's CPU time at a stretch, ms: median / p99 / p99.9 / max | "
                    "%.2f / %.2f / %.2f / %.2f |\n",
                    percentile(work_ms_, 0.5), percentile(work_ms_, 0.99),
                    percentile(work_ms_, 0.999), percentile(work_ms_, 1.0));
        const auto share_over_16 = [](const std::vector<double>& values) {
            return static_cast<double>(std::count_if(values.begin(), values.end(),
                                                     [](double s) { return s > 16; })) /
                   static_cast<double>(std::max<std::size_t>(values.size(), 1));
        };
        std::printf("| share of 1 ms probes later than 16 ms / with over 16 ms of work | %.3f%% / "
                    "%.3f%% |\n",
                    100.0 * share_over_16(stalls_ms_), 100.0 * share_over_16(work_ms_));
        std::int64_t max_rss = 0;
        for (const std::int64_t kib : rss_) {
            max_rss = std::max(max_rss, kib);
        }
        std::printf("| app RSS MiB: last / max | %.1f / %.1f |\n",
                    rss_.empty() ? 0.0 : static_cast<double>(rss_.back()) / 1024.0,
                    static_cast<double>(max_rss) / 1024.0);
    }

private:
    static std::int64_t runqueue_wait_ns() {
        std::ifstream in("/proc/thread-self/schedstat");
        long long on_cpu = 0;
        long long waiting = 0;
        in >> on_cpu >> waiting;
        return static_cast<std::int64_t>(waiting);
    }

    void tick() {
        const qint64 now = clock_.nsecsElapsed();
        const std::int64_t cpu = thread_cpu_ns();
        const std::int64_t wait = runqueue_wait_ns();
        if (static_cast<double>(now) > warmup_s_ * 1e9) {
            const double stall = static_cast<double>(now - last_ns_) / 1e6;
            stalls_ms_.push_back(stall);
            work_ms_.push_back(static_cast<double>(cpu - last_cpu_ns_) / 1e6);
            if (stall > 16) {
                late_ms_ += stall;
                late_work_ms_ += work_ms_.back();
                late_waiting_ms_ += static_cast<double>(wait - last_wait_ns_) / 1e6;
            }
            if (stall > worst_ms_) {
                worst_ms_ = stall;
                worst_at_s_ = static_cast<double>(now) / 1e9;
            }
        }
        last_cpu_ns_ = cpu;
        last_wait_ns_ = wait;
        if (now >= next_rss_ns_) {
            rss_.push_back(rss_kib());
            next_rss_ns_ = now + 1'000'000'000;
        }
        last_ns_ = now;
    }

    double warmup_s_;
    QTimer timer_;
    QElapsedTimer clock_;
    qint64 last_ns_ = 0;
    qint64 next_rss_ns_ = 0;
    std::int64_t last_cpu_ns_ = 0;
    std::int64_t last_wait_ns_ = 0;
    std::vector<double> stalls_ms_;
    std::vector<double> work_ms_;
    double worst_at_s_ = 0;
    double worst_ms_ = 0;
    double late_ms_ = 0;         // over all stretches later than 16 ms:
    double late_work_ms_ = 0;    // the window's work in them
    double late_waiting_ms_ = 0; // and its waiting for a core
    std::vector<std::int64_t> rss_;
};

} // namespace kvscope::bench
