#include "profiler/attach/kv_event_source.h"

#include "profiler/attach/kv_event_decoder.h"

#include <array>
#include <iterator>
#include <map>
#include <string_view>
#include <utility>
#include <variant>
#include <zmq_addon.hpp>

namespace kvscope::attach {

namespace {

using Frames = std::vector<zmq::message_t>;

// Non-blocking: false when nothing was waiting.
bool receive(zmq::socket_t& socket, Frames& frames) {
    frames.clear();
    try {
        const auto got =
            zmq::recv_multipart(socket, std::back_inserter(frames), zmq::recv_flags::dontwait);
        return got.has_value();
    } catch (const zmq::error_t&) {
        // EINTR and friends: nothing read this time.
        return false;
    }
}

bool wait_readable(zmq::socket_t& socket, std::chrono::milliseconds timeout) {
    std::array<zmq::pollitem_t, 1> items{{{socket.handle(), 0, ZMQ_POLLIN, 0}}};
    try {
        return zmq::poll(items.data(), items.size(), timeout) > 0;
    } catch (const zmq::error_t&) {
        return false;
    }
}

DecodeResult decode(const Frames& frames, std::size_t skip) {
    std::vector<std::string_view> views;
    views.reserve(frames.size());
    for (std::size_t i = skip; i < frames.size(); ++i) {
        views.emplace_back(frames[i].data<char>(), frames[i].size());
    }
    return decode_kv_event_message(views);
}

void big_endian(std::uint64_t value, std::array<std::uint8_t, 8>& out) {
    for (int i = 7; i >= 0; --i) {
        out[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(value & 0xFFu);
        value >>= 8;
    }
}

} // namespace

KvEventSource::KvEventSource(zmq::context_t& context, KvEventSourceOptions options)
    : options_(std::move(options))
    , context_(context)
    , sub_(context, zmq::socket_type::sub)
    , attached_at_(Clock::now()) {
    // Options before connect: ZeroMQ applies the high-water mark to pipes as
    // they are made.
    sub_.set(zmq::sockopt::rcvhwm, options_.receive_hwm);
    sub_.set(zmq::sockopt::reconnect_ivl, static_cast<int>(options_.reconnect_interval.count()));
    sub_.set(zmq::sockopt::reconnect_ivl_max,
             static_cast<int>(options_.reconnect_interval_max.count()));
    sub_.set(zmq::sockopt::linger, 0);
    sub_.set(zmq::sockopt::subscribe, options_.topic);
    sub_.connect(options_.endpoint);
    if (!options_.replay_endpoint.empty()) {
        replay_.emplace(context_, zmq::socket_type::dealer);
        replay_->set(zmq::sockopt::rcvhwm, options_.receive_hwm);
        replay_->set(zmq::sockopt::reconnect_ivl,
                     static_cast<int>(options_.reconnect_interval.count()));
        replay_->set(zmq::sockopt::reconnect_ivl_max,
                     static_cast<int>(options_.reconnect_interval_max.count()));
        replay_->set(zmq::sockopt::linger, 0);
        replay_->connect(options_.replay_endpoint);
    }
}

std::chrono::duration<double> KvEventSource::silent_for(Clock::time_point now) const {
    return now - last_message_.value_or(attached_at_);
}

std::vector<SourceBatch> KvEventSource::poll(std::chrono::milliseconds timeout) {
    std::vector<SourceBatch> out;
    if (!wait_readable(sub_, timeout)) {
        return out;
    }
    Frames frames;
    for (int n = 0; n < options_.max_messages_per_poll && receive(sub_, frames); ++n) {
        ++counts_.messages;
        last_message_ = Clock::now();
        DecodeResult result = decode(frames, 0);
        counts_.decode += result.counts;
        if (!result.error.empty()) {
            last_error_ = result.error;
        }
        if (!result.batch) {
            // The end marker belongs on the replay socket only; anything else
            // without a batch is a message we could not read.
            if (!result.replay_end) {
                ++counts_.decode_errors;
            }
            continue;
        }
        accept(std::move(*result.batch), out);
    }
    return out;
}

void KvEventSource::accept(KvEventBatch batch, std::vector<SourceBatch>& out) {
    const std::uint64_t seq = batch.sequence;
    bool restarted = false;
    if (last_sequence_) {
        const std::uint64_t next = *last_sequence_ + 1;
        if (seq > next) {
            ++counts_.gaps;
            fill_gap(next, seq, out);
        } else if (seq < next) {
            // Its counter began again at 0; what we missed of the new run
            // (a reconnect takes a moment) replay may still hold.
            ++counts_.restarts;
            restarted = true;
            last_sequence_.reset();
            if (seq > 0) {
                ++counts_.gaps;
                pending_restart_ = true;
                fill_gap(0, seq, out);
                restarted = pending_restart_;
                pending_restart_ = false;
            }
        }
    }
    hand_back(std::move(batch), false, restarted, out);
}

void KvEventSource::hand_back(KvEventBatch batch, bool replayed, bool restarted,
                              std::vector<SourceBatch>& out) {
    last_sequence_ = batch.sequence;
    counts_.events += static_cast<std::int64_t>(batch.events.size());
    for (const KvEvent& event : batch.events) {
        if (std::holds_alternative<AllCleared>(event)) {
            ++counts_.clears;
        }
    }
    if (replayed) {
        ++counts_.replayed;
    }
    const bool after_loss = counts_.lost > lost_flagged_;
    lost_flagged_ = counts_.lost;
    out.push_back(SourceBatch{std::move(batch), replayed, restarted, after_loss});
}

void KvEventSource::fill_gap(std::uint64_t from, std::uint64_t to, std::vector<SourceBatch>& out) {
    const auto missing = static_cast<std::int64_t>(to - from);
    if (!replay_) {
        counts_.lost += missing;
        return;
    }
    zmq::socket_t& socket = *replay_;
    Frames frames;
    // Answers to an earlier request that timed out would be taken for this
    // one's; the protocol has no request id, so drop them first.
    while (receive(socket, frames)) {
    }
    std::array<std::uint8_t, 8> start{};
    big_endian(from, start);
    try {
        if (!socket.send(zmq::const_buffer("", 0),
                         zmq::send_flags::sndmore | zmq::send_flags::dontwait) ||
            !socket.send(zmq::const_buffer(start.data(), start.size()),
                         zmq::send_flags::dontwait)) {
            counts_.lost += missing;
            last_error_ = "replay socket not connected";
            return;
        }
    } catch (const zmq::error_t& error) {
        counts_.lost += missing;
        last_error_ = std::string("replay request failed: ") + error.what();
        return;
    }

    std::map<std::uint64_t, KvEventBatch> got;
    const auto deadline = Clock::now() + options_.replay_timeout;
    bool ended = false;
    while (!ended) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        if (left.count() <= 0 || !wait_readable(socket, left)) {
            last_error_ = "replay did not finish in time";
            break;
        }
        while (receive(socket, frames)) {
            // The DEALER keeps the ROUTER's empty delimiter frame; a sequence
            // frame is never empty, so a leading empty frame is that.
            const std::size_t skip = frames.size() >= 3 && frames.front().size() == 0 ? 1 : 0;
            DecodeResult result = decode(frames, skip);
            if (result.replay_end) {
                ended = true;
                break;
            }
            if (!result.batch) {
                ++counts_.decode_errors;
                counts_.decode += result.counts;
                last_error_ = result.error;
                continue;
            }
            counts_.decode += result.counts;
            const std::uint64_t seq = result.batch->sequence;
            if (seq >= from && seq < to) {
                got.insert_or_assign(seq, std::move(*result.batch));
            }
        }
    }
    for (auto& [seq, batch] : got) {
        hand_back(std::move(batch), true, std::exchange(pending_restart_, false), out);
    }
    counts_.lost += missing - static_cast<std::int64_t>(got.size());
}

} // namespace kvscope::attach
