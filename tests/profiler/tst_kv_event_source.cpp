// KvEventSource over real ZeroMQ sockets on loopback, against the test
// publisher of tests/support/kv_event_publisher.h (cppzmq and msgpack-c,
// independent of the decoder, speaking vLLM's protocol with an XPUB and a
// ROUTER replay thread).
#include "profiler/attach/kv_event_source.h"
#include "profiler/attach/resident_blocks.h"
#include "tests/support/kv_event_publisher.h"
#include "tests/support/sanitized_build.h"

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <msgpack.hpp>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include <QTest>

using namespace kvscope::attach;
using namespace std::chrono_literals;

namespace {

// vLLM 0.23's positional events, two tokens a block (the shared publisher's).
using Stored = kvscope::test::PublishedStored;
using Removed = kvscope::test::PublishedRemoved;
using Cleared = kvscope::test::PublishedCleared;
using Event = kvscope::test::PublishedEvent;

std::string payload(const std::vector<Event>& events, double ts = 1.0) {
    return kvscope::test::kv_event_payload(events, ts);
}

using TestPublisher = kvscope::test::KvEventPublisher;
using kvscope::test::sequence_frame;

std::string seq_bytes(std::uint64_t seq) {
    return sequence_frame(seq);
}

std::string endpoint_of(zmq::socket_t& socket) {
    return socket.get(zmq::sockopt::last_endpoint);
}

KvEventSourceOptions options_for(const TestPublisher& publisher, bool replay = true) {
    KvEventSourceOptions options;
    options.endpoint = publisher.endpoint;
    options.replay_endpoint = replay ? publisher.replay_endpoint : std::string{};
    options.topic = "kv-events";
    options.reconnect_interval = 20ms;
    options.reconnect_interval_max = 100ms;
    return options;
}

// Polls until `count` batches came back or 3 s passed.
std::vector<SourceBatch> collect(KvEventSource& source, std::size_t count,
                                 std::chrono::milliseconds limit = 3000ms) {
    std::vector<SourceBatch> out;
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (out.size() < count && std::chrono::steady_clock::now() < deadline) {
        for (SourceBatch& batch : source.poll(20ms)) {
            out.push_back(std::move(batch));
        }
    }
    return out;
}

std::vector<std::uint64_t> sequences(const std::vector<SourceBatch>& batches) {
    std::vector<std::uint64_t> out;
    for (const SourceBatch& batch : batches) {
        out.push_back(batch.batch.sequence);
    }
    return out;
}

std::string one_block(std::uint64_t hash) {
    return payload({Stored{{hash}, std::nullopt}});
}

} // namespace

class TestKvEventSource : public QObject {
    Q_OBJECT

    zmq::context_t context_;

private slots:
    void inOrderBatchesDecode() {
        TestPublisher publisher(context_);
        KvEventSource source(context_, options_for(publisher));
        QVERIFY(!source.last_message_time());
        QVERIFY(publisher.wait_for_subscriber());
        for (std::uint64_t seq = 0; seq < 10; ++seq) {
            publisher.publish(seq, one_block(0x8000000000000000ull + seq));
        }
        const auto batches = collect(source, 10);
        QCOMPARE(sequences(batches), (std::vector<std::uint64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
        QCOMPARE(batches[3].batch.topic, std::string("kv-events"));
        const auto& event = std::get<StoredBlocks>(batches[3].batch.events.at(0));
        QCOMPARE(event.hashes.at(0), BlockHash::from_uint(0x8000000000000003ull));
        QCOMPARE(source.counts().messages, std::int64_t{10});
        QCOMPARE(source.counts().events, std::int64_t{10});
        QCOMPARE(source.counts().gaps, std::int64_t{0});
        QCOMPARE(publisher.replay_requests.load(), 0);
        QVERIFY(source.last_message_time().has_value());
        QVERIFY(source.silent_for() < 2s * kvscope::test::kSlowdown);
    }

    void gapIsFilledByReplay_data() {
        QTest::addColumn<bool>("withTopic");
        QTest::newRow("reply [seq, payload]") << false;
        QTest::newRow("reply [topic, seq, payload]") << true;
    }
    void gapIsFilledByReplay() {
        QFETCH(bool, withTopic);
        TestPublisher publisher(context_, {}, withTopic);
        KvEventSource source(context_, options_for(publisher));
        QVERIFY(publisher.wait_for_subscriber());
        for (std::uint64_t seq = 0; seq < 8; ++seq) {
            publisher.publish(seq, one_block(100 + seq), /*drop=*/seq == 2 || seq == 3 || seq == 6);
        }
        const auto batches = collect(source, 8);
        QCOMPARE(sequences(batches), (std::vector<std::uint64_t>{0, 1, 2, 3, 4, 5, 6, 7}));
        QVERIFY(batches[2].replayed && batches[3].replayed && batches[6].replayed);
        QVERIFY(!batches[4].replayed);
        QCOMPARE(std::get<StoredBlocks>(batches[6].batch.events.at(0)).hashes.at(0),
                 BlockHash::from_uint(106));
        QCOMPARE(source.counts().gaps, std::int64_t{2});
        QCOMPARE(source.counts().replayed, std::int64_t{3});
        QCOMPARE(source.counts().lost, std::int64_t{0});
        QCOMPARE(source.counts().messages, std::int64_t{5});
        QCOMPARE(publisher.replay_requests.load(), 2);
    }

    void gapReplayCannotFillIsLost() {
        TestPublisher publisher(context_);
        KvEventSource source(context_, options_for(publisher));
        QVERIFY(publisher.wait_for_subscriber());
        publisher.publish(0, one_block(1));
        // 1 fell out of the publisher's buffer too; 2 is still there.
        publisher.publish(1, one_block(2), /*drop=*/true, /*keep=*/false);
        publisher.publish(2, one_block(3), /*drop=*/true);
        publisher.publish(3, one_block(4));
        const auto batches = collect(source, 3);
        QCOMPARE(sequences(batches), (std::vector<std::uint64_t>{0, 2, 3}));
        QCOMPARE(source.counts().lost, std::int64_t{1});
        QCOMPARE(source.counts().replayed, std::int64_t{1});
    }

    void gapWithoutReplaySocketIsLost() {
        TestPublisher publisher(context_);
        KvEventSource source(context_, options_for(publisher, /*replay=*/false));
        QVERIFY(publisher.wait_for_subscriber());
        publisher.publish(0, one_block(1));
        publisher.publish(1, one_block(2), true);
        publisher.publish(2, one_block(3), true);
        publisher.publish(3, one_block(4));
        const auto batches = collect(source, 2);
        QCOMPARE(sequences(batches), (std::vector<std::uint64_t>{0, 3}));
        QCOMPARE(source.counts().gaps, std::int64_t{1});
        QCOMPARE(source.counts().lost, std::int64_t{2});
        QCOMPARE(publisher.replay_requests.load(), 0);
    }

    // A replay socket that never answers costs one replay_timeout, then the
    // gap is lost and the stream goes on.
    void silentReplaySocketTimesOut() {
        TestPublisher publisher(context_);
        zmq::socket_t mute(context_, zmq::socket_type::router);
        mute.set(zmq::sockopt::linger, 0);
        mute.bind("tcp://127.0.0.1:*");
        KvEventSourceOptions options = options_for(publisher);
        options.replay_endpoint = endpoint_of(mute);
        options.replay_timeout = 100ms;
        KvEventSource source(context_, options);
        QVERIFY(publisher.wait_for_subscriber());
        publisher.publish(0, one_block(1));
        publisher.publish(1, one_block(2), true);
        publisher.publish(2, one_block(3));
        const auto started = std::chrono::steady_clock::now();
        const auto batches = collect(source, 2);
        QVERIFY(std::chrono::steady_clock::now() - started < 1s * kvscope::test::kSlowdown);
        QCOMPARE(sequences(batches), (std::vector<std::uint64_t>{0, 2}));
        QCOMPARE(source.counts().lost, std::int64_t{1});
        QVERIFY(!source.last_error().empty());
    }

    // A reader that does not keep up never blocks the publisher: beyond the
    // high-water marks ZeroMQ drops, and the reader sees counted gaps.
    void slowReaderDropsNeverBlocks() {
        TestPublisher publisher(context_);
        KvEventSourceOptions options = options_for(publisher, /*replay=*/false);
        options.receive_hwm = 16;
        KvEventSource source(context_, options);
        QVERIFY(publisher.wait_for_subscriber());
        const std::string body =
            payload({Stored{std::vector<std::uint64_t>(200, 7), std::nullopt}});
        const std::uint64_t sent = 20000;
        const auto started = std::chrono::steady_clock::now();
        for (std::uint64_t seq = 0; seq < sent; ++seq) {
            publisher.publish(seq, body, false, /*keep=*/false);
        }
        // The reader reads nothing meanwhile (it has no thread of its own),
        // so a publisher that blocked would wait for ever: the bound only
        // ends such a wait, far above the ~0.1 s this takes, so that a busy
        // machine cannot fail it.
        QVERIFY(std::chrono::steady_clock::now() - started < 60s);
        std::int64_t received = 0;
        for (auto batches = source.poll(200ms); !batches.empty(); batches = source.poll(200ms)) {
            received += static_cast<std::int64_t>(batches.size());
        }
        QVERIFY(received > 0);
        QVERIFY(received < static_cast<std::int64_t>(sent));
        // What ZeroMQ dropped may all lie after what got through (how drops
        // interleave depends on the machine's speed: under a sanitizer they
        // did): one more batch once the reader has caught up shows the gap.
        publisher.publish(sent, body, false, /*keep=*/false);
        bool last_arrived = false;
        for (int i = 0; i < 50 && !last_arrived; ++i) {
            for (const auto& batch : source.poll(100ms)) {
                ++received;
                last_arrived = batch.batch.sequence == sent;
            }
        }
        QVERIFY(last_arrived);
        QVERIFY(source.counts().gaps > 0);
        // Every sequence number up to the last one received is either
        // handed back or counted lost.
        QCOMPARE(received + source.counts().lost, static_cast<std::int64_t>(sent) + 1);
    }

    void sequenceBackwardsIsARestart() {
        TestPublisher publisher(context_);
        KvEventSource source(context_, options_for(publisher));
        QVERIFY(publisher.wait_for_subscriber());
        ResidentBlocks blocks;
        for (std::uint64_t seq = 0; seq < 4; ++seq) {
            publisher.publish(seq, one_block(10 + seq));
        }
        publisher.publish(0, one_block(20)); // counting from 0 again
        publisher.publish(1, payload({Cleared{}}));
        publisher.publish(2, one_block(21));
        const auto batches = collect(source, 7);
        QCOMPARE(sequences(batches), (std::vector<std::uint64_t>{0, 1, 2, 3, 0, 1, 2}));
        for (const SourceBatch& batch : batches) {
            if (batch.restarted) {
                blocks.clear();
            }
            blocks.apply(batch.batch);
        }
        QVERIFY(batches[4].restarted);
        QCOMPARE(source.counts().restarts, std::int64_t{1});
        QCOMPARE(source.counts().clears, std::int64_t{1});
        QCOMPARE(source.counts().gaps, std::int64_t{0});
        QCOMPARE(blocks.size(), std::size_t{1});
        QVERIFY(blocks.find({0, "GPU"}, BlockHash::from_uint(21)) != nullptr);
    }

    // A restarted publisher whose first batches we missed: replay gives them
    // back, the first one flagged as the restart.
    void restartReplaysWhatWasMissedOfTheNewRun() {
        TestPublisher publisher(context_);
        KvEventSource source(context_, options_for(publisher));
        QVERIFY(publisher.wait_for_subscriber());
        for (std::uint64_t seq = 0; seq < 4; ++seq) {
            publisher.publish(seq, one_block(10 + seq));
        }
        publisher.publish(0, one_block(20), /*drop=*/true);
        publisher.publish(1, one_block(21), /*drop=*/true);
        publisher.publish(2, one_block(22));
        const auto batches = collect(source, 7);
        QCOMPARE(sequences(batches), (std::vector<std::uint64_t>{0, 1, 2, 3, 0, 1, 2}));
        QVERIFY(batches[4].restarted && batches[4].replayed);
        QVERIFY(!batches[5].restarted && !batches[6].restarted);
        QCOMPARE(std::get<StoredBlocks>(batches[4].batch.events.at(0)).hashes.at(0),
                 BlockHash::from_uint(20));
        QCOMPARE(source.counts().restarts, std::int64_t{1});
        QCOMPARE(source.counts().replayed, std::int64_t{2});
        QCOMPARE(source.counts().lost, std::int64_t{0});
    }

    void malformedFramesAreCountedNeverCrash() {
        TestPublisher publisher(context_);
        KvEventSource source(context_, options_for(publisher));
        QVERIFY(publisher.wait_for_subscriber());
        publisher.publish(0, one_block(1));
        const std::string topic = publisher.topic;
        publisher.send({topic});                                         // one frame
        publisher.send({topic, seq_bytes(1), one_block(2), "extra"});    // four
        publisher.send({topic, "abc", one_block(2)});                    // short sequence
        publisher.send({topic, seq_bytes(1), "\xC1\xFF garbage"});       // not msgpack
        publisher.send({topic, seq_bytes(1), payload({}).substr(0, 3)}); // truncated
        std::mt19937 rng(7);
        for (int i = 0; i < 20; ++i) {
            std::string junk(1 + rng() % 64, '\0');
            for (char& c : junk) {
                c = static_cast<char>(rng());
            }
            publisher.send({topic, seq_bytes(1), junk});
        }
        publisher.publish(1, one_block(3));
        const auto batches = collect(source, 2);
        QCOMPARE(sequences(batches).back(), std::uint64_t{1});
        QVERIFY(source.counts().decode_errors >= 5);
        QCOMPARE(source.counts().decode_errors + static_cast<std::int64_t>(batches.size()),
                 source.counts().messages);
        QVERIFY(!source.last_error().empty());
    }

    void publisherThatComesBackIsReconnected() {
        std::string endpoint;
        std::optional<KvEventSource> source;
        {
            TestPublisher first(context_);
            endpoint = first.endpoint;
            source.emplace(context_, options_for(first, /*replay=*/false));
            QVERIFY(first.wait_for_subscriber());
            for (std::uint64_t seq = 0; seq < 3; ++seq) {
                first.publish(seq, one_block(seq));
            }
            QCOMPARE(collect(*source, 3).size(), std::size_t{3});
        }
        // The engine restarts on the same port; ZeroMQ reconnects on its own
        // and the subscription reaches the new socket.
        TestPublisher second(context_, endpoint);
        QVERIFY(second.wait_for_subscriber([&] { QVERIFY(source->poll(1ms).empty()); }));
        second.publish(0, one_block(50));
        second.publish(1, one_block(51));
        const auto batches = collect(*source, 2);
        QCOMPARE(sequences(batches), (std::vector<std::uint64_t>{0, 1}));
        QVERIFY(batches[0].restarted);
        QCOMPARE(source->counts().restarts, std::int64_t{1});
    }

    void silenceIsMeasured() {
        TestPublisher publisher(context_);
        KvEventSource source(context_, options_for(publisher));
        QVERIFY(source.poll(1ms).empty());
        QVERIFY(publisher.wait_for_subscriber());
        publisher.publish(0, one_block(1));
        QCOMPARE(collect(source, 1).size(), std::size_t{1});
        const auto heard = *source.last_message_time();
        QCOMPARE(source.silent_for(heard + 5s).count(), 5.0);
    }

    // Random stores and removals over the socket, some dropped and replayed:
    // the resident state equals what the publisher sent.
    void residentStateEqualsWhatWasSent() {
        TestPublisher publisher(context_);
        KvEventSourceOptions options = options_for(publisher);
        // Nothing may be lost here: under ThreadSanitizer on a busy machine a
        // replay's answer took longer than the default half second.
        options.replay_timeout = 10s;
        KvEventSource source(context_, options);
        QVERIFY(publisher.wait_for_subscriber());
        std::mt19937_64 rng(11);
        std::set<std::uint64_t> resident;
        std::map<std::uint64_t, std::optional<std::uint64_t>> parents;
        const std::uint64_t count = 200;
        for (std::uint64_t seq = 0; seq < count; ++seq) {
            std::vector<Event> events;
            if (rng() % 3 != 0) {
                const std::uint64_t hash = 0xF000000000000000ull + rng() % 64;
                std::optional<std::uint64_t> parent;
                if (rng() % 2) {
                    parent = 0xF000000000000000ull + rng() % 64;
                }
                events.emplace_back(std::in_place_type<Stored>, std::vector{hash}, parent);
                resident.insert(hash);
                parents[hash] = parent;
            } else {
                const std::uint64_t hash = 0xF000000000000000ull + rng() % 64;
                events.emplace_back(std::in_place_type<Removed>, std::vector{hash});
                resident.erase(hash);
            }
            publisher.publish(seq, payload(events), /*drop=*/seq > 0 && rng() % 10 == 0);
        }
        ResidentBlocks blocks;
        const auto batches = collect(source, count, 30s); // back as soon as all came
        QCOMPARE(batches.size(), std::size_t{count});
        for (const SourceBatch& batch : batches) {
            blocks.apply(batch.batch);
        }
        QCOMPARE(source.counts().lost, std::int64_t{0});
        QVERIFY(source.counts().replayed > 0);
        QCOMPARE(blocks.size(), resident.size());
        for (const std::uint64_t hash : resident) {
            const ResidentBlock* block = blocks.find({0, "GPU"}, BlockHash::from_uint(hash));
            QVERIFY(block != nullptr);
            QCOMPARE(block->parent ? std::optional(block->parent->low64()) : std::nullopt,
                     parents[hash]);
        }
    }
};

QTEST_GUILESS_MAIN(TestKvEventSource)
#include "tst_kv_event_source.moc"
