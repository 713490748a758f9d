#include "profiler/attach/trtllm_event_source.h"

#include "profiler/attach/poll_pacer.h"
#include "profiler/attach/trtllm_events.h"

#include <algorithm>
#include <iterator>

namespace kvscope::attach {

std::string normalize_trtllm_url(const std::string& url) {
    std::string out = url;
    if (out.find("://") == std::string::npos) {
        out = "http://" + out;
    } else if (!out.starts_with("http://") && !out.starts_with("https://")) {
        return "";
    }
    const std::size_t host = out.find("://") + 3;
    const std::size_t path = out.find('/', host);
    if (host == out.size()) {
        return "";
    }
    if (path == std::string::npos) {
        out += "/kv_cache_events";
    } else if (path == out.size() - 1) {
        out += "kv_cache_events";
    }
    return out;
}

TrtllmEventSource::TrtllmEventSource(TrtllmSourceOptions options)
    : options_(std::move(options))
    , attached_at_(Clock::now())
    , thread_([this] { run(); }) {}

TrtllmEventSource::~TrtllmEventSource() {
    {
        const std::lock_guard lock(mutex_);
        stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
}

std::vector<SourceBatch> TrtllmEventSource::take() {
    const std::lock_guard lock(mutex_);
    std::vector<SourceBatch> taken(std::make_move_iterator(queue_.begin()),
                                   std::make_move_iterator(queue_.end()));
    queue_.clear();
    return taken;
}

SourceCounts TrtllmEventSource::counts() const {
    const std::lock_guard lock(mutex_);
    return counts_;
}

std::chrono::duration<double> TrtllmEventSource::silent_for(Clock::time_point now) const {
    const std::lock_guard lock(mutex_);
    return now - last_reply_.value_or(attached_at_);
}

std::string TrtllmEventSource::last_error() const {
    const std::lock_guard lock(mutex_);
    return last_error_;
}

std::vector<std::int64_t> TrtllmEventSource::blocks_per_cache_level() const {
    const std::lock_guard lock(mutex_);
    return blocks_per_cache_level_;
}

void TrtllmEventSource::accept(KvEventBatch batch) {
    const std::uint64_t sequence = batch.sequence;
    const std::int64_t rank = batch.rank.value_or(0);
    if (const auto last = last_sequence_.find(rank); last != last_sequence_.end()) {
        if (sequence <= last->second) {
            // The server began counting again: what it said before is void.
            // Every rank counts again from here (their own restarts would
            // otherwise clear what the first rank has said since).
            ++counts_.restarts;
            restart_pending_ = true;
            last_sequence_.clear();
        } else if (sequence > last->second + 1) {
            // Events the server dropped (its event buffer is bounded) or a
            // reply lost on the way: no one can give them to us now.
            ++counts_.gaps;
            counts_.lost += static_cast<std::int64_t>(sequence - last->second - 1);
        }
    }
    last_sequence_[rank] = sequence;
    for (const KvEvent& event : batch.events) {
        counts_.clears += std::holds_alternative<AllCleared>(event) ? 1 : 0;
    }
    counts_.events += static_cast<std::int64_t>(batch.events.size());
    if (queue_.size() >= std::max<std::size_t>(options_.max_queued, 1)) {
        ++counts_.lost;
        queue_.pop_front();
    }
    const bool after_loss = counts_.lost > lost_flagged_;
    lost_flagged_ = counts_.lost;
    queue_.push_back(SourceBatch{std::move(batch), false, restart_pending_, after_loss});
    restart_pending_ = false;
}

void TrtllmEventSource::run() {
    HttpClient client(options_.http, &stop_);
    PollPacer pacer(options_.interval);
    while (!stop_) {
        try {
            poll_once(client);
        } catch (const std::exception& error) {
            // A reply too large to hold, say: a reason, never the process.
            const std::lock_guard lock(mutex_);
            last_error_ = options_.url + ": " + error.what();
        }
        std::unique_lock lock(mutex_);
        pacer.wait(lock, wake_, [this] { return stop_.load(); });
    }
}

void TrtllmEventSource::poll_once(HttpClient& client) {
    // Fetch and decode outside the lock: only the hand-over holds it.
    const HttpResponse response = client.post(options_.url);
    const double now_s =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    TrtllmDecodeResult decoded;
    if (response.ok()) {
        decoded = decode_trtllm_events(response.body, now_s);
    }
    if (stop_) {
        return;
    }
    const std::lock_guard lock(mutex_);
    if (!response.ok()) {
        last_error_ = options_.url + ": " + response.error;
        return;
    }
    ++counts_.messages;
    last_reply_ = Clock::now();
    counts_.decode += decoded.counts;
    if (!decoded.error.empty()) {
        last_error_ = decoded.error;
        counts_.decode_errors += decoded.batches.empty() ? 1 : 0;
    }
    if (!decoded.blocks_per_cache_level.empty()) {
        blocks_per_cache_level_ = decoded.blocks_per_cache_level;
    }
    for (KvEventBatch& batch : decoded.batches) {
        accept(std::move(batch));
    }
}

} // namespace kvscope::attach
