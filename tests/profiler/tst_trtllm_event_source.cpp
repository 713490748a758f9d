// TensorRT-LLM's /kv_cache_events polled over loopback HTTP, as trtllm-serve
// answers it (a POST drains the events since the last one): an AttachSession
// with such a source keeps the blocks the events imply and records them like
// any other source's; event ids that skip are counted lost, ids that begin
// again are a restart that voids what came before; a server that is down,
// answers 404 or answers something that is not JSON is a reason, never a
// crash.
#include "profiler/attach/attach_session.h"
#include "profiler/recording/event_rows.h"
#include "profiler/recording/recorder.h"
#include "profiler/recording/recording_stats.h"
#include "tests/support/http_server.h"

#include <chrono>
#include <string>
#include <thread>

#include <QTemporaryDir>
#include <QTest>

using namespace kvscope;
using namespace kvscope::attach;
using namespace std::chrono_literals;

namespace {

// A stored event of one block of two tokens (parent: none or a hash).
// `rank` >= 0: the attention-DP rank that sent it (trtllm-serve gathers
// every rank's events, each rank counting its own ids).
std::string stored(int id, int hash, const char* parent = "null", int level = 0, int rank = -1) {
    return R"({"event_id": )" + std::to_string(id) +
           (rank >= 0 ? R"(, "attention_dp_rank": )" + std::to_string(rank) : std::string()) +
           R"(, "window_size": 4096, "data": {"type": "stored", "parent_hash": )" + parent +
           R"(, "blocks": [{"type": "stored_block", "block_hash": )" + std::to_string(hash) +
           R"(, "tokens": [{"type": "unique_token", "token_id": 5, "token_extra_id": 0},)"
           R"({"type": "unique_token", "token_id": 6, "token_extra_id": 0}], "cache_level": )" +
           std::to_string(level) + R"(, "priority": 35}]}})";
}

std::string removed(int id, int hash) {
    return R"({"event_id": )" + std::to_string(id) +
           R"(, "window_size": 4096, "data": {"type": "removed", "block_hashes": [)" +
           std::to_string(hash) + "]}}";
}

test::HttpServer::Reply json_reply(const std::string& body) {
    return {200, body, false};
}

// Polls the session until `done` holds (true) or 5 s pass (false).
template <class Done>
bool poll_until(AttachSession& session, Done done) {
    const auto until = std::chrono::steady_clock::now() + 5s;
    while (std::chrono::steady_clock::now() < until) {
        session.poll(20ms);
        if (done()) {
            return true;
        }
    }
    return false;
}

AttachOptions trtllm_options(const std::string& url) {
    AttachOptions options;
    const std::string problem = add_trtllm_sources({url}, 0.02, options);
    if (!problem.empty()) {
        throw std::runtime_error(problem);
    }
    return options;
}

} // namespace

class TestTrtllmEventSource : public QObject {
    Q_OBJECT

private slots:
    void urlsAreCompleted() {
        QCOMPARE(normalize_trtllm_url("node:8000"),
                 std::string("http://node:8000/kv_cache_events"));
        QCOMPARE(normalize_trtllm_url("http://node:8000"),
                 std::string("http://node:8000/kv_cache_events"));
        QCOMPARE(normalize_trtllm_url("https://node/"),
                 std::string("https://node/kv_cache_events"));
        QCOMPARE(normalize_trtllm_url("http://node:8000/x/kv_cache_events"),
                 std::string("http://node:8000/x/kv_cache_events"));
        QCOMPARE(normalize_trtllm_url("tcp://node:5557"), std::string());
        QCOMPARE(normalize_trtllm_url("http://"), std::string());
        AttachOptions options;
        QVERIFY(add_trtllm_sources({"a:1"}, 0, options).find("interval") != std::string::npos);
    }

    void pollsRecordsGapsAndRestarts() {
        test::HttpServer server;
        server.set("/kv_cache_events", json_reply("[]"));
        // Two blocks on the GPU, one offloaded to host memory (level 1).
        server.push("/kv_cache_events", json_reply("[" + stored(0, 11) + "," + stored(1, 12, "11") +
                                                   "," + stored(2, 13, "null", 1) + "]"));
        QTemporaryDir dir;
        const std::string path = dir.filePath("trtllm.sqlite").toStdString();
        {
            profiler::Recorder recorder(path, {{"source", "tst_trtllm_event_source"}});
            AttachSession session(trtllm_options(server.url("")), &recorder);
            QVERIFY(
                poll_until(session, [&] { return session.sources()[0]->counts().events >= 3; }));
            session.poll(0ms); // what the source queued with those counts
            QCOMPARE(server.last_method(), std::string("POST"));
            const AttachedState::Source* source = session.state().source(0);
            QVERIFY(source != nullptr);
            QCOMPARE(source->blocks.size(), std::size_t{3});
            QVERIFY(source->blocks.find({0, "GPU"}, BlockHash::from_int(12)) != nullptr);
            QVERIFY(source->blocks.find({0, "CPU"}, BlockHash::from_int(13)) != nullptr);
            QVERIFY(session.sources()[0]->describe().find("/kv_cache_events") != std::string::npos);

            // Event 3 never comes (the server's buffer dropped it): one lost,
            // and what was resident is no longer known (it may have held
            // removals), so the source's blocks go; then 14 is stored.
            server.push("/kv_cache_events",
                        json_reply("[" + removed(4, 11) + "," + stored(5, 14, "12") + "]"));
            QVERIFY(
                poll_until(session, [&] { return session.sources()[0]->counts().events >= 5; }));
            session.poll(0ms);
            SourceCounts counts = session.sources()[0]->counts();
            QCOMPARE(counts.gaps, std::int64_t{1});
            QCOMPARE(counts.lost, std::int64_t{1});
            QCOMPARE(session.state().source(0)->loss_clears, std::int64_t{1});
            QCOMPARE(session.state().source(0)->blocks.size(), std::size_t{1});
            QVERIFY(session.state().source(0)->blocks.find({0, "GPU"}, BlockHash::from_int(14)) !=
                    nullptr);

            // The server restarted: its ids begin again, what it said before is void.
            server.push("/kv_cache_events", json_reply("[" + stored(0, 21) + "]"));
            QVERIFY(
                poll_until(session, [&] { return session.sources()[0]->counts().restarts == 1; }));
            QVERIFY(poll_until(session, [&] {
                return session.state().source(0)->blocks.find({0, "GPU"},
                                                              BlockHash::from_int(21)) != nullptr;
            }));
            QCOMPARE(session.state().source(0)->blocks.size(), std::size_t{1}); // 14 is gone
            session.emit_status();
            recorder.close();
        }
        // The recording holds the same: stats read it back.
        const profiler::RecordingStats stats = profiler::compute_stats(path);
        QCOMPARE(stats.attached.size(), std::size_t{1});
        QVERIFY(stats.attached[0].endpoint.find("/kv_cache_events") != std::string::npos);
        std::int64_t resident = 0;
        for (const profiler::AttachedTierStats& tier : stats.attached[0].tiers) {
            resident += tier.resident_blocks;
        }
        QCOMPARE(resident, std::int64_t{1});
    }

    // With attention data parallelism one reply holds every rank's events,
    // each rank numbering its own from 0: interleaved ids are neither
    // restarts nor gaps; a gap is a rank's own; a server restart (every rank
    // from 0 again) is one restart, clearing once.
    void attentionDpRanksCountApart() {
        test::HttpServer server;
        server.set("/kv_cache_events", json_reply("[]"));
        server.push("/kv_cache_events",
                    json_reply("[" + stored(0, 11, "null", 0, 0) + "," +
                               stored(0, 31, "null", 0, 1) + "," + stored(1, 12, "11", 0, 0) + "," +
                               stored(1, 32, "31", 0, 1) + "]"));
        AttachSession session(trtllm_options(server.url("")), nullptr);
        QVERIFY(poll_until(session, [&] {
            return session.state().source(0) != nullptr &&
                   session.state().source(0)->blocks.size() == 4;
        }));
        SourceCounts counts = session.sources()[0]->counts();
        QCOMPARE(counts.restarts, std::int64_t{0});
        QCOMPARE(counts.gaps, std::int64_t{0});
        QVERIFY(session.state().source(0)->blocks.find({1, "GPU"}, BlockHash::from_int(32)) !=
                nullptr);

        // Rank 1 skips its id 2: one lost, on that rank's count.
        server.push("/kv_cache_events", json_reply("[" + stored(2, 13, "12", 0, 0) + "," +
                                                   stored(3, 33, "32", 0, 1) + "]"));
        QVERIFY(poll_until(session, [&] { return session.sources()[0]->counts().events >= 6; }));
        counts = session.sources()[0]->counts();
        QCOMPARE(counts.gaps, std::int64_t{1});
        QCOMPARE(counts.lost, std::int64_t{1});

        // The server restarted: both ranks from 0 again. One restart; what
        // both ranks said since it stays.
        server.push("/kv_cache_events", json_reply("[" + stored(0, 41, "null", 0, 0) + "," +
                                                   stored(0, 51, "null", 0, 1) + "," +
                                                   stored(1, 42, "41", 0, 0) + "]"));
        QVERIFY(poll_until(session, [&] {
            const AttachedState::Source* source = session.state().source(0);
            return source->blocks.find({0, "GPU"}, BlockHash::from_int(42)) != nullptr;
        }));
        counts = session.sources()[0]->counts();
        QCOMPARE(counts.restarts, std::int64_t{1});
        QCOMPARE(session.state().source(0)->blocks.size(), std::size_t{3});
        QVERIFY(session.state().source(0)->blocks.find({1, "GPU"}, BlockHash::from_int(51)) !=
                nullptr);
    }

    // A session that stops taking never grows the queue past its bound: the
    // oldest batches go, counted lost, and the next batch says so.
    void queueIsBounded() {
        test::HttpServer server;
        server.set("/kv_cache_events", json_reply("[]"));
        server.push("/kv_cache_events",
                    json_reply("[" + stored(0, 1) + "," + stored(1, 2) + "," + stored(2, 3) + "," +
                               stored(3, 4) + "," + stored(4, 5) + "]"));
        TrtllmSourceOptions options;
        options.url = server.url("/kv_cache_events");
        options.interval = 10ms;
        options.max_queued = 2;
        TrtllmEventSource source(options);
        const auto until = std::chrono::steady_clock::now() + 5s;
        while (source.counts().events < 5 && std::chrono::steady_clock::now() < until) {
            std::this_thread::sleep_for(5ms);
        }
        QCOMPARE(source.counts().lost, std::int64_t{3});
        const std::vector<SourceBatch> taken = source.take();
        QCOMPARE(taken.size(), std::size_t{2});
        QCOMPARE(taken[0].batch.sequence, std::uint64_t{3});
        QVERIFY(taken[1].after_loss); // the newest, pushed after the drops
    }

    void failuresAreReasons() {
        test::HttpServer server;
        server.set("/down", {404, "no such route", false});
        server.set("/garbage", json_reply("<html>not json</html>"));
        const std::string refused = test::HttpServer::refused_url();
        AttachOptions options;
        QCOMPARE(add_trtllm_sources({server.url("/down"), server.url("/garbage"), refused}, 0.02,
                                    options),
                 std::string());
        AttachSession session(options, nullptr);
        QVERIFY(poll_until(session, [&] {
            return session.sources()[0]->last_error().find("HTTP 404") != std::string::npos &&
                   session.sources()[1]->counts().decode_errors > 0 &&
                   !session.sources()[2]->last_error().empty();
        }));
        QVERIFY2(session.sources()[2]->last_error().find(refused) != std::string::npos,
                 session.sources()[2]->last_error().c_str());
        QCOMPARE(session.state().source(0)->blocks.size(), std::size_t{0});
    }
};

QTEST_GUILESS_MAIN(TestTrtllmEventSource)
#include "tst_trtllm_event_source.moc"
