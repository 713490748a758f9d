// Engine metrics end to end over loopback HTTP (tests/support/http_server.h
// serving pages prometheus_client wrote): the poller's samples arrive, an
// AttachSession turns them into AttachedMetric rows, the recording's view
// shows them and the capacity comes from vllm:cache_config_info; a URL that
// refuses connections, answers 404 or answers garbage is a counted error
// with a clear reason, and the attach goes on.
#include "profiler/attach/attach_session.h"
#include "profiler/recording/event_rows.h"
#include "profiler/recording/recorder.h"
#include "profiler/recording/sqlite_util.h"
#include "tests/support/http_server.h"
#include "tests/support/kv_event_publisher.h"
#include "tests/support/metrics_pages.h"
#include "tests/support/sanitized_build.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include <QTemporaryDir>
#include <QTest>

using namespace kvscope;
using namespace kvscope::attach;
using namespace std::chrono_literals;
using test::HttpServer;
using test::kv_event_payload;
using test::KvEventPublisher;
using test::PublishedStored;

namespace {

template <class Done>
bool wait_until(Done done, std::chrono::milliseconds timeout = 5s) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!done()) {
        if (std::chrono::steady_clock::now() > deadline) {
            return false;
        }
        std::this_thread::sleep_for(10ms);
    }
    return true;
}

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

} // namespace

class TestMetricsPoller : public QObject {
    Q_OBJECT

    zmq::context_t context_;

private slots:
    void pollsAndCountsFailuresWithReasons() {
        HttpServer server;
        server.set("/metrics", {200, kvscope::test::metrics_page("vllm.prom")});
        server.set("/garbage", {0, std::string("\x01\x02\xff not HTTP at all\r\n\r\n"), true});
        server.set("/html", {200, "<html><body>Not metrics</body></html>\n"});
        MetricsPollerOptions options;
        options.urls = {server.url("/metrics"), HttpServer::refused_url(), server.url("/missing"),
                        server.url("/garbage"), server.url("/html")};
        options.interval = 30ms;
        MetricsPoller poller(options);
        QVERIFY(wait_until([&] {
            for (const MetricsEndpointStatus& s : poller.status()) {
                if (s.polls < 2) {
                    return false;
                }
            }
            return true;
        }));
        const std::vector<MetricsEndpointStatus> status = poller.status();
        for (const MetricsEndpointStatus& s : status) {
            qInfo("%s: %s", s.url.c_str(), s.last_error.empty() ? "ok" : s.last_error.c_str());
        }
        QCOMPARE(status[0].failures, std::int64_t{0});
        QVERIFY(!status[0].failing);
        for (std::size_t i = 1; i < status.size(); ++i) {
            QVERIFY(status[i].failing);
            QCOMPARE(status[i].failures, status[i].polls);
        }
        QVERIFY2(contains(status[1].last_error, "onnect"), status[1].last_error.c_str());
        QCOMPARE(status[2].last_error, std::string("HTTP 404"));
        QVERIFY2(!status[3].last_error.empty(), status[3].last_error.c_str());
        QVERIFY2(status[4].last_error.starts_with("not Prometheus text (line 1: "),
                 status[4].last_error.c_str());

        const std::vector<MetricsScrape> scrapes = poller.take();
        QVERIFY(scrapes.size() >= 2);
        for (const MetricsScrape& scrape : scrapes) {
            QCOMPARE(scrape.source, std::int64_t{0}); // only the page that worked
            QCOMPARE(scrape.samples.size(), std::size_t{5});
        }
    }

    void sessionRecordsMetricsAndTakesCapacityFromThem() {
        QTemporaryDir dir;
        const std::string path = dir.filePath("metrics.sqlite").toStdString();
        HttpServer server;
        server.set("/metrics", {200, kvscope::test::metrics_page("vllm.prom")});
        KvEventPublisher publisher(context_);
        AttachOptions options;
        KvEventSourceOptions source;
        source.endpoint = publisher.endpoint;
        source.topic = publisher.topic;
        options.sources = {source};
        options.metrics_urls = {server.url("/metrics")};
        options.metrics_interval = 40ms;
        options.status_interval = 50ms;
        auto recorder = std::make_unique<profiler::Recorder>(
            path, std::map<std::string, std::string>{{"recorded_by", "test"}});
        AttachSession session(options, recorder.get());
        QVERIFY(publisher.wait_for_subscriber([&] { session.poll(1ms); }));
        QVERIFY(publisher.publish(0, kv_event_payload({PublishedStored{{1, 2}, std::nullopt}})));
        QVERIFY(wait_until([&] {
            session.poll(5ms);
            const AttachedState::Source* s = session.state().source(0);
            return s != nullptr && s->blocks.size() == 2 && !s->metrics.empty() &&
                   !session.metrics_status().empty() && session.metrics_status()[0].polls >= 2;
        }));
        session.poll(5ms);
        session.emit_status();
        const AttachedState::Source& live = *session.state().source(0);
        QCOMPARE(live.info.num_blocks, std::int64_t{0}); // not given
        QCOMPARE(live.capacity_blocks(), std::int64_t{27215});
        const MetricsSummary m = summarize_metrics(live.metrics);
        QCOMPARE(*m.kv_usage, 0.25);
        QCOMPARE(*m.prefix_hit_rate, 0.4);
        const auto counts = nlohmann::json::parse(live.status.counts);
        QVERIFY(counts.at("metrics").at("polls").get<std::int64_t>() >= 2);
        QCOMPARE(counts.at("metrics").at("failures").get<std::int64_t>(), std::int64_t{0});
        recorder->close();

        const profiler::ReadOnlyRecording recording(path);
        {
            profiler::EventRows rows(recording.db(), path);
            events::EngineEvent event;
            AttachedState replayed;
            while (rows.next(event)) {
                replayed.apply(event);
            }
            QCOMPARE(replayed.source(0)->capacity_blocks(), std::int64_t{27215});
            QCOMPARE(replayed.source(0)->bad_rows, std::int64_t{0});
            QCOMPARE(replayed.source(0)->metrics.size(), live.metrics.size());
        }
        profiler::Statement metrics(recording.db(),
                                    "SELECT source, value, json_extract(labels, '$.model_name'), "
                                    "count(*) FROM KVSCOPE_ATTACHED_METRICS WHERE name = "
                                    "'vllm:kv_cache_usage_perc'");
        QVERIFY(metrics.next());
        QCOMPARE(metrics.int64(0), std::int64_t{0});
        QCOMPARE(metrics.real(1), 0.25);
        QCOMPARE(metrics.text(2), std::string("Qwen/Qwen3-0.6B \"chat\"\\v1"));
        QVERIFY(metrics.int64(3) >= 2);
        profiler::Statement config(
            recording.db(), "SELECT json_extract(labels, '$.num_gpu_blocks'), value FROM "
                            "KVSCOPE_ATTACHED_METRICS WHERE name = 'vllm:cache_config_info'");
        QVERIFY(config.next());
        QCOMPARE(config.text(0), std::string("27215"));
        QCOMPARE(config.real(1), 1.0);
        // A poll's samples share one time, so queries can group them.
        profiler::Statement polls(recording.db(),
                                  "SELECT count(*) FROM (SELECT t_ns FROM KVSCOPE_ATTACHED_METRICS "
                                  "GROUP BY t_ns HAVING count(*) = 5)");
        QVERIFY(polls.next());
        QVERIFY(polls.int64(0) >= 2);
        profiler::Statement url(recording.db(), "SELECT metrics_url FROM KVSCOPE_SOURCES");
        QVERIFY(url.next());
        QCOMPARE(url.text(0), server.url("/metrics"));
    }

    void failingMetricsDoNotStopTheAttach() {
        KvEventPublisher publisher(context_);
        AttachOptions options;
        KvEventSourceOptions source;
        source.endpoint = publisher.endpoint;
        source.topic = publisher.topic;
        options.sources = {source};
        options.metrics_urls = {HttpServer::refused_url()};
        options.metrics_interval = 20ms;
        AttachSession session(options, nullptr);
        QVERIFY(publisher.wait_for_subscriber([&] { session.poll(1ms); }));
        QVERIFY(publisher.publish(0, kv_event_payload({PublishedStored{{7}, std::nullopt}})));
        QVERIFY(wait_until([&] {
            session.poll(5ms);
            const AttachedState::Source* s = session.state().source(0);
            return s != nullptr && s->blocks.size() == 1 &&
                   session.metrics_status()[0].failures >= 2;
        }));
        QVERIFY(session.metrics_status()[0].failing);
        QVERIFY(session.state().source(0)->metrics.empty());
        QCOMPARE(session.state().source(0)->capacity_blocks(), std::int64_t{0});
    }

    void metricsUrlsMustBeOnePerSource() {
        AttachOptions options;
        KvEventSourceOptions source;
        source.endpoint = "tcp://127.0.0.1:1";
        options.sources = {source, source};
        options.metrics_urls = {"http://127.0.0.1:1/metrics"};
        try {
            AttachSession session(options, nullptr);
            QFAIL("one metrics URL for two publishers was accepted");
        } catch (const std::invalid_argument& error) {
            QVERIFY2(contains(error.what(), "one metrics URL per publisher"), error.what());
        }
    }

    void httpTimeoutsAndLimitsAreReasons() {
        // A server that takes the connection and never answers.
        const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t length = sizeof addr;
        QVERIFY(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
        QVERIFY(::listen(fd, 4) == 0);
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length);
        HttpGetOptions options;
        options.total_timeout = 200ms;
        HttpClient client(options);
        const auto start = std::chrono::steady_clock::now();
        const HttpResponse hung =
            client.get("http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port)) + "/metrics");
        ::close(fd);
        QVERIFY(std::chrono::steady_clock::now() - start < 2s * kvscope::test::kSlowdown);
        QVERIFY2(contains(hung.error, "timed out"), hung.error.c_str());
        QVERIFY(hung.body.empty());

        HttpServer server;
        server.set("/big", {200, std::string(4096, 'x')});
        server.set("/metrics", {200, "x 1\n"});
        options.max_body = 1024;
        HttpClient small(options);
        const HttpResponse big = small.get(server.url("/big"));
        QCOMPARE(big.error, std::string("the reply is larger than 1024 bytes"));
        QVERIFY(big.body.empty());
        // The same client goes on after a failure.
        const HttpResponse fine = small.get(server.url("/metrics"));
        QVERIFY2(fine.ok(), fine.error.c_str());
        QCOMPARE(fine.status, 200L);
        QCOMPARE(fine.body, std::string("x 1\n"));
        QVERIFY2(!small.get("ftp://127.0.0.1/metrics").ok(), "ftp was fetched");
        QVERIFY2(!small.get("not a url").ok(), "a non-URL was fetched");
    }

    void stopsPromptlyWhileAServerHangs() {
        // A server that takes the connection and never answers.
        const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t length = sizeof addr;
        QVERIFY(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
        QVERIFY(::listen(fd, 4) == 0); // never accepted: the kernel completes the handshake
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length);
        MetricsPollerOptions options;
        options.urls = {"http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port)) + "/metrics"};
        options.http.total_timeout = 30s;
        const auto start = std::chrono::steady_clock::now();
        {
            MetricsPoller poller(options);
            std::this_thread::sleep_for(100ms);
        }
        const auto took = std::chrono::steady_clock::now() - start;
        ::close(fd);
        QVERIFY2(took < 3s, std::to_string(std::chrono::duration<double>(took).count()).c_str());
    }
};

QTEST_GUILESS_MAIN(TestMetricsPoller)
#include "tst_metrics_poller.moc"
