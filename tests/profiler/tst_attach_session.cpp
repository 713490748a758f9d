// AttachSession end to end over real loopback sockets: two publishers at
// once, their events recorded, and the recording read back three ways (the
// rows into an AttachedState, the SQL views a person would query, and
// `stats`) must all tell what the publishers sent.
#include "profiler/attach/attach_session.h"
#include "profiler/recording/event_rows.h"
#include "profiler/recording/recorder.h"
#include "profiler/recording/recording_stats.h"
#include "profiler/recording/sqlite_util.h"
#include "tests/support/kv_event_publisher.h"

#include <QTemporaryDir>
#include <QTest>

using namespace kvscope;
using namespace kvscope::attach;
using namespace std::chrono_literals;
using test::kv_event_payload;
using test::KvEventPublisher;
using test::PublishedCleared;
using test::PublishedRemoved;
using test::PublishedStored;

namespace {

KvEventSourceOptions options_for(const KvEventPublisher& publisher) {
    KvEventSourceOptions options;
    options.endpoint = publisher.endpoint;
    options.replay_endpoint = publisher.replay_endpoint;
    options.topic = publisher.topic;
    options.reconnect_interval = 20ms;
    options.reconnect_interval_max = 100ms;
    return options;
}

// Polls until every source handed back `events` events (or 5 s passed).
void drain(AttachSession& session, std::int64_t events) {
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    const auto received = [&] {
        std::int64_t total = 0;
        for (const auto& source : session.sources()) {
            total += source->counts().events;
        }
        return total;
    };
    while (received() < events && std::chrono::steady_clock::now() < deadline) {
        session.poll(20ms);
    }
}

} // namespace

class TestAttachSession : public QObject {
    Q_OBJECT

    zmq::context_t context_;

private slots:
    void twoPublishersRecordedAndReadBack() {
        QTemporaryDir dir;
        const std::string path = dir.filePath("attached.sqlite").toStdString();
        KvEventPublisher gpu0(context_);
        KvEventPublisher gpu1(context_);
        AttachOptions options;
        options.sources = {options_for(gpu0), options_for(gpu1)};
        options.num_blocks = 64;
        options.status_interval = 50ms;
        auto recorder = std::make_unique<profiler::Recorder>(
            path, std::map<std::string, std::string>{{"recorded_by", "test"}});
        AttachSession session(options, recorder.get());
        QVERIFY(gpu0.wait_for_subscriber([&] { session.poll(1ms); }));
        QVERIFY(gpu1.wait_for_subscriber([&] { session.poll(1ms); }));

        // Publisher 0: a chain of three blocks, one of them evicted; then a
        // lost batch that replay fills. Publisher 1, rank 1: one block on
        // GPU and one offloaded to CPU, then everything cleared and one new.
        QVERIFY(gpu0.publish(0, kv_event_payload({PublishedStored{{11, 12, 13}, std::nullopt}})));
        QVERIFY(gpu0.publish(1, kv_event_payload({PublishedRemoved{{13}}}), /*drop=*/true));
        QVERIFY(gpu0.publish(2, kv_event_payload({PublishedStored{{14}, 12}})));
        QVERIFY(
            gpu1.publish(0, kv_event_payload({PublishedStored{{21}, std::nullopt},
                                              PublishedStored{{22}, std::nullopt, {}, 2, "CPU"}},
                                             2.0, 1)));
        QVERIFY(gpu1.publish(1, kv_event_payload({PublishedCleared{}}, 3.0, 1)));
        QVERIFY(gpu1.publish(2, kv_event_payload({PublishedStored{{23}, std::nullopt}}, 4.0, 1)));
        drain(session, 3 + 4); // KV events, not blocks
        std::this_thread::sleep_for(60ms);
        session.poll(1ms); // a status row is due
        session.emit_status();

        const AttachedState& live = session.state();
        QCOMPARE(live.sources().size(), std::size_t{2});
        const ResidentBlocks& zero = live.source(0)->blocks;
        QCOMPARE(zero.size(), std::size_t{3}); // 11, 12, 14
        QVERIFY(zero.find({0, "GPU"}, BlockHash::from_uint(14)) != nullptr);
        QVERIFY(zero.find({0, "GPU"}, BlockHash::from_uint(13)) == nullptr);
        QCOMPARE(session.sources()[0]->counts().replayed, std::int64_t{1});
        const ResidentBlocks& one = live.source(1)->blocks;
        QCOMPARE(one.size(), std::size_t{1});
        QVERIFY(one.find({1, "GPU"}, BlockHash::from_uint(23)) != nullptr);
        QCOMPARE(one.counts().clears, std::int64_t{1});
        recorder->close();

        // The recording's rows rebuild the same state.
        {
            const profiler::ReadOnlyRecording recording(path);
            profiler::EventRows rows(recording.db(), path);
            events::EngineEvent event;
            AttachedState replayed;
            while (rows.next(event)) {
                replayed.apply(event);
            }
            QCOMPARE(replayed.sources().size(), std::size_t{2});
            for (std::int64_t id : {0, 1}) {
                const auto& a = replayed.source(id)->blocks;
                const auto& b = live.source(id)->blocks;
                QCOMPARE(a.size(), b.size());
                QCOMPARE(a.counts(), b.counts());
                for (const auto& [key, tier] : b.tiers()) {
                    for (const auto& [hash, block] : tier.blocks) {
                        const ResidentBlock* other = a.find(key, hash);
                        QVERIFY(other != nullptr);
                        QVERIFY(*other == block);
                    }
                }
            }
            QCOMPARE(replayed.source(0)->info.num_blocks, std::int64_t{64});
            QCOMPARE(replayed.source(0)->status.events, std::int64_t{3});

            // The SQL views, as a person with sqlite3 would read them.
            profiler::Statement sources(recording.db(),
                                        "SELECT source, endpoint, replay_endpoint, topic, "
                                        "num_blocks FROM KVSCOPE_SOURCES ORDER BY source");
            QVERIFY(sources.next());
            QCOMPARE(sources.text(1), gpu0.endpoint);
            QCOMPARE(sources.text(2), gpu0.replay_endpoint);
            QCOMPARE(sources.text(3), std::string("kv-events"));
            QCOMPARE(sources.int64(4), std::int64_t{64});
            QVERIFY(sources.next());
            QCOMPARE(sources.text(1), gpu1.endpoint);
            QVERIFY(!sources.next());

            profiler::Statement blocks(
                recording.db(),
                "SELECT kind, source, rank, medium, hash, parent, block_size, tokens, cause, "
                "published_us FROM KVSCOPE_ATTACHED_BLOCKS WHERE source = 1 ORDER BY id");
            QVERIFY(blocks.next());
            QCOMPARE(blocks.text(0), std::string("attached_block_stored"));
            QCOMPARE(blocks.int64(2), std::int64_t{1});
            QCOMPARE(blocks.text(3), std::string("GPU"));
            QCOMPARE(blocks.text(4), std::string("0x0000000000000015")); // 21
            QVERIFY(blocks.is_null(5));
            QCOMPARE(blocks.int64(6), std::int64_t{2});
            QCOMPARE(blocks.text(7), std::string("[0,1]"));
            QCOMPARE(blocks.int64(9), std::int64_t{2'000'000});
            QVERIFY(blocks.next());
            QCOMPARE(blocks.text(3), std::string("CPU"));
            QVERIFY(blocks.next());
            QCOMPARE(blocks.text(0), std::string("attached_cleared"));
            QCOMPARE(blocks.text(8), std::string("all_blocks_cleared"));
            QVERIFY(blocks.is_null(4));
            QVERIFY(blocks.next());
            QCOMPARE(blocks.text(4), std::string("0x0000000000000017")); // 23
            QVERIFY(!blocks.next());

            profiler::Statement parent(recording.db(),
                                       "SELECT parent FROM KVSCOPE_ATTACHED_BLOCKS WHERE hash = "
                                       "'0x000000000000000e'");
            QVERIFY(parent.next());
            QCOMPARE(parent.text(0), std::string("0x000000000000000c")); // 14's parent is 12
            profiler::Statement status(recording.db(),
                                       "SELECT max(events), max(lost) FROM KVSCOPE_ATTACHED_STATUS "
                                       "WHERE source = 0");
            QVERIFY(status.next());
            QCOMPARE(status.int64(0), std::int64_t{3});
            QCOMPARE(status.int64(1), std::int64_t{0});
        }

        // stats reads it as an attached run.
        const profiler::RecordingStats stats = profiler::compute_stats(path);
        QCOMPARE(stats.attached.size(), std::size_t{2});
        QCOMPARE(stats.attached[0].endpoint, gpu0.endpoint);
        QCOMPARE(stats.attached[0].blocks_stored, std::int64_t{4});
        QCOMPARE(stats.attached[0].blocks_removed, std::int64_t{1});
        QCOMPARE(stats.attached[0].tiers.size(), std::size_t{1});
        QCOMPARE(stats.attached[0].tiers[0].resident_blocks, std::int64_t{3});
        QCOMPARE(stats.attached[0].tiers[0].peak_resident_blocks, std::int64_t{3});
        QCOMPARE(stats.attached[1].clears, std::int64_t{1});
        QCOMPARE(stats.attached[1].tiers.size(), std::size_t{2}); // rank 1 GPU and CPU
        QCOMPARE(stats.steps, std::int64_t{0});
    }

    void badEndpointIsRefusedWithItsName() {
        AttachOptions options;
        KvEventSourceOptions source;
        source.endpoint = "tcp://";
        options.sources.push_back(source);
        try {
            AttachSession session(options, nullptr);
            QFAIL("an endpoint ZeroMQ cannot parse was accepted");
        } catch (const std::invalid_argument& error) {
            QVERIFY2(std::string(error.what()).find("tcp://") != std::string::npos, error.what());
        }
    }

    void hostPortBecomesTcp() {
        QCOMPARE(normalize_endpoint("gpu-node-3:5557"), std::string("tcp://gpu-node-3:5557"));
        QCOMPARE(normalize_endpoint("ipc:///tmp/kv"), std::string("ipc:///tmp/kv"));
        QCOMPARE(normalize_endpoint(""), std::string());
    }

    void metricsUrlsAreCheckedAndCompleted() {
        QCOMPARE(attach::normalize_metrics_url("gpu7:8000"),
                 std::string("http://gpu7:8000/metrics"));
        QCOMPARE(attach::normalize_metrics_url("gpu7:30000/custom"),
                 std::string("http://gpu7:30000/custom"));
        QCOMPARE(attach::normalize_metrics_url("https://h/m"), std::string("https://h/m"));
        QCOMPARE(attach::normalize_metrics_url("gpu7:8000/"),
                 std::string("http://gpu7:8000/metrics"));
        QCOMPARE(attach::normalize_metrics_url("http://"), std::string());
        QCOMPARE(attach::normalize_metrics_url("ftp://h/m"), std::string());
        QCOMPARE(attach::normalize_metrics_url(""), std::string());

        attach::AttachOptions options;
        QCOMPARE(attach::add_sources({"a:1", "b:2"}, {}, "", options), std::string());
        QCOMPARE(attach::add_metrics_urls({"a:8000", "http://b:8000/metrics"}, 0.5, options),
                 std::string());
        QCOMPARE(options.metrics_urls,
                 (std::vector<std::string>{"http://a:8000/metrics", "http://b:8000/metrics"}));
        QCOMPARE(options.metrics_interval, std::chrono::milliseconds(500));
        QVERIFY(options.metrics_http.total_timeout >= std::chrono::milliseconds(1000));
        QVERIFY(attach::add_metrics_urls({"a:8000"}, 1, options).find("one metrics URL per") !=
                std::string::npos);
        QVERIFY(attach::add_metrics_urls({"a:1", "gopher://b"}, 1, options).find("gopher://b") !=
                std::string::npos);
        QVERIFY(!attach::add_metrics_urls({}, 0, options).empty());
        QCOMPARE(attach::add_metrics_urls({}, 1, options), std::string());
        QVERIFY(options.metrics_urls.empty());
    }

    void silentSourceIsReported() {
        AttachOptions options;
        KvEventSourceOptions source;
        source.endpoint = "tcp://127.0.0.1:1"; // nothing listens there
        options.sources.push_back(source);
        AttachSession session(options, nullptr);
        std::this_thread::sleep_for(30ms);
        QCOMPARE(session.poll(10ms), std::size_t{0});
        session.emit_status();
        const events::AttachedStatus& status = session.state().source(0)->status;
        QVERIFY2(status.silent_ms >= 30, std::to_string(status.silent_ms).c_str());
        QCOMPARE(status.events, std::int64_t{0});
    }
};

QTEST_GUILESS_MAIN(TestAttachSession)
#include "tst_attach_session.moc"
