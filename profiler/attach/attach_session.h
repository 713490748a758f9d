// Attaching to serving engines: one KvEventSource per publisher (one per
// engine, or per data-parallel rank), all polled from the caller's thread,
// their batches turned into typed events for a sink (a recorder, the app's
// live queue) and kept in an AttachedState built from those same rows.
// Written once per source when attaching: SourceAttached; about once a
// second and at the end: AttachedStatus; with metrics URLs, an
// AttachedMetric per kept sample as each poll arrives.
#pragma once

#include "engine/events/engine_event.h"
#include "profiler/attach/attached_events.h"
#include "profiler/attach/kv_event_source.h"
#include "profiler/attach/metrics_poller.h"
#include "profiler/attach/trtllm_event_source.h"

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>
#include <zmq.hpp>

namespace kvscope::attach {

struct AttachOptions {
    std::vector<KvEventSourceOptions> sources; // ZeroMQ publishers (vLLM, SGLang)
    // TensorRT-LLM servers' /kv_cache_events, polled over HTTP; numbered
    // after the ZeroMQ sources.
    std::vector<TrtllmSourceOptions> trtllm_sources;
    std::int64_t block_size = 0; // as the user gave it (0: from the events)
    std::int64_t num_blocks = 0; // the engines' KV capacity as given (0: unknown)
    std::chrono::milliseconds status_interval{1000};
    // Each source's Prometheus /metrics URL, in the same order (none, or one
    // per source, ZeroMQ then TensorRT-LLM), polled every metrics_interval on threads of their own.
    std::vector<std::string> metrics_urls;
    std::chrono::milliseconds metrics_interval{1000};
    HttpGetOptions metrics_http;
};

// What has come in so far over every source: what a progress line shows.
struct AttachProgress {
    std::int64_t events = 0;
    std::int64_t lost = 0;
    double silent_s = 0; // the longest any source has been silent
    // The first metrics URL failing ("" when none): its URL and why.
    std::string failing_metrics;
    std::string failing_metrics_error;
};

class AttachSession {
public:
    // Connects every source (ZeroMQ retries on its own: a publisher not up
    // yet is not an error) and starts polling the metrics URLs (one that
    // fails is counted and retried, never fatal). Throws
    // std::invalid_argument naming an endpoint ZeroMQ cannot parse, or when
    // the metrics URLs are not one per source.
    AttachSession(AttachOptions options, events::EventSink* sink);
    ~AttachSession();
    AttachSession(const AttachSession&) = delete;
    AttachSession& operator=(const AttachSession&) = delete;

    // Waits up to `timeout` for any source to have messages, then takes what
    // each has queued; emits their events, the metrics polled since, and,
    // when due, the status rows.
    // Returns the batches taken.
    std::size_t poll(std::chrono::milliseconds timeout);
    // Emits every source's status now (poll() does when one is due).
    void emit_status();

    const std::vector<std::unique_ptr<EventSource>>& sources() const { return sources_; }
    const AttachedState& state() const { return state_; }
    // Each metrics URL's polling so far (empty without metrics URLs).
    std::vector<MetricsEndpointStatus> metrics_status() const;
    std::int64_t events_emitted() const { return events_emitted_; }
    AttachProgress
    progress(std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now()) const;

private:
    // Writes the SourceAttached row of the source just added.
    void attached(std::string endpoints);
    // Stamps the event with `time_ns`, or the host clock now when 0.
    void send(events::EngineEvent event, std::int64_t time_ns = 0);

    AttachOptions options_;
    events::EventSink* sink_;
    zmq::context_t context_;
    std::vector<std::unique_ptr<EventSource>> sources_;
    AttachedState state_;
    std::vector<events::EngineEvent> scratch_;
    std::chrono::steady_clock::time_point next_status_;
    std::int64_t events_emitted_ = 0;
    std::unique_ptr<MetricsPoller> metrics_; // last: its threads stop first
};

// Fills `out.sources` for `endpoints`, each with its replay endpoint from
// `replays` (same order; empty: none) and `topic`. Returns what is wrong with
// them ("" when nothing): the one check the CLI and the app share.
std::string add_sources(const std::vector<std::string>& endpoints,
                        const std::vector<std::string>& replays, const std::string& topic,
                        AttachOptions& out);

// Adds a TensorRT-LLM source per URL (HOST:PORT, or http(s) with or without
// the /kv_cache_events path), polled every `interval_s` seconds. Returns
// what is wrong with them ("" when nothing).
std::string add_trtllm_sources(const std::vector<std::string>& urls, double interval_s,
                               AttachOptions& out);

// Sets `out.metrics_urls` from `urls` (one per publisher, in the same order
// as out.sources and out.trtllm_sources, or none), each an http:// or https:// URL or HOST:PORT
// (http://HOST:PORT/metrics, where vLLM and SGLang serve them), polled every
// `interval_s` seconds. Returns what is wrong with them ("" when nothing):
// the check the CLI and the app share. Call after adding the sources.
std::string add_metrics_urls(const std::vector<std::string>& urls, double interval_s,
                             AttachOptions& out);

// How often TensorRT-LLM servers and metrics URLs are polled unless told.
inline constexpr double kTrtllmPollSeconds = 0.5;
inline constexpr double kMetricsPollSeconds = 1.0;

// What to attach to, as `kvscope attach`'s options and the app's dialog
// give it.
struct AttachTargets {
    std::vector<std::string> endpoints; // ZeroMQ publishers (vLLM, SGLang)
    std::vector<std::string> replays;   // their replay endpoints, same order (or none)
    std::string topic;
    std::vector<std::string> trtllm_urls; // TensorRT-LLM servers
    double trtllm_interval_s = kTrtllmPollSeconds;
    std::vector<std::string> metrics_urls; // one per publisher, or none
    double metrics_interval_s = kMetricsPollSeconds;
    std::int64_t block_size = 0; // 0: from the events
    std::int64_t num_blocks = 0; // the engines' capacity; 0: unknown
};

// The session's options for `targets`; throws std::invalid_argument saying
// what is wrong with them (the one check the CLI and the app share).
AttachOptions attach_options(const AttachTargets& targets);
// Every source's endpoint or URL, in source order (ZeroMQ, then TensorRT-LLM).
std::vector<std::string> source_endpoints(const AttachOptions& options);

// "host:port" -> "http://host:port/metrics" ("host:port/path" keeps its
// path); an http:// or https:// URL is left alone; empty for anything else
// with a scheme.
std::string normalize_metrics_url(const std::string& url);

// "host:port" -> "tcp://host:port"; anything with a scheme is left alone.
// Empty when `endpoint` is empty.
std::string normalize_endpoint(const std::string& endpoint);

} // namespace kvscope::attach
