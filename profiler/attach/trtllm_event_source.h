// TensorRT-LLM's KV-cache events over HTTP: trtllm-serve answers a POST to
// /kv_cache_events with the events since the previous POST (a JSON list,
// decoded by trtllm_events.h), so a thread of this source's own asks every
// `interval` and queues the batches for the AttachSession. Each event's
// event_id is its sequence number: ids that skip are counted lost (the
// server keeps no replay), ids that go back mean the server restarted, and
// the first batch after that says so, as a ZeroMQ source's would.
#pragma once

#include "profiler/attach/event_source.h"
#include "profiler/attach/http_get.h"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace kvscope::attach {

struct TrtllmSourceOptions {
    std::string url; // http://HOST:PORT/kv_cache_events
    std::chrono::milliseconds interval{500};
    HttpGetOptions http;
    // Batches held for the session before the oldest are dropped (counted
    // lost): a session that stops taking never grows this without bound.
    std::size_t max_queued = 100'000;
};

// "HOST:PORT" or "http://HOST:PORT" -> "http://HOST:PORT/kv_cache_events"; a
// URL with a path keeps it; empty for a scheme other than http(s).
std::string normalize_trtllm_url(const std::string& url);

class TrtllmEventSource final : public EventSource {
public:
    explicit TrtllmEventSource(TrtllmSourceOptions options);
    ~TrtllmEventSource() override; // stops and joins its thread

    std::vector<SourceBatch> take() override;
    SourceCounts counts() const override;
    std::chrono::duration<double> silent_for(Clock::time_point now = Clock::now()) const override;
    std::string last_error() const override;
    std::string describe() const override {
        return options_.url + "  (TensorRT-LLM, polled every " +
               std::to_string(options_.interval.count()) + " ms)";
    }
    const TrtllmSourceOptions& options() const { return options_; }
    // The blocks per cache level (GPU, host) the last "created" event gave.
    std::vector<std::int64_t> blocks_per_cache_level() const;

private:
    void run();
    void poll_once(HttpClient& client);
    void accept(KvEventBatch batch); // holds mutex_

    TrtllmSourceOptions options_;
    mutable std::mutex mutex_;
    std::condition_variable wake_;
    std::atomic<bool> stop_{false};
    std::deque<SourceBatch> queue_;
    SourceCounts counts_;
    // The last event_id per attention-DP rank: with attention data
    // parallelism trtllm-serve gathers every rank's events into one reply,
    // each rank counting its own from 0.
    std::map<std::int64_t, std::uint64_t> last_sequence_;
    bool restart_pending_ = false;
    std::int64_t lost_flagged_ = 0; // counts_.lost when a batch last carried after_loss
    std::vector<std::int64_t> blocks_per_cache_level_;
    std::optional<Clock::time_point> last_reply_;
    Clock::time_point attached_at_;
    std::string last_error_;
    std::thread thread_; // last: starts once the rest is ready
};

} // namespace kvscope::attach
