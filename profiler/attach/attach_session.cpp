#include "profiler/attach/attach_session.h"

#include "engine/util/host_clock.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <thread>

namespace kvscope::attach {

std::string normalize_endpoint(const std::string& endpoint) {
    if (endpoint.empty() || endpoint.find("://") != std::string::npos) {
        return endpoint;
    }
    return "tcp://" + endpoint;
}

std::string normalize_metrics_url(const std::string& url) {
    if (url.starts_with("http://") || url.starts_with("https://")) {
        return url.size() > url.find("://") + 3 ? url : ""; // a host at least
    }
    if (url.empty() || url.find("://") != std::string::npos || url.front() == '/') {
        return "";
    }
    const std::size_t path = url.find('/');
    return "http://" + url +
           (path == std::string::npos ? "/metrics"
            : path + 1 == url.size()  ? "metrics"
                                      : "");
}

std::string add_metrics_urls(const std::vector<std::string>& urls, double interval_s,
                             AttachOptions& out) {
    const std::size_t publishers = out.sources.size() + out.trtllm_sources.size();
    if (!urls.empty() && urls.size() != publishers) {
        return "give one metrics URL per publisher (" + std::to_string(publishers) +
               " publishers, " + std::to_string(urls.size()) + " metrics URLs), or none";
    }
    if (!(interval_s > 0) || interval_s > 3600) {
        return "the metrics interval must be more than 0 and at most 3600 seconds";
    }
    out.metrics_urls.clear();
    for (const std::string& url : urls) {
        const std::string normalized = normalize_metrics_url(url);
        if (normalized.empty()) {
            return "metrics URL '" + url +
                   "' is neither an http:// or https:// URL nor HOST:PORT (vLLM: "
                   "http://HOST:8000/metrics)";
        }
        out.metrics_urls.push_back(normalized);
    }
    out.metrics_interval =
        std::chrono::milliseconds(std::max<std::int64_t>(1, std::llround(interval_s * 1000)));
    // A poll may take most of an interval, never much longer than a few.
    out.metrics_http.total_timeout =
        std::max(std::chrono::milliseconds(2000), 2 * out.metrics_interval);
    return "";
}

std::string add_trtllm_sources(const std::vector<std::string>& urls, double interval_s,
                               AttachOptions& out) {
    if (!(interval_s > 0) || interval_s > 3600) {
        return "the TensorRT-LLM polling interval must be more than 0 and at most 3600 seconds";
    }
    for (const std::string& url : urls) {
        TrtllmSourceOptions source;
        source.url = normalize_trtllm_url(url);
        if (source.url.empty()) {
            return "TensorRT-LLM URL '" + url +
                   "' is neither HOST:PORT nor an http:// or https:// URL (trtllm-serve: "
                   "http://HOST:8000)";
        }
        source.interval =
            std::chrono::milliseconds(std::max<std::int64_t>(1, std::llround(interval_s * 1000)));
        // trtllm-serve holds the POST while it waits for events (up to 2 s
        // for the next one): give it long enough never to be cut off while
        // answering, since events it took off its queue would be gone.
        source.http.total_timeout = std::chrono::seconds(30);
        out.trtllm_sources.push_back(std::move(source));
    }
    return "";
}

AttachOptions attach_options(const AttachTargets& targets) {
    AttachOptions options;
    options.block_size = targets.block_size;
    options.num_blocks = targets.num_blocks;
    std::string problem =
        targets.endpoints.empty() && targets.trtllm_urls.empty()
            ? "give a publisher's ENDPOINT, or a TensorRT-LLM server with --trtllm"
        : targets.endpoints.empty()
            ? (targets.replays.empty() ? "" : "--replay needs the publishers' ENDPOINTs")
            : add_sources(targets.endpoints, targets.replays, targets.topic, options);
    if (problem.empty()) {
        problem = add_trtllm_sources(targets.trtllm_urls, targets.trtllm_interval_s, options);
    }
    if (problem.empty()) {
        problem = add_metrics_urls(targets.metrics_urls, targets.metrics_interval_s, options);
    }
    if (!problem.empty()) {
        throw std::invalid_argument(problem);
    }
    return options;
}

std::vector<std::string> source_endpoints(const AttachOptions& options) {
    std::vector<std::string> endpoints;
    for (const KvEventSourceOptions& source : options.sources) {
        endpoints.push_back(source.endpoint);
    }
    for (const TrtllmSourceOptions& source : options.trtllm_sources) {
        endpoints.push_back(source.url);
    }
    return endpoints;
}

std::string add_sources(const std::vector<std::string>& endpoints,
                        const std::vector<std::string>& replays, const std::string& topic,
                        AttachOptions& out) {
    if (endpoints.empty()) {
        return "no endpoint to attach to";
    }
    if (!replays.empty() && replays.size() != endpoints.size()) {
        return "give one replay endpoint per publisher (" + std::to_string(endpoints.size()) +
               " endpoints, " + std::to_string(replays.size()) + " replay endpoints), or none";
    }
    for (std::size_t i = 0; i < endpoints.size(); ++i) {
        KvEventSourceOptions source;
        source.endpoint = normalize_endpoint(endpoints[i]);
        source.replay_endpoint = replays.empty() ? "" : normalize_endpoint(replays[i]);
        source.topic = topic;
        out.sources.push_back(std::move(source));
    }
    return "";
}

AttachSession::AttachSession(AttachOptions options, events::EventSink* sink)
    : options_(std::move(options))
    , sink_(sink)
    , next_status_(std::chrono::steady_clock::now() + options_.status_interval) {
    const std::size_t publishers = options_.sources.size() + options_.trtllm_sources.size();
    if (!options_.metrics_urls.empty() && options_.metrics_urls.size() != publishers) {
        throw std::invalid_argument(
            "give one metrics URL per publisher (" + std::to_string(publishers) + " publishers, " +
            std::to_string(options_.metrics_urls.size()) + " metrics URLs), or none");
    }
    const auto metrics_url = [this](std::size_t source) {
        return options_.metrics_urls.empty() ? std::string() : options_.metrics_urls[source];
    };
    for (KvEventSourceOptions& source : options_.sources) {
        source.endpoint = normalize_endpoint(source.endpoint);
        source.replay_endpoint = normalize_endpoint(source.replay_endpoint);
        try {
            sources_.push_back(std::make_unique<KvEventSource>(context_, source));
        } catch (const zmq::error_t& error) {
            throw std::invalid_argument("cannot attach to '" + source.endpoint + "'" +
                                        (source.replay_endpoint.empty()
                                             ? std::string()
                                             : " (replay '" + source.replay_endpoint + "')") +
                                        ": " + error.what());
        }
        attached(endpoints_json(source, metrics_url(sources_.size() - 1)));
    }
    for (const TrtllmSourceOptions& source : options_.trtllm_sources) {
        sources_.push_back(std::make_unique<TrtllmEventSource>(source));
        attached(trtllm_endpoint_json(source, metrics_url(sources_.size() - 1)));
    }
    if (!options_.metrics_urls.empty()) {
        MetricsPollerOptions metrics;
        metrics.urls = options_.metrics_urls;
        metrics.interval = options_.metrics_interval;
        metrics.http = options_.metrics_http;
        metrics_ = std::make_unique<MetricsPoller>(std::move(metrics));
    }
}

std::vector<MetricsEndpointStatus> AttachSession::metrics_status() const {
    return metrics_ ? metrics_->status() : std::vector<MetricsEndpointStatus>{};
}

AttachProgress AttachSession::progress(std::chrono::steady_clock::time_point now) const {
    AttachProgress progress;
    for (const auto& source : sources_) {
        const SourceCounts counts = source->counts(); // one snapshot
        progress.events += counts.events;
        progress.lost += counts.lost;
        progress.silent_s = std::max(progress.silent_s, source->silent_for(now).count());
    }
    for (const MetricsEndpointStatus& status : metrics_status()) {
        if (status.failing) {
            progress.failing_metrics = status.url;
            progress.failing_metrics_error = status.last_error;
            break;
        }
    }
    return progress;
}

void AttachSession::attached(std::string endpoints) {
    events::SourceAttached row;
    row.source = static_cast<std::int64_t>(sources_.size()) - 1;
    row.block_size = options_.block_size;
    row.num_blocks = options_.num_blocks;
    row.endpoints = std::move(endpoints);
    send(events::to_event(row));
}

AttachSession::~AttachSession() {
    metrics_.reset();
    // Sockets before the context: zmq_ctx_term waits for open sockets.
    sources_.clear();
}

void AttachSession::send(events::EngineEvent event, std::int64_t time_ns) {
    event.time_ns = time_ns != 0 ? time_ns : host_now_ns();
    state_.apply(event);
    if (sink_ != nullptr) {
        sink_->on_event(event);
    }
    ++events_emitted_;
}

std::size_t AttachSession::poll(std::chrono::milliseconds timeout) {
    // ZeroMQ sources are waited on; the others fill queues on threads of
    // their own and are taken from every call.
    std::vector<zmq::pollitem_t> items;
    std::vector<std::size_t> item_source(sources_.size(), sources_.size());
    for (std::size_t i = 0; i < sources_.size(); ++i) {
        if (const std::optional<zmq::pollitem_t> item = sources_[i]->poll_item()) {
            item_source[i] = items.size();
            items.push_back(*item);
        }
    }
    if (items.empty()) {
        std::this_thread::sleep_for(std::min(timeout, std::chrono::milliseconds(20)));
    } else {
        try {
            zmq::poll(items.data(), items.size(), timeout);
        } catch (const zmq::error_t&) {
            // EINTR (Ctrl-C): fall through and take what is there.
        }
    }
    std::size_t batches = 0;
    scratch_.clear();
    for (std::size_t i = 0; i < sources_.size(); ++i) {
        // A replay still in flight or a message that arrived after the wait
        // is taken by the next call; poll(0) never blocks.
        if (item_source[i] < items.size() && (items[item_source[i]].revents & ZMQ_POLLIN) == 0) {
            continue;
        }
        const auto source = static_cast<std::int64_t>(i);
        for (const SourceBatch& batch : sources_[i]->take()) {
            // The state takes the decoded batch; the sink takes its rows, all
            // of this poll's at once.
            const std::int64_t now_ns = host_now_ns();
            const std::size_t first = scratch_.size();
            append_typed_events(source, batch, scratch_);
            for (std::size_t r = first; r < scratch_.size(); ++r) {
                scratch_[r].time_ns = now_ns;
            }
            state_.apply(source, batch, now_ns);
            ++batches;
        }
    }
    events_emitted_ += static_cast<std::int64_t>(scratch_.size());
    if (sink_ != nullptr && !scratch_.empty()) {
        sink_->on_events(std::move(scratch_));
    }
    scratch_.clear();
    if (metrics_) {
        for (const MetricsScrape& scrape : metrics_->take()) {
            // One time for a poll's samples, so a query can group them.
            const std::int64_t now_ns = host_now_ns();
            for (const MetricSample& sample : scrape.samples) {
                events::AttachedMetric row;
                row.source = scrape.source;
                row.sample = metric_json(sample);
                send(events::to_event(row), now_ns);
            }
        }
    }
    if (std::chrono::steady_clock::now() >= next_status_) {
        emit_status();
    }
    return batches;
}

void AttachSession::emit_status() {
    const auto now = std::chrono::steady_clock::now();
    const std::vector<MetricsEndpointStatus> metrics = metrics_status();
    for (std::size_t i = 0; i < sources_.size(); ++i) {
        const EventSource& source = *sources_[i];
        const SourceCounts counts = source.counts();
        events::AttachedStatus status;
        status.source = static_cast<std::int64_t>(i);
        status.events = counts.events;
        status.lost = counts.lost;
        status.silent_ms = static_cast<std::int64_t>(
            std::chrono::duration<double, std::milli>(source.silent_for(now)).count());
        status.counts =
            counts_json(counts, source.last_error(), i < metrics.size() ? &metrics[i] : nullptr);
        send(events::to_event(status));
    }
    next_status_ = now + options_.status_interval;
}

} // namespace kvscope::attach
