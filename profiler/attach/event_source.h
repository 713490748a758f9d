// What an AttachSession needs of a publisher, whatever carries its events:
// vLLM's and SGLang's ZeroMQ publishers (KvEventSource) or TensorRT-LLM's
// /kv_cache_events endpoint, polled over HTTP (TrtllmEventSource). Each hands
// back decoded batches in sequence order, with gaps and restarts counted and
// flagged the same way.
#pragma once

#include "profiler/attach/kv_events.h"

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>
#include <zmq.hpp>

namespace kvscope::attach {

struct SourceCounts {
    std::int64_t messages = 0;      // messages (or replies) read
    std::int64_t events = 0;        // events handed back (replayed ones too)
    std::int64_t gaps = 0;          // gaps in the sequence seen
    std::int64_t replayed = 0;      // batches that replay filled in
    std::int64_t lost = 0;          // sequence numbers no one could give us
    std::int64_t restarts = 0;      // sequence went backwards
    std::int64_t clears = 0;        // AllBlocksCleared events seen
    std::int64_t decode_errors = 0; // messages rejected whole by the decoder
    DecodeCounts decode;            // the decoder's own tallies
    bool operator==(const SourceCounts&) const = default;
};

struct SourceBatch {
    KvEventBatch batch;
    bool replayed = false;  // came from the replay socket, filling a gap
    bool restarted = false; // first batch after the publisher restarted
    // First batch after events were lost for good (a gap neither the stream
    // nor replay filled): those may have removed blocks, so whoever keeps
    // state drops what it holds of this source before this batch.
    bool after_loss = false;
};

class EventSource {
public:
    using Clock = std::chrono::steady_clock;
    virtual ~EventSource() = default;

    // The batches that have arrived, in order, without waiting long.
    virtual std::vector<SourceBatch> take() = 0;
    // A ZeroMQ socket to wait on for this source's messages; none for a
    // source that fills its queue on a thread of its own.
    virtual std::optional<zmq::pollitem_t> poll_item() { return std::nullopt; }

    virtual SourceCounts counts() const = 0;
    // "Silent for N s": since the last message, or since attaching.
    virtual std::chrono::duration<double>
    silent_for(Clock::time_point now = Clock::now()) const = 0;
    // The last problem, for a status line; empty when none.
    virtual std::string last_error() const = 0;
    // Where the events come from, for people: "tcp://node:5557 (replay
    // tcp://node:5558)", "http://node:8000/kv_cache_events (polled)".
    virtual std::string describe() const = 0;
};

} // namespace kvscope::attach
