#include "profiler/attach/metrics_poller.h"

#include "profiler/attach/poll_pacer.h"

namespace kvscope::attach {

MetricsPoller::MetricsPoller(MetricsPollerOptions options)
    : options_(std::move(options)) {
    status_.resize(options_.urls.size());
    for (std::size_t i = 0; i < options_.urls.size(); ++i) {
        status_[i].url = options_.urls[i];
    }
    threads_.reserve(options_.urls.size());
    for (std::size_t i = 0; i < options_.urls.size(); ++i) {
        threads_.emplace_back([this, i] { run(i); });
    }
}

MetricsPoller::~MetricsPoller() {
    {
        const std::lock_guard lock(mutex_);
        stop_ = true;
    }
    wake_.notify_all();
    for (std::thread& thread : threads_) {
        thread.join();
    }
}

std::vector<MetricsScrape> MetricsPoller::take() {
    const std::lock_guard lock(mutex_);
    std::vector<MetricsScrape> taken(std::make_move_iterator(queue_.begin()),
                                     std::make_move_iterator(queue_.end()));
    queue_.clear();
    return taken;
}

std::vector<MetricsEndpointStatus> MetricsPoller::status() const {
    const std::lock_guard lock(mutex_);
    return status_;
}

void MetricsPoller::run(std::size_t index) {
    HttpClient client(options_.http, &stop_);
    const std::string& url = options_.urls[index];
    PollPacer pacer(options_.interval);
    while (!stop_) {
        // Fetch and parse outside the lock: only the hand-over holds it.
        const HttpResponse response = client.get(url);
        std::string error = response.error;
        PrometheusText text;
        if (response.ok()) {
            try {
                text = parse_prometheus_text(response.body);
            } catch (const std::exception& e) {
                // Out of memory on a huge page, say: a reason, never the process.
                error = std::string("cannot read the page: ") + e.what();
                text = {};
            }
            if (!error.empty()) {
                // kept: the page could not be read at all
            } else if (text.samples.empty() && text.bad_lines > 0) {
                error = "not Prometheus text (" + text.first_error + ")";
            } else if (text.samples.empty() && text.types.empty()) {
                error = "an empty reply (no metrics)";
            }
        }
        if (stop_) {
            break;
        }
        {
            const std::lock_guard lock(mutex_);
            MetricsEndpointStatus& status = status_[index];
            ++status.polls;
            status.failing = !error.empty();
            if (!error.empty()) {
                ++status.failures;
                status.last_error = std::move(error);
            } else {
                status.bad_lines += text.bad_lines;
                if (queue_.size() >= options_.queue_scrapes && !queue_.empty()) {
                    ++status_[static_cast<std::size_t>(queue_.front().source)].dropped;
                    queue_.pop_front();
                }
                queue_.push_back({static_cast<std::int64_t>(index), kept_metrics(text)});
            }
        }
        std::unique_lock lock(mutex_);
        pacer.wait(lock, wake_, [this] { return stop_.load(); });
    }
}

} // namespace kvscope::attach
