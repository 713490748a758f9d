// `kvscope simulate` from the outside: the head of Mooncake's conversation
// trace replayed as JSON (the hit ratio three ways, agreeing with each
// other's definitions), a capacity given in blocks, tokens or bytes meaning
// the same cache, cache policies compared, a cluster behind a router, the
// same decisions as kvscope run on the same requests, and
// bad input (capacity, trace line, cost model) answered
// with a reason and a non-zero exit, never a crash.
#include "engine/model_path.h"
#include "tests/support/run_process.h"
#include "tests/support/sqlite_query.h"
#include "tests/support/tiny_model.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>
#include <vector>

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QTest>
#include <QXmlStreamReader>

using kvscope::test::run_process;

namespace {

const QString kCli = QStringLiteral(KVSCOPE_CLI_PATH);
const QString kTrace =
    QStringLiteral(KVSCOPE_SOURCE_DIR "/tests/engine/data/mooncake_conversation_head300.jsonl");

QJsonObject simulate_json(const QStringList& extra) {
    const auto result = run_process(kCli, QStringList{"simulate", kTrace, "--json"} + extra);
    if (result.exit_code != 0) {
        qWarning("%s", qPrintable(result.err));
        return {};
    }
    return QJsonDocument::fromJson(result.out.toUtf8()).object();
}

} // namespace

class TestCliSimulate : public QObject {
    Q_OBJECT

    QTemporaryDir dir_;

private slots:
    void replaysTheTraceHead() {
        const QJsonObject r = simulate_json({"--capacity", "20000"});
        QCOMPARE(r["requests"].toInt(), 300);
        QCOMPARE(r["finished"].toInt() + r["rejected"].toInt(), 300);
        const QJsonObject hit = r["hit_ratio"].toObject();
        QVERIFY(hit["tokens"].toDouble() > 0);
        QCOMPARE(hit["tokens"].toDouble(),
                 r["hit_tokens"].toDouble() / r["prompt_tokens"].toDouble());
        QVERIFY(hit["blocks"].toDouble() > 0 && hit["request_mean"].toDouble() > 0);
        QVERIFY(r["ttft_s"].toObject()["p50"].toDouble() > 0);
        QVERIFY(r["cost_model"].toObject()["source"].toString().contains("not measured"));

        // The same cache given in tokens and in bytes (16 tokens of 131,072 B a
        // block by default), and a part of a block left out.
        const QJsonObject tokens = simulate_json({"--capacity", "320000t"});
        QCOMPARE(tokens["capacity_blocks"].toInt(), 20000);
        QCOMPARE(tokens["hit_tokens"].toDouble(), r["hit_tokens"].toDouble());
        const QJsonObject bytes =
            simulate_json({"--capacity", QString::number(20000LL * 16 * 131072 + 5) + "B"});
        QCOMPARE(bytes["capacity_blocks"].toInt(), 20000);
        const QJsonObject gib = simulate_json({"--capacity", "1GiB", "--bytes-per-token", "1024"});
        QCOMPARE(gib["capacity_blocks"].toInt(), 65536); // 2^30 / (16 x 1024)
        const QJsonObject gb = simulate_json({"--capacity", "1GB", "--bytes-per-token", "1024"});
        QCOMPARE(gb["capacity_blocks"].toInt(), 65536); // CLI11's sizes: 1024-based
        // A first-N replay and a cost model from a file.
        const QString model = dir_.filePath("model.json");
        std::ofstream(model.toStdString())
            << R"({"step_s": 0.001, "prefill_token_s": 1e-6, "decode_sequence_s": 1e-5,
                  "kv_token_read_s": 0, "source": "a test GPU"})";
        const QJsonObject first =
            simulate_json({"--capacity", "20000", "--max-requests", "50", "--cost-model", model});
        QCOMPARE(first["requests"].toInt(), 50);
        QCOMPARE(first["cost_model"].toObject()["source"].toString(), QString("a test GPU"));
    }

    // --record writes a recording like any other run's: stats reads it back
    // with the same requests and prefix hits the replay reported.
    void recordsTheReplay() {
        const QString recording = dir_.filePath("sim.sqlite");
        const QJsonObject r =
            simulate_json({"--capacity", "20000", "--max-requests", "30", "--record", recording});
        QCOMPARE(r["requests"].toInt(), 30);
        const auto stats = run_process(kCli, {"stats", "--json", recording});
        QCOMPARE(stats.exit_code, 0);
        const QJsonObject s = QJsonDocument::fromJson(stats.out.toUtf8()).object();
        QCOMPARE(s["requests"].toInt(), 30);
        QCOMPARE(s["finished"].toInt(), r["finished"].toInt());
        QCOMPARE(s["prompt_tokens"].toDouble(), r["prompt_tokens"].toDouble());
        QCOMPARE(s["prefix_hit_tokens"].toDouble(), r["hit_tokens"].toDouble());
        QCOMPARE(s["preemptions"].toInt(), r["preemptions"].toInt());
        QCOMPARE(s["total_blocks"].toInt(), 20000);
        // Arrivals recorded at the trace's times: the same time to first token.
        const double stats_p50 = s["ttft_ms"].toObject()["p50"].toDouble() / 1000;
        const double simulate_p50 = r["ttft_s"].toObject()["p50"].toDouble();
        QVERIFY2(std::abs(stats_p50 - simulate_p50) < 1e-3,
                 qPrintable(QString("%1 vs %2").arg(stats_p50).arg(simulate_p50)));
        // Not over an existing file.
        const auto again =
            run_process(kCli, {"simulate", kTrace, "--capacity", "100", "--record", recording});
        QVERIFY(again.exit_code != 0);
        QVERIFY(again.err.contains("exists"));

        // Two configurations recorded, compared: a cache too small for the
        // conversations' prefixes against the one above.
        const QString small = dir_.filePath("sim-small.sqlite");
        QCOMPARE(run_process(kCli, {"simulate", kTrace, "--capacity", "1200", "--max-requests",
                                    "30", "--cache-policy", "lfu", "--record", small})
                     .exit_code,
                 0);
        // Replayed time is simulated, so the verdict is the same on any
        // machine: the small cache finds fewer prefix tokens and its requests
        // wait longer for their first token, which fails the comparison.
        const auto compared = run_process(kCli, {"compare", "--json", recording, small});
        QVERIFY2(compared.exit_code == 1, qPrintable(compared.err + compared.out.left(400)));
        const QJsonObject c = QJsonDocument::fromJson(compared.out.toUtf8()).object();
        QVERIFY2(c["regressed"].toBool(), qPrintable(compared.out.left(400)));
        QJsonObject ttft, hits;
        for (const QJsonValue metric : c["metrics"].toArray()) {
            const QString name = metric.toObject()["metric"].toString();
            if (name == "time to first token") {
                ttft = metric.toObject();
            } else if (name == "prefix hit tokens") {
                hits = metric.toObject();
            }
        }
        QCOMPARE(ttft["verdict"].toString(), QString("REGRESSED"));
        QVERIFY2(hits["new"].toDouble() < hits["base"].toDouble(), qPrintable(compared.out));
    }

    // simulate and run drive the same KV manager and scheduler, so on the
    // same requests, all arriving at once, at the same capacity and limits,
    // they must take the same decisions: per request the prefix hits, the
    // tokens computed and the preemptions, per step the tokens scheduled,
    // and the same block events. Only time differs (the cost model's against
    // the CPU's). A request the model ended early (end of text) asks
    // simulate for exactly the tokens it generated. Seen failing with
    // simulate's preemption victim forced to the largest request.
    void agreesWithARunOfTheSameRequests() {
        const QString trace = dir_.filePath("agree.jsonl");
        const QString run_file = dir_.filePath("agree-run.sqlite");
        const QString sim_file = dir_.filePath("agree-sim.sqlite");
        std::mt19937 random(5);
        const auto token = [&] {
            return static_cast<int>(random() % 197) + 3;
        };
        std::vector<int> shared(48);
        std::generate(shared.begin(), shared.end(), token);
        std::vector<std::vector<int>> prompts;
        for (int i = 0; i < 12; ++i) {
            std::vector<int> ids(shared.begin(), shared.begin() + (i % 3 != 0 ? 48 : 20));
            const int own = 5 + static_cast<int>(random() % 35);
            for (int t = 0; t < own; ++t) {
                ids.push_back(token());
            }
            prompts.push_back(ids);
        }
        const auto write_trace = [&](const std::vector<std::int64_t>& max_tokens) {
            std::ofstream out(trace.toStdString());
            for (std::size_t i = 0; i < prompts.size(); ++i) {
                QJsonArray ids;
                for (const int id : prompts[i]) {
                    ids.append(id);
                }
                out << QJsonDocument(QJsonObject{{"arrival", 0},
                                                 {"prompt_ids", ids},
                                                 {"max_tokens", qint64(max_tokens[i])}})
                           .toJson(QJsonDocument::Compact)
                           .toStdString()
                    << "\n";
            }
        };
        write_trace(std::vector<std::int64_t>(prompts.size(), 24));
        const QStringList limits = {"--max-num-seqs", "8", "--max-num-batched-tokens", "64"};
        const auto run =
            run_process(kCli, QStringList{"record", "--model", tiny_model_path(), "--workload",
                                          trace, "--all-at-once", "--num-gpu-blocks-override", "24",
                                          "--out", run_file} +
                                  limits);
        QVERIFY2(run.exit_code == 0, qPrintable(run.err));
        std::vector<std::int64_t> generated;
        for (std::size_t i = 0; i < prompts.size(); ++i) {
            const std::string sql =
                "SELECT generated_tokens FROM KVSCOPE_REQUESTS WHERE request = " +
                std::to_string(i);
            generated.push_back(kvscope::test::query_int(run_file.toStdString(), sql.c_str()));
            QVERIFY(generated.back() > 0);
        }
        write_trace(generated);
        const auto sim =
            run_process(kCli, QStringList{"simulate", trace, "--model", tiny_model_path(),
                                          "--capacity", "24", "--record", sim_file} +
                                  limits);
        QVERIFY2(sim.exit_code == 0, qPrintable(sim.err));

        const auto rows = [](const QString& file, const char* sql) {
            return kvscope::test::query_text(file.toStdString(), sql).value_or("(no answer)");
        };
        const char* requests =
            "SELECT group_concat(x, ' ') FROM (SELECT request || ':' || prompt_tokens || ',' || "
            "cached_tokens || ',' || computed_tokens || ',' || generated_tokens || ',' || "
            "preemptions || ',' || blocks_hit || ',' || blocks_missed AS x "
            "FROM KVSCOPE_REQUESTS ORDER BY request)";
        const char* steps =
            "SELECT group_concat(x, ' ') FROM (SELECT step || ':' || scheduled_tokens || ',' || "
            "sequences || ',' || prefill_tokens || ',' || decode_tokens AS x "
            "FROM KVSCOPE_STEPS ORDER BY step)";
        const char* blocks =
            "SELECT group_concat(x, ' ') FROM (SELECT kind || ':' || count(*) AS x "
            "FROM KVSCOPE_BLOCK_EVENTS GROUP BY kind ORDER BY kind)";
        QCOMPARE(rows(sim_file, requests), rows(run_file, requests));
        QCOMPARE(rows(sim_file, steps), rows(run_file, steps));
        QCOMPARE(rows(sim_file, blocks), rows(run_file, blocks));
        // The workload reaches both: prefix hits and preemptions.
        const std::string run_path = run_file.toStdString();
        QVERIFY(kvscope::test::query_int(run_path,
                                         "SELECT sum(cached_tokens) FROM KVSCOPE_REQUESTS") > 0);
        QVERIFY(kvscope::test::query_int(run_path,
                                         "SELECT sum(preemptions) FROM KVSCOPE_REQUESTS") > 0);
    }

    // --sweep: ten capacities halving down from the one given, replayed on
    // threads of their own, each point what a replay at that capacity alone
    // gives; --plot draws them as SVG, a line per hit definition.
    void sweepsCapacities() {
        const QString plot = dir_.filePath("sweep.svg");
        const QJsonObject sweep = simulate_json(
            {"--capacity", "20000", "--sweep", "--max-requests", "60", "--plot", plot});
        const QJsonArray points = sweep["points"].toArray();
        QCOMPARE(points.size(), 10);
        for (int i = 0; i < 10; ++i) {
            QCOMPARE(points[i].toObject()["capacity_blocks"].toInt(), 20000 >> (9 - i));
        }
        const QJsonObject alone = simulate_json({"--capacity", "5000", "--max-requests", "60"});
        QCOMPARE(points[7].toObject()["capacity_blocks"].toInt(), 5000);
        QCOMPARE(points[7].toObject()["hit_tokens"].toDouble(), alone["hit_tokens"].toDouble());
        QCOMPARE(points[7].toObject()["ttft_s"].toObject()["p99"].toDouble(),
                 alone["ttft_s"].toObject()["p99"].toDouble());

        // Points where every request was rejected have no ratio to draw.
        qsizetype drawn = 0;
        for (const QJsonValue point : points) {
            drawn += point.toObject()["finished"].toInt() > 0 ? 1 : 0;
        }
        QVERIFY(drawn >= 8);
        QFile file(plot);
        QVERIFY(file.open(QIODevice::ReadOnly));
        QXmlStreamReader xml(&file);
        int lines = 0;
        while (!xml.atEnd()) {
            if (xml.readNext() == QXmlStreamReader::StartElement && xml.name() == u"polyline") {
                ++lines;
                QCOMPARE(xml.attributes().value("points").trimmed().split(u' ').size(), drawn);
            }
        }
        QVERIFY2(!xml.hasError(), qPrintable(xml.errorString()));
        QCOMPARE(lines, 3);

        // Several capacities given: each replayed, in the order given.
        const QJsonObject two = simulate_json({"--capacity", "1000,300t", "--max-requests", "20"});
        QCOMPARE(two["points"].toArray().size(), 2);
        QCOMPARE(two["points"].toArray()[1].toObject()["capacity_blocks"].toInt(), 18);
        // A plot needs a sweep; a recording, one capacity.
        QCOMPARE(
            run_process(kCli, {"simulate", kTrace, "--capacity", "100", "--plot", plot}).exit_code,
            2);
        QCOMPARE(run_process(kCli, {"simulate", kTrace, "--capacity", "100", "--sweep", "--record",
                                    dir_.filePath("x.sqlite")})
                     .exit_code,
                 2);
    }

    // --policy lru,lfu: each policy at each capacity, policies in the order
    // given, one plot with two lines (by tokens, by blocks) per policy.
    void comparesCachePolicies() {
        const QString plot = dir_.filePath("policies.svg");
        const QJsonObject both = simulate_json({"--capacity", "2000,500", "--policy", "lru,lfu",
                                                "--max-requests", "120", "--plot", plot});
        const QJsonArray points = both["points"].toArray();
        QCOMPARE(points.size(), 4);
        QCOMPARE(points[0].toObject()["cache_policy"].toString(), QString("lru"));
        QCOMPARE(points[3].toObject()["cache_policy"].toString(), QString("lfu"));
        QCOMPARE(points[3].toObject()["capacity_blocks"].toInt(), 500);
        const QJsonObject lfu =
            simulate_json({"--capacity", "500", "--cache-policy", "lfu", "--max-requests", "120"});
        QCOMPARE(lfu["cache_policy"].toString(), QString("lfu"));
        QCOMPARE(lfu["hit_tokens"].toDouble(), points[3].toObject()["hit_tokens"].toDouble());
        QFile file(plot);
        QVERIFY(file.open(QIODevice::ReadOnly));
        const QByteArray svg = file.readAll();
        QCOMPARE(svg.count("<polyline"), 4);
        QVERIFY(svg.contains("LFU, by tokens"));
        // The same plot as PNG: the SVG rendered at twice its size.
        const QString png = dir_.filePath("policies.png");
        QCOMPARE(run_process(kCli, {"simulate", kTrace, "--capacity", "2000,500", "--policy",
                                    "lru,lfu", "--max-requests", "120", "--plot", png})
                     .exit_code,
                 0);
        QFile image(png);
        QVERIFY(image.open(QIODevice::ReadOnly));
        const QByteArray head = image.read(24);
        QVERIFY(head.startsWith("\x89PNG\r\n\x1a\n"));
        const auto be32 = [&head](int at) {
            return (static_cast<quint32>(static_cast<quint8>(head[at])) << 24) |
                   (static_cast<quint32>(static_cast<quint8>(head[at + 1])) << 16) |
                   (static_cast<quint32>(static_cast<quint8>(head[at + 2])) << 8) |
                   static_cast<quint32>(static_cast<quint8>(head[at + 3]));
        };
        const qsizetype at = svg.indexOf("width=\"") + 7;
        const int svg_width = svg.mid(at, svg.indexOf('"', at) - at).toInt();
        QVERIFY(svg_width > 0);
        QCOMPARE(be32(16), static_cast<quint32>(2 * svg_width)); // IHDR width
        const auto unwritable =
            run_process(kCli, {"simulate", kTrace, "--capacity", "2000,500", "--max-requests", "10",
                               "--plot", dir_.filePath("no/such/dir.png")});
        QCOMPARE(unwritable.exit_code, 1);
        QVERIFY2(unwritable.err.contains("cannot write"), qPrintable(unwritable.err));
        const auto bad =
            run_process(kCli, {"simulate", kTrace, "--capacity", "100", "--policy", "fifo"});
        QCOMPARE(bad.exit_code, 2);
        QVERIFY2(bad.err.contains("fifo"), qPrintable(bad.err));
    }

    // --nodes: the cluster's counts are its nodes' sums, each node reported;
    // round-robin splits the requests evenly; a recording is refused.
    void replaysACluster() {
        for (const QString router : {"round-robin", "cache-aware"}) {
            const QJsonObject r = simulate_json({"--capacity", "20000", "--nodes", "3", "--router",
                                                 router, "--max-requests", "90"});
            QCOMPARE(r["nodes"].toInt(), 3);
            QCOMPARE(r["router"].toString(), router);
            const QJsonArray nodes = r["per_node"].toArray();
            QCOMPARE(nodes.size(), 3);
            int requests = 0;
            for (const QJsonValue node : nodes) {
                requests += node.toObject()["requests"].toInt();
                if (router == "round-robin") {
                    QCOMPARE(node.toObject()["requests"].toInt(), 30);
                }
            }
            QCOMPARE(requests, 90);
            QCOMPARE(r["requests"].toInt(), 90);
        }
        const auto text = run_process(kCli, {"simulate", kTrace, "--capacity", "20000", "--nodes",
                                             "2", "--max-requests", "20"});
        QCOMPARE(text.exit_code, 0);
        QVERIFY2(text.out.contains("Cluster: 2 nodes, round-robin router") &&
                     text.out.contains("node 1"),
                 qPrintable(text.out));
        const auto recorded = run_process(kCli, {"simulate", kTrace, "--capacity", "100", "--nodes",
                                                 "2", "--record", dir_.filePath("cluster.sqlite")});
        QCOMPARE(recorded.exit_code, 2);
        QVERIFY(recorded.err.contains("--nodes"));
    }

    // kvscope's own traces: text prompts through the model's tokenizer and
    // chat template, as a live run would tokenise them (a shared system
    // prompt is a shared prefix); the format detected or given.
    void replaysKvscopeTraces() {
        const std::string problem = kvscope::model_path_problem(kvscope::resolve_model_path());
        if (!problem.empty()) {
            QSKIP(qPrintable("text prompts need the model's tokenizer (run scripts/setup.sh): " +
                             QString::fromStdString(problem)));
        }
        const QString trace = dir_.filePath("chat.jsonl");
        QFile file(trace);
        QVERIFY(file.open(QIODevice::WriteOnly));
        for (int i = 0; i < 4; ++i) {
            const QJsonObject request{
                {"arrival", i * 60},
                {"chat", true},
                {"system", "You are a careful assistant who answers questions about caches, "
                           "memory and the performance of language model inference in plain "
                           "words."},
                {"prompt", QString("Question number %1 about paging?").arg(i)},
                {"max_tokens", 4}};
            file.write(QJsonDocument(request).toJson(QJsonDocument::Compact) + "\n");
        }
        file.close();
        const auto result = run_process(
            kCli, {"simulate", trace, "--capacity", "1000", "--format", "kvscope", "--json"});
        QVERIFY2(result.exit_code == 0, qPrintable(result.err));
        const QJsonObject r = QJsonDocument::fromJson(result.out.toUtf8()).object();
        QCOMPARE(r["requests"].toInt(), 4);
        // Three later requests each hit the system prompt's whole blocks.
        QVERIFY(r["hit_tokens"].toInt() >= 3 * 16);
        QCOMPARE(r["hit_tokens"].toInt() % 16, 0);
        const auto automatic =
            run_process(kCli, {"simulate", trace, "--capacity", "1000", "--json"});
        QCOMPARE(QJsonDocument::fromJson(automatic.out.toUtf8()).object()["hit_tokens"].toInt(),
                 r["hit_tokens"].toInt());
        // The same file read as Mooncake's: its lines lack Mooncake's fields.
        const auto wrong =
            run_process(kCli, {"simulate", trace, "--capacity", "1000", "--format", "mooncake"});
        QCOMPARE(wrong.exit_code, 1);
        QVERIFY2(wrong.err.contains("chat.jsonl:1: "), qPrintable(wrong.err));
    }

    // --calibrate times the model's steps here (the tiny random model, on the
    // CPU) and replays under the fitted cost model; --save-cost-model writes
    // it as --cost-model reads it: the same replay again.
    void calibratesTheCostModel() {
        const QString saved = dir_.filePath("measured.json");
        const auto measured =
            run_process(kCli, {"simulate", kTrace, "--capacity", "20000", "--max-requests", "40",
                               "--json", "--calibrate", "--model", tiny_model_path(), "--backend",
                               "cpu", "--save-cost-model", saved});
        QVERIFY2(measured.exit_code == 0, qPrintable(measured.err));
        const QJsonObject r = QJsonDocument::fromJson(measured.out.toUtf8()).object();
        const QJsonObject cost = r["cost_model"].toObject();
        QVERIFY(cost["source"].toString().startsWith("measured"));
        QVERIFY(cost["step_s"].toDouble() + cost["prefill_token_s"].toDouble() > 0);
        // The tiny model's K/V bytes a token, not Llama-3-8B's.
        QVERIFY(r["capacity_bytes"].toDouble() < 20000.0 * 16 * 131072);
        const QJsonObject again =
            simulate_json({"--capacity", "20000", "--max-requests", "40", "--cost-model", saved});
        QCOMPARE(again["ttft_s"].toObject()["p99"].toDouble(),
                 r["ttft_s"].toObject()["p99"].toDouble());
        QCOMPARE(again["hit_tokens"].toInt(), r["hit_tokens"].toInt());
        // Saving needs a measurement; measured or read from a file, not both.
        QCOMPARE(
            run_process(kCli, {"simulate", kTrace, "--capacity", "100", "--save-cost-model", saved})
                .exit_code,
            2);
        QCOMPARE(run_process(kCli, {"simulate", kTrace, "--capacity", "100", "--calibrate",
                                    "--cost-model", saved})
                     .exit_code,
                 2);
    }

    void badInputSaysWhy() {
        for (const QString bad : {"lots", "0", "0.5", "20000000000", "8XB", "-5"}) {
            const auto result = run_process(kCli, {"simulate", kTrace, "--capacity", bad});
            QVERIFY2(result.exit_code == 2, qPrintable(bad));
            QVERIFY2(result.err.contains("--capacity '" + bad + "' is not a KV capacity"),
                     qPrintable(result.err));
        }
        auto result = run_process(kCli, {"simulate", kTrace, "--capacity", "lots"});
        const QString bad = dir_.filePath("bad.jsonl");
        std::ofstream(bad.toStdString())
            << R"({"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [1]})"
            << "\n{\"timestamp\": 1, \"input_length\": 10}\n";
        result = run_process(kCli, {"simulate", bad, "--capacity", "100"});
        QCOMPARE(result.exit_code, 1);
        QVERIFY2(result.err.contains("bad.jsonl:2: \"output_length\""), qPrintable(result.err));
        // A line out of time order is a warning, in a sweep too.
        const QString unsorted = dir_.filePath("unsorted.jsonl");
        std::ofstream(unsorted.toStdString())
            << R"({"timestamp": 50, "input_length": 10, "output_length": 1, "hash_ids": [1]})"
            << "\n"
            << R"({"timestamp": 10, "input_length": 10, "output_length": 1, "hash_ids": [2]})"
            << "\n";
        result = run_process(kCli, {"simulate", unsorted, "--capacity", "100,50"});
        QCOMPARE(result.exit_code, 0);
        QVERIFY2(result.err.contains("1 trace lines were warned about"), qPrintable(result.err));
        result = run_process(kCli, {"simulate", unsorted, "--capacity", "100"});
        QVERIFY2(result.err.contains("unsorted.jsonl:2: timestamp earlier"),
                 qPrintable(result.err));
        const QString model = dir_.filePath("broken.json");
        std::ofstream(model.toStdString()) << R"({"step_s": 1})";
        result =
            run_process(kCli, {"simulate", kTrace, "--capacity", "100", "--cost-model", model});
        QCOMPARE(result.exit_code, 1);
        QVERIFY(result.err.contains("prefill_token_s"));
        result = run_process(kCli, {"simulate", dir_.filePath("missing.jsonl"), "--capacity", "1"});
        QVERIFY(result.exit_code != 0);
    }
};

QTEST_GUILESS_MAIN(TestCliSimulate)
#include "tst_cli_simulate.moc"
