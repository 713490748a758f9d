// `kvscope attach` as a user runs it: against a publisher this test hosts on
// loopback (vLLM's wire protocol), with --record, then `kvscope stats` on the
// recording; --metrics against a loopback HTTP server serving a page
// prometheus_client wrote; Ctrl-C ends it cleanly; bad command lines get
// exit 2 and a message that says what to fix.
#include "engine/gguf/gguf_file.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/support/http_server.h"
#include "tests/support/kv_event_publisher.h"
#include "tests/support/metrics_pages.h"
#include "tests/support/run_process.h"
#include "tests/support/tiny_model.h"

#include <csignal>
#include <fstream>
#include <sstream>

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QTest>

using namespace kvscope;
using namespace std::chrono_literals;
using test::kv_event_payload;
using test::KvEventPublisher;
using test::PublishedRemoved;
using test::PublishedStored;
using test::run_process;

namespace {

const QString kCli = QStringLiteral(KVSCOPE_CLI_PATH);

QStringList attach_args(const KvEventPublisher& publisher) {
    return {"attach",   QString::fromStdString(publisher.endpoint),
            "--replay", QString::fromStdString(publisher.replay_endpoint),
            "--topic",  "kv-events"};
}

} // namespace

class TestCliAttach : public QObject {
    Q_OBJECT

    zmq::context_t context_;
    QTemporaryDir dir_;

private slots:
    void attachRecordsAndStatsReadsIt() {
        const tokenizer::Tokenizer tokenizer =
            tokenizer::Tokenizer::from_gguf(gguf::GgufFile::open(tiny_model_path()));
        const std::vector<tokenizer::TokenId> hello = tokenizer.encode("Hello world, hi", false);
        QVERIFY(hello.size() >= 4);
        const std::int64_t block_size = 2;
        std::vector<std::int64_t> tokens(hello.begin(), hello.begin() + 2 * block_size);

        KvEventPublisher publisher(context_);
        const QString recording = dir_.filePath("attach.sqlite");
        QProcess attach;
        attach.start(kCli, attach_args(publisher) + QStringList{"--duration", "2.5", "--record",
                                                                recording, "--num-blocks", "100",
                                                                "--tokenizer", tiny_model_path()});
        QVERIFY(attach.waitForStarted(10'000));
        QVERIFY2(publisher.wait_for_subscriber({}, 20000ms), "kvscope attach never subscribed");
        QVERIFY(publisher.publish(
            0, kv_event_payload({PublishedStored{{0xA1, 0xA2}, std::nullopt, tokens, block_size},
                                 PublishedStored{{0xB1}, std::nullopt, {9, 9}, block_size}})));
        QVERIFY(publisher.publish(1, kv_event_payload({PublishedRemoved{{0xB1}}}), /*drop=*/true));
        QVERIFY(publisher.publish(2, kv_event_payload({PublishedStored{{0xA3}, 0xA2, {7, 7}, 2}})));
        QVERIFY(attach.waitForFinished(15'000));
        const QString out = QString::fromUtf8(attach.readAllStandardOutput());
        const QString err = QString::fromUtf8(attach.readAllStandardError());
        QVERIFY2(attach.exitCode() == 0, qPrintable(err));
        QVERIFY2(
            out.contains(QString("source 0  %1").arg(QString::fromStdString(publisher.endpoint))),
            qPrintable(out));
        QVERIFY2(out.contains("gaps 1 (replayed 1, lost 0)"), qPrintable(out));
        QVERIFY2(out.contains("rank 0 GPU: 3 resident blocks of 100 (3.0%) in 1 prefix tree"),
                 qPrintable(out));
        // The tree's first block as text, through the tokenizer given.
        const QString first_block = QString::fromStdString(tokenizer.decode(
            std::vector<tokenizer::TokenId>(hello.begin(), hello.begin() + block_size)));
        QVERIFY2(out.contains("3 blocks, depth    3: \"" + first_block + "\""), qPrintable(out));
        QVERIFY2(out.contains("do not tell physical block ids"), qPrintable(out));
        QVERIFY2(err.contains("recorded"), qPrintable(err));

        const test::ProcessResult stats = run_process(kCli, {"stats", recording});
        QVERIFY2(stats.exit_code == 0, qPrintable(stats.err));
        QVERIFY2(stats.out.contains("attached source 0"), qPrintable(stats.out));
        QVERIFY2(stats.out.contains("rank 0 GPU      3 blocks resident at the end, peak 3"),
                 qPrintable(stats.out));
        const test::ProcessResult json = run_process(kCli, {"stats", "--json", recording});
        QVERIFY2(json.exit_code == 0, qPrintable(json.err));
        const QJsonObject source =
            QJsonDocument::fromJson(json.out.toUtf8()).object()["attached"].toArray()[0].toObject();
        QCOMPARE(source["blocks_stored"].toInt(), 4);
        QCOMPARE(source["blocks_removed"].toInt(), 1);
        QCOMPARE(source["lost"].toInt(), 0);

        // A recording in the way is refused unless --force.
        const test::ProcessResult again = run_process(
            kCli, attach_args(publisher) + QStringList{"--duration", "0.1", "--record", recording});
        QCOMPARE(again.exit_code, 1);
        QVERIFY2(again.err.contains(recording), qPrintable(again.err));
    }

    void metricsGiveUsageHitRateAndCapacity() {
        test::HttpServer server;
        server.set("/metrics", {200, kvscope::test::metrics_page()});
        KvEventPublisher publisher(context_);
        const QString url = QString::fromStdString(server.url("/metrics"));
        const QString recording = dir_.filePath("metrics.sqlite");
        QProcess attach;
        attach.start(kCli, attach_args(publisher) + QStringList{"--duration", "1.5", "--metrics",
                                                                url, "--metrics-interval", "0.2",
                                                                "--record", recording});
        QVERIFY(attach.waitForStarted(10'000));
        QVERIFY2(publisher.wait_for_subscriber({}, 5000ms), "kvscope attach never subscribed");
        QVERIFY(publisher.publish(0, kv_event_payload({PublishedStored{{1, 2}, std::nullopt}})));
        QVERIFY(attach.waitForFinished(15'000));
        const QString out = QString::fromUtf8(attach.readAllStandardOutput());
        QVERIFY2(attach.exitCode() == 0, qPrintable(attach.readAllStandardError()));
        QVERIFY2(out.contains("metrics " + url + ": "), qPrintable(out));
        QVERIFY2(out.contains(" polls, 0 failed"), qPrintable(out));
        QVERIFY2(out.contains("KV usage 25.0%; prefix cache hit rate 40.0% (400 of 1000 tokens "
                              "since the engine started); 0 preemptions; capacity 27215 blocks "
                              "of 16 tokens"),
                 qPrintable(out));
        // No --num-blocks: the capacity is vllm:cache_config_info's.
        QVERIFY2(out.contains("rank 0 GPU: 2 resident blocks of 27215 (0.0%)"), qPrintable(out));

        // stats reads the metrics and the capacity back from the recording.
        const test::ProcessResult stats = run_process(kCli, {"stats", recording});
        QVERIFY2(stats.exit_code == 0, qPrintable(stats.err));
        QVERIFY2(stats.out.contains("KV usage 25.0%, prefix cache hit rate 40.0%, 0 preemptions"),
                 qPrintable(stats.out));
        QVERIFY2(stats.out.contains("peak 2 of 27215 (0.0%)"), qPrintable(stats.out));
    }

    void failingMetricsAreReportedAndTheAttachGoesOn() {
        KvEventPublisher publisher(context_);
        const QString url = QString::fromStdString(test::HttpServer::refused_url());
        QProcess attach;
        attach.start(kCli, attach_args(publisher) +
                               QStringList{"--duration", "1.6", "--metrics", url, "--json"});
        QVERIFY(attach.waitForStarted(10'000));
        QVERIFY(publisher.wait_for_subscriber({}, 5000ms));
        QVERIFY(publisher.publish(0, kv_event_payload({PublishedStored{{5}, std::nullopt}})));
        QVERIFY(attach.waitForFinished(15'000));
        QCOMPARE(attach.exitCode(), 0);
        const QString err = QString::fromUtf8(attach.readAllStandardError());
        QVERIFY2(err.contains("metrics " + url + " failing: "), qPrintable(err));
        const QJsonObject source = QJsonDocument::fromJson(attach.readAllStandardOutput())
                                       .object()["sources"]
                                       .toArray()[0]
                                       .toObject();
        QCOMPARE(source["blocks_stored"].toInt(), 1);
        const QJsonObject metrics = source["stream"].toObject()["metrics"].toObject();
        QVERIFY(metrics["failures"].toInt() >= 1);
        QVERIFY(metrics["failing"].toBool());
        QVERIFY(!metrics["last_error"].toString().isEmpty());
    }

    void ctrlCEndsItCleanly() {
        KvEventPublisher publisher(context_);
        const QString recording = dir_.filePath("interrupted.sqlite");
        QProcess attach;
        attach.start(kCli, attach_args(publisher) + QStringList{"--record", recording, "--json"});
        QVERIFY(attach.waitForStarted(10'000));
        QVERIFY(publisher.wait_for_subscriber({}, 5000ms));
        QVERIFY(publisher.publish(0, kv_event_payload({PublishedStored{{1, 2}, std::nullopt}})));
        QTest::qWait(300);
        ::kill(static_cast<pid_t>(attach.processId()), SIGINT);
        QVERIFY(attach.waitForFinished(10'000));
        QCOMPARE(attach.exitCode(), 0);
        const QJsonObject summary =
            QJsonDocument::fromJson(attach.readAllStandardOutput()).object();
        const QJsonObject source = summary["sources"].toArray()[0].toObject();
        QCOMPARE(source["blocks_stored"].toInt(), 2);
        const test::ProcessResult stats = run_process(kCli, {"stats", "--json", recording});
        QCOMPARE(stats.exit_code, 0);
        QCOMPARE(QJsonDocument::fromJson(stats.out.toUtf8())
                     .object()["attached"]
                     .toArray()[0]
                     .toObject()["blocks_stored"]
                     .toInt(),
                 2);
    }

    void nothingHeardSaysWhy() {
        const test::ProcessResult result =
            run_process(kCli, {"attach", "127.0.0.1:1", "--duration", "0.3"});
        QCOMPARE(result.exit_code, 0);
        QVERIFY2(result.out.contains("source 0  tcp://127.0.0.1:1"), qPrintable(result.out));
        QVERIFY2(result.out.contains("nothing received"), qPrintable(result.out));
    }

    void progressIsALinePerUpdateInALog() {
        // stderr is a pipe here, as `2>log` makes it: one status line a
        // second, each ended, none rewritten in place; --quiet prints none.
        const test::ProcessResult log =
            run_process(kCli, {"attach", "127.0.0.1:1", "--duration", "2.5"});
        QCOMPARE(log.exit_code, 0);
        QVERIFY2(!log.err.contains('\r'), qPrintable(log.err));
        int status_lines = 0;
        for (const QString& line : log.err.split('\n')) {
            status_lines += line.contains(" s: 0 events, 0 blocks resident") ? 1 : 0;
        }
        QVERIFY2(status_lines >= 2, qPrintable(log.err));
        const test::ProcessResult quiet =
            run_process(kCli, {"attach", "127.0.0.1:1", "--duration", "1.5", "--quiet"});
        QCOMPARE(quiet.exit_code, 0);
        QVERIFY2(!quiet.err.contains(" s: 0 events"), qPrintable(quiet.err));
        QVERIFY(quiet.out.contains("nothing received")); // the results still
    }

    void badCommandLines_data() {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<QString>("message");
        QTest::newRow("no endpoint")
            << QStringList{"attach"} << "give a publisher's ENDPOINT, or a TensorRT-LLM server";
        QTest::newRow("replay without endpoints")
            << QStringList{"attach", "--trtllm", "h:8000", "--replay", "h:5558"}
            << "--replay needs the publishers' ENDPOINTs";
        QTest::newRow("trtllm scheme") << QStringList{"attach", "--trtllm", "ftp://h:8000"}
                                       << "TensorRT-LLM URL 'ftp://h:8000'";
        QTest::newRow("replay count") << QStringList{"attach", "a:1", "b:2", "--replay", "c:3"}
                                      << "one replay endpoint per publisher";
        QTest::newRow("bad endpoint")
            << QStringList{"attach", "tcp://"} << "cannot attach to 'tcp://'";
        QTest::newRow("missing tokenizer")
            << QStringList{"attach", "a:1", "--tokenizer", "/no/such/file.gguf"}
            << "/no/such/file.gguf";
        QTest::newRow("not a tokenizer")
            << QStringList{"attach", "a:1", "--tokenizer", KVSCOPE_SOURCE_DIR "/README.md"}
            << "cannot read a tokenizer from";
        QTest::newRow("zero blocks")
            << QStringList{"attach", "a:1", "--num-blocks", "0"} << "--num-blocks";
        QTest::newRow("metrics count")
            << QStringList{"attach", "a:1", "b:2", "--metrics", "http://a:8000/metrics"}
            << "one metrics URL per publisher";
        QTest::newRow("metrics scheme")
            << QStringList{"attach", "a:1", "--metrics", "ftp://a:8000"}
            << "'ftp://a:8000' is neither an http:// or https:// URL nor HOST:PORT";
    }
    void badCommandLines() {
        QFETCH(QStringList, args);
        QFETCH(QString, message);
        const test::ProcessResult result = run_process(kCli, args);
        QCOMPARE(result.exit_code, 2);
        QVERIFY2(result.err.contains(message), qPrintable(result.err));
    }
};

QTEST_GUILESS_MAIN(TestCliAttach)
#include "tst_cli_attach.moc"
