// A KV-event publisher for tests, written with cppzmq and msgpack-c's packer
// apart from kvscope's decoder, speaking vLLM's protocol: an XPUB (a PUB that
// also reports subscriptions, so no test races ZeroMQ's slow joiner) sending
// [topic, 8-byte big-endian seq, payload], and a ROUTER answering replay
// requests (["", start_seq] -> ["", seq, payload]... then the end marker)
// from its own thread, as vLLM's publisher thread does.
#pragma once

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <msgpack.hpp>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <variant>
#include <vector>
#include <zmq.hpp>
#include <zmq_addon.hpp>

namespace kvscope::test {

using namespace std::chrono_literals;

// What a test publishes, in vLLM 0.23's positional form.
struct PublishedStored {
    std::vector<std::uint64_t> hashes{};
    std::optional<std::uint64_t> parent{};
    std::vector<std::int64_t> token_ids{}; // empty: ids 0, 1, 2, ... (block_size per hash)
    std::int64_t block_size = 2;
    std::string medium = "GPU";
};
struct PublishedRemoved {
    std::vector<std::uint64_t> hashes{};
    std::string medium = "GPU";
};
struct PublishedCleared {};
using PublishedEvent = std::variant<PublishedStored, PublishedRemoved, PublishedCleared>;

inline void pack_text(msgpack::packer<msgpack::sbuffer>& p, std::string_view text) {
    p.pack_str(static_cast<std::uint32_t>(text.size()));
    p.pack_str_body(text.data(), static_cast<std::uint32_t>(text.size()));
}

// [ts, [events...], rank].
inline std::string kv_event_payload(const std::vector<PublishedEvent>& events, double ts = 1.0,
                                    std::int64_t rank = 0) {
    msgpack::sbuffer buffer;
    msgpack::packer<msgpack::sbuffer> p(buffer);
    p.pack_array(3);
    p.pack_double(ts);
    p.pack_array(static_cast<std::uint32_t>(events.size()));
    for (const PublishedEvent& event : events) {
        if (const auto* s = std::get_if<PublishedStored>(&event)) {
            p.pack_array(7);
            pack_text(p, "BlockStored");
            p.pack_array(static_cast<std::uint32_t>(s->hashes.size()));
            for (const std::uint64_t hash : s->hashes) {
                p.pack_uint64(hash);
            }
            if (s->parent) {
                p.pack_uint64(*s->parent);
            } else {
                p.pack_nil();
            }
            std::vector<std::int64_t> tokens = s->token_ids;
            if (tokens.empty()) {
                for (std::size_t i = 0;
                     i < s->hashes.size() * static_cast<std::size_t>(s->block_size); ++i) {
                    tokens.push_back(static_cast<std::int64_t>(i));
                }
            }
            p.pack_array(static_cast<std::uint32_t>(tokens.size()));
            for (const std::int64_t token : tokens) {
                p.pack_int64(token);
            }
            p.pack_int64(s->block_size);
            p.pack_nil();
            pack_text(p, s->medium);
        } else if (const auto* r = std::get_if<PublishedRemoved>(&event)) {
            p.pack_array(3);
            pack_text(p, "BlockRemoved");
            p.pack_array(static_cast<std::uint32_t>(r->hashes.size()));
            for (const std::uint64_t hash : r->hashes) {
                p.pack_uint64(hash);
            }
            pack_text(p, r->medium);
        } else {
            p.pack_array(1);
            pack_text(p, "AllBlocksCleared");
        }
    }
    p.pack_int64(rank);
    return {buffer.data(), buffer.size()};
}

inline std::string sequence_frame(std::uint64_t seq) {
    std::string out(8, '\0');
    for (int i = 7; i >= 0; --i) {
        out[static_cast<std::size_t>(i)] = static_cast<char>(seq & 0xFF);
        seq >>= 8;
    }
    return out;
}

class KvEventPublisher {
public:
    // `pub_endpoint` empty: an ephemeral loopback port.
    explicit KvEventPublisher(zmq::context_t& context, std::string pub_endpoint = {},
                              bool replies_with_topic = false)
        : pub_(context, zmq::socket_type::xpub)
        , router_(context, zmq::socket_type::router)
        , with_topic_(replies_with_topic) {
        pub_.set(zmq::sockopt::linger, 0);
        router_.set(zmq::sockopt::linger, 0);
        bind_retrying(pub_, pub_endpoint.empty() ? "tcp://127.0.0.1:*" : pub_endpoint);
        router_.bind("tcp://127.0.0.1:*");
        endpoint = pub_.get(zmq::sockopt::last_endpoint);
        replay_endpoint = router_.get(zmq::sockopt::last_endpoint);
        replay_thread_ = std::thread([this] { serve_replay(); });
    }
    ~KvEventPublisher() {
        stop_ = true;
        replay_thread_.join();
    }
    KvEventPublisher(const KvEventPublisher&) = delete;
    KvEventPublisher& operator=(const KvEventPublisher&) = delete;

    // A subscription reached the XPUB: what we send now arrives. `meanwhile`
    // runs between waits (a SUB socket resends its subscription after a
    // reconnect only when its own thread uses it, so the subscriber has to
    // keep polling).
    bool wait_for_subscriber(const std::function<void()>& meanwhile = {},
                             std::chrono::milliseconds timeout = 3000ms) {
        std::array<zmq::pollitem_t, 1> items{{{pub_.handle(), 0, ZMQ_POLLIN, 0}}};
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        while (std::chrono::steady_clock::now() < deadline) {
            if (meanwhile) {
                meanwhile();
            }
            if (zmq::poll(items.data(), 1, 10ms) > 0) {
                zmq::message_t message;
                if (pub_.recv(message, zmq::recv_flags::dontwait) && message.size() > 0 &&
                    message.data<char>()[0] == 1) {
                    return true;
                }
            }
        }
        return false;
    }

    // Buffers the batch for replay (unless !keep); sends it unless `drop`
    // (a message the subscriber never sees). False when sending failed.
    bool publish(std::uint64_t seq, const std::string& body, bool drop = false, bool keep = true) {
        if (keep) {
            std::lock_guard lock(mutex_);
            buffer_[seq] = body;
        }
        return drop || send({topic, sequence_frame(seq), body});
    }

    bool send(const std::vector<std::string>& frames) {
        std::vector<zmq::const_buffer> buffers;
        for (const std::string& frame : frames) {
            buffers.emplace_back(frame.data(), frame.size());
        }
        return zmq::send_multipart(pub_, buffers).has_value();
    }

    std::string endpoint;
    std::string replay_endpoint;
    std::string topic = "kv-events";
    std::atomic<int> replay_requests{0};

private:
    // ZeroMQ closes a socket in its reaper thread, so a port its predecessor
    // held may stay taken for a moment after that socket is gone.
    static void bind_retrying(zmq::socket_t& socket, const std::string& endpoint) {
        const auto deadline = std::chrono::steady_clock::now() + 2s;
        for (;;) {
            try {
                socket.bind(endpoint);
                return;
            } catch (const zmq::error_t& error) {
                if (error.num() != EADDRINUSE || std::chrono::steady_clock::now() > deadline) {
                    throw;
                }
                std::this_thread::sleep_for(10ms);
            }
        }
    }

    void serve_replay() {
        std::array<zmq::pollitem_t, 1> items{{{router_.handle(), 0, ZMQ_POLLIN, 0}}};
        while (!stop_) {
            if (zmq::poll(items.data(), 1, 20ms) == 0) {
                continue;
            }
            std::vector<zmq::message_t> request;
            if (!zmq::recv_multipart(router_, std::back_inserter(request),
                                     zmq::recv_flags::dontwait) ||
                request.size() != 3) {
                continue;
            }
            ++replay_requests;
            std::uint64_t start = 0;
            for (std::size_t i = 0; i < 8 && i < request[2].size(); ++i) {
                start = (start << 8) | request[2].data<std::uint8_t>()[i];
            }
            const std::string id = request[0].to_string();
            std::map<std::uint64_t, std::string> buffered;
            {
                std::lock_guard lock(mutex_);
                buffered = buffer_;
            }
            auto reply = [&](const std::string& seq, const std::string& body) {
                std::vector<std::string> frames = {id, ""};
                if (with_topic_) {
                    frames.push_back(topic);
                }
                frames.push_back(seq);
                frames.push_back(body);
                std::vector<zmq::const_buffer> buffers;
                for (const std::string& frame : frames) {
                    buffers.emplace_back(frame.data(), frame.size());
                }
                (void)zmq::send_multipart(router_, buffers);
            };
            for (const auto& [seq, body] : buffered) {
                if (seq >= start) {
                    reply(sequence_frame(seq), body);
                }
            }
            reply(std::string(8, '\xFF'), "");
        }
    }

    zmq::socket_t pub_;
    zmq::socket_t router_;
    bool with_topic_;
    std::mutex mutex_;
    std::map<std::uint64_t, std::string> buffer_;
    std::atomic<bool> stop_{false};
    std::thread replay_thread_;
};

} // namespace kvscope::test
