// One attached publisher (one vLLM/SGLang engine, or one data-parallel rank
// of it): a ZeroMQ SUB socket on its event endpoint, and optionally a DEALER
// on its replay endpoint to fill gaps. No thread inside: the caller owns the
// loop and calls poll(), which hands back decoded batches in sequence order.
//
// Flow control is ZeroMQ's: the SUB socket's receive high-water mark bounds
// what queues for a slow reader (beyond it the publisher's PUB drops, which we
// then see as a gap), so a slow kvscope never blocks or slows an engine and
// never grows without bound. Reconnects are ZeroMQ's too (ZMQ_RECONNECT_IVL,
// backing off to ZMQ_RECONNECT_IVL_MAX), with one catch: after a reconnect
// the SUB socket resends its subscription only when its owner's thread uses
// it, so keep calling poll() (with a short timeout) while waiting.
//
// Sequence numbers (8-byte big-endian, from 0 per publisher):
//   seq == last + 1   in order.
//   seq >  last + 1   a gap: asks the replay socket for [last + 1, seq) and
//                     hands those batches back first; what replay cannot
//                     give (no replay socket, fell out of the publisher's
//                     buffer, no answer in time) is counted as lost.
//   seq <= last       the publisher restarted (its counter began again at 0):
//                     the batch comes back flagged `restarted`, and whoever
//                     keeps state from this source drops it.
// The first message after attaching is taken as is (we joined late: what came
// before is not ours to ask for).
//
// Replay protocol (vllm/distributed/kv_events.py ZmqEventPublisher,
// _service_replay; SGLang's publisher is the same): the DEALER sends
// ["", start_seq]; the ROUTER answers with ["", seq, payload] per buffered
// batch from start_seq on (vLLM 0.33 and SGLang 0.5.23, not vLLM 0.23 or
// SGLang 0.5.19: ["", topic, seq, payload]) and ends with ["", 0xFF x 8, ""]
// (or with an empty topic frame before it). tst_attach_publishers runs those
// four publishers' own code against this class.
#pragma once

#include "profiler/attach/event_source.h"
#include "profiler/attach/kv_events.h"

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>
#include <zmq.hpp>

namespace kvscope::attach {

struct KvEventSourceOptions {
    std::string endpoint;        // tcp://host:port of the engine's PUB socket
    std::string replay_endpoint; // its ROUTER replay socket; empty: none
    std::string topic;           // subscription prefix; empty: everything
    // Messages queued for us before ZeroMQ drops: ~100 ms of a busy engine at
    // the 100,000 events/s over 8 publishers, at a few events a batch.
    int receive_hwm = 10000;
    std::chrono::milliseconds reconnect_interval{100};
    std::chrono::milliseconds reconnect_interval_max{2000};
    // How long one gap's replay may take before the rest is counted lost.
    std::chrono::milliseconds replay_timeout{500};
    // At most this many messages per poll(), so a flood cannot starve the
    // caller's loop.
    int max_messages_per_poll = 4096;
};

class KvEventSource final : public EventSource {
public:
    // Connects at once (ZeroMQ connects lazily and retries on its own, so a
    // publisher that is not up yet is not an error). Throws zmq::error_t only
    // for an endpoint ZeroMQ cannot parse.
    KvEventSource(zmq::context_t& context, KvEventSourceOptions options);

    // Waits up to `timeout` for the first message, then takes what is queued
    // (up to max_messages_per_poll). A gap may add up to replay_timeout.
    std::vector<SourceBatch> poll(std::chrono::milliseconds timeout);
    std::vector<SourceBatch> take() override { return poll(std::chrono::milliseconds(0)); }

    // The SUB socket as a zmq::poll() item, so one thread can wait on many
    // sources at once and then take() from the ones that have messages.
    std::optional<zmq::pollitem_t> poll_item() override {
        return zmq::pollitem_t{sub_.handle(), 0, ZMQ_POLLIN, 0};
    }

    const KvEventSourceOptions& options() const { return options_; }
    SourceCounts counts() const override { return counts_; }
    std::optional<std::uint64_t> last_sequence() const { return last_sequence_; }
    // When the last message arrived; none yet: never heard from.
    std::optional<Clock::time_point> last_message_time() const { return last_message_; }
    std::chrono::duration<double> silent_for(Clock::time_point now = Clock::now()) const override;
    // The last decode problem, for a status line; empty when none.
    std::string last_error() const override { return last_error_; }
    std::string describe() const override {
        return options_.endpoint + (options_.replay_endpoint.empty()
                                        ? std::string()
                                        : "  (replay " + options_.replay_endpoint + ")");
    }

private:
    void accept(KvEventBatch batch, std::vector<SourceBatch>& out);
    void fill_gap(std::uint64_t from, std::uint64_t to, std::vector<SourceBatch>& out);
    void hand_back(KvEventBatch batch, bool replayed, bool restarted,
                   std::vector<SourceBatch>& out);

    KvEventSourceOptions options_;
    zmq::context_t& context_;
    zmq::socket_t sub_;
    std::optional<zmq::socket_t> replay_;
    SourceCounts counts_;
    std::optional<std::uint64_t> last_sequence_;
    std::optional<Clock::time_point> last_message_;
    Clock::time_point attached_at_;
    std::string last_error_;
    // Set while filling what a restarted publisher sent before we heard it:
    // the first batch handed back then carries the restart flag.
    bool pending_restart_ = false;
    std::int64_t lost_flagged_ = 0; // counts_.lost when a batch last carried after_loss
};

} // namespace kvscope::attach
