// The kvscope command's contract: help, version, exit statuses and messages
// for bad command lines, and `info` in text and JSON.
#include "engine/gpu_devices.h"
#include "engine/model_path.h"
#include "tests/support/run_process.h"
#include "tests/support/sanitized_build.h"
#include "tests/support/tiny_model.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <sqlite3.h>
#include <vector>

#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>

using kvscope::test::run_process;

namespace {

// Writes `text` to `path`; false when it cannot.
bool write_file(const QString& path, const QByteArray& text) {
    QFile file(path);
    return file.open(QIODevice::WriteOnly) && file.write(text) == text.size();
}

} // namespace

#define SKIP_WITHOUT_MODEL()                                                                       \
    if (const std::string problem = kvscope::model_path_problem(kvscope::resolve_model_path());    \
        !problem.empty()) {                                                                        \
        QSKIP(qPrintable("needs the model (run scripts/setup.sh): " +                              \
                         QString::fromStdString(problem)));                                        \
    }

class TestCli : public QObject {
    Q_OBJECT

private slots:
    void exit_status_and_message_data();
    void exit_status_and_message();
    void info_json_reports_build_and_model();
    void info_json_honours_kvscope_model();
    void info_states_the_cuda_verification_of_the_repository();
    void generate_streams_text_and_reports_speed();
    void generate_is_repeatable_with_a_seed();
    void generate_drafts_speculatively_data();
    void generate_drafts_speculatively();
    void generate_reports_a_rejected_prompt();
    void generate_reports_an_invalid_model_file();
    void bench_prints_json_rows();
    void eval_lossy_formats_rank_and_text_matches_json();
    void eval_ranks_formats();
    void run_serves_a_trace_and_reports_prefix_hits();
    void run_rejects_a_malformed_trace_with_its_line();
    void run_sizes_the_cache_data();
    void run_sizes_the_cache();
    void run_counts_a_rejected_prompt_as_never_run();
    void run_progress_in_a_log_is_a_line_each();
    void run_per_request_shows_each_output();
    void record_then_stats();
    void compare_gates_a_slower_run_data();
    void compare_gates_a_slower_run();
    void gate_records_two_builds_in_rounds();
    void gate_runs_two_builds_in_step();
    void gate_stops_its_record_when_stopped_data();
    void gate_stops_its_record_when_stopped();
    void gate_stops_the_round_when_a_record_fails();
    void export_writes_a_chrome_trace();

private:
    QTemporaryDir gate_dir_;
    QString gate_base_; // compare_gates_a_slower_run's recording, made once
};

void TestCli::exit_status_and_message_data() {
    QTest::addColumn<QStringList>("arguments");
    QTest::addColumn<int>("exit_code");
    QTest::addColumn<QString>("expected_text"); // in stdout or stderr

    QTest::newRow("help") << QStringList{"--help"} << 0 << "info";
    QTest::newRow("short help") << QStringList{"-h"} << 0 << "Usage";
    QTest::newRow("version") << QStringList{"--version"} << 0 << "kvscope 0.";
    QTest::newRow("subcommand help") << QStringList{"info", "--help"} << 0 << "--json";
    QTest::newRow("no subcommand") << QStringList{} << 2 << "a subcommand is required";
    QTest::newRow("unknown subcommand")
        << QStringList{"frobnicate"} << 2 << "unknown subcommand 'frobnicate'";
    QTest::newRow("unknown option") << QStringList{"--frobnicate"} << 2 << "--frobnicate";
    QTest::newRow("unknown subcommand option")
        << QStringList{"info", "--frobnicate"} << 2 << "--frobnicate";
    QTest::newRow("stray argument") << QStringList{"info", "extra"} << 2 << "extra";
    QTest::newRow("info") << QStringList{"info"} << 0 << "Model";
    QTest::newRow("generate without prompt") << QStringList{"generate"} << 2 << "--prompt";
    QTest::newRow("generate bad top-p")
        << QStringList{"generate", "-p", "hi", "--top-p", "2"} << 2 << "--top-p";
    QTest::newRow("generate missing model file")
        << QStringList{"generate", "-p", "hi", "-m", "/no/such/model.gguf"} << 2 << "model.gguf";
    QTest::newRow("bench bad batch") << QStringList{"bench", "-b", "0"} << 2 << "--batch";
    QTest::newRow("bad cache type")
        << QStringList{"bench", "--cache-type-k", "q3"} << 2 << "unknown KV format 'q3'";
    QTest::newRow("eviction without budget")
        << QStringList{"eval", "--eviction", "h2o"} << 2 << "--kv-budget";
    QTest::newRow("unknown eviction")
        << QStringList{"eval", "--eviction", "lru"} << 2 << "--eviction";
    QTest::newRow("unknown eval text") << QStringList{"eval", "--text", "nope"} << 2 << "nope";
    QTest::newRow("unknown workload")
        << QStringList{"run", "--workload", "nope"} << 1 << "not a preset";
    QTest::newRow("record without --out") << QStringList{"record"} << 2 << "--out";
    QTest::newRow("bad victim") << QStringList{"run", "--preemption-victim", "random"} << 2
                                << "--preemption-victim";
    QTest::newRow("two cache sizes")
        << QStringList{"run", "--num-gpu-blocks-override", "64", "--cache-tokens", "1024"} << 2
        << "one way";
    QTest::newRow("utilization above 1")
        << QStringList{"run", "--gpu-memory-utilization", "1.5"} << 2 << "--gpu-memory-utilization";
    QTest::newRow("bad memory size")
        << QStringList{"run", "--kv-cache-memory-bytes", "lots"} << 2 << "--kv-cache-memory-bytes";
    QTest::newRow("unknown backend") << QStringList{"run", "--backend", "tpu"} << 2 << "--backend";
}

void TestCli::exit_status_and_message() {
    QFETCH(QStringList, arguments);
    QFETCH(int, exit_code);
    QFETCH(QString, expected_text);

    const auto result = run_process(KVSCOPE_CLI_PATH, arguments);
    QVERIFY2(result.started, qPrintable(result.err));
    QVERIFY(result.finished);
    QCOMPARE(result.exit_code, exit_code);
    const QString printed = result.out + result.err;
    QVERIFY2(printed.contains(expected_text),
             qPrintable("expected '" + expected_text + "' in:\n" + printed));
    if (exit_code == 2) {
        // Usage errors go to stderr, so scripts piping stdout see nothing odd.
        QVERIFY2(result.err.contains(expected_text), qPrintable(result.err));
    }
}

void TestCli::info_json_reports_build_and_model() {
    const auto result = run_process(KVSCOPE_CLI_PATH, {"info", "--json"});
    QCOMPARE(result.exit_code, 0);
    QJsonParseError error{};
    const QJsonDocument document = QJsonDocument::fromJson(result.out.toUtf8(), &error);
    QVERIFY2(error.error == QJsonParseError::NoError, qPrintable(error.errorString()));
    const QJsonObject info = document.object();
    QVERIFY(info.value("version").toString().startsWith("0."));
    QVERIFY(info.contains("cuda_compiled"));
    QVERIFY(info.value("gpus").isArray());
    QVERIFY(!info.value("sqlite_version").toString().isEmpty());
    QVERIFY(info.value("model").toObject().value("path").toString().endsWith(".gguf"));
}

void TestCli::info_json_honours_kvscope_model() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const QString missing = dir.filePath("no-such-model.gguf");
    QProcessEnvironment environment = QProcessEnvironment::systemEnvironment();
    environment.insert("KVSCOPE_MODEL", missing);

    const auto result = run_process(KVSCOPE_CLI_PATH, {"info", "--json"}, environment);
    QCOMPARE(result.exit_code, 0); // a missing model is reported, not a failure
    const QJsonObject model =
        QJsonDocument::fromJson(result.out.toUtf8()).object().value("model").toObject();
    QCOMPARE(model.value("path").toString(), missing);
    QCOMPARE(model.value("from_KVSCOPE_MODEL").toBool(), true);
    QCOMPARE(model.value("available").toBool(), false);
    QVERIFY(model.value("problem").toString().contains("not found"));
}

// bench/results/gpu-verification.json is the one source of the claim; info
// must carry exactly what it says, in JSON and as a line of text.
void TestCli::info_states_the_cuda_verification_of_the_repository() {
    QFile file(KVSCOPE_SOURCE_DIR "/bench/results/gpu-verification.json");
    QVERIFY2(file.open(QIODevice::ReadOnly), qPrintable(file.fileName()));
    const QJsonObject source = QJsonDocument::fromJson(file.readAll()).object();
    QVERIFY(source.value("verified_on_gpu").isBool());
    const bool verified = source.value("verified_on_gpu").toBool();

    const auto json_run = run_process(KVSCOPE_CLI_PATH, {"info", "--json"});
    QCOMPARE(json_run.exit_code, 0);
    const QJsonObject reported = QJsonDocument::fromJson(json_run.out.toUtf8())
                                     .object()
                                     .value("cuda_verification")
                                     .toObject();
    QCOMPARE(reported.value("verified_on_gpu").toBool(!verified), verified);
    QString expected_status = "not yet on GPU hardware (compiled and CPU-checked only)";
    if (verified) {
        for (const char* key : {"date", "device", "results"}) {
            QVERIFY2(!source.value(key).toString().isEmpty(), key);
            QCOMPARE(reported.value(key).toString(), source.value(key).toString());
        }
        expected_status = source.value("date").toString() + " on " +
                          source.value("device").toString() + " (" +
                          source.value("results").toString() + ")";
        // Code written since the check, which the claim must not cover.
        const QString not_yet = source.value("not_yet_on_gpu").toString();
        QCOMPARE(reported.value("not_yet_on_gpu").toString(), not_yet);
        if (!not_yet.isEmpty()) {
            expected_status += "; not yet on a GPU: " + not_yet;
        }
    } else {
        for (const char* key : {"date", "device", "results"}) {
            QCOMPARE(reported.value(key).toString("absent"), QString());
        }
    }
    QCOMPARE(reported.value("status").toString(), expected_status);

    const auto text_run = run_process(KVSCOPE_CLI_PATH, {"info"});
    QCOMPARE(text_run.exit_code, 0);
    QVERIFY2(text_run.out.contains("  CUDA verified: " + expected_status + "\n"),
             qPrintable(text_run.out));
}

void TestCli::generate_streams_text_and_reports_speed() {
    SKIP_WITHOUT_MODEL();
    const auto result = run_process(KVSCOPE_CLI_PATH, {"generate", "--chat", "-p", "What is 2+2?",
                                                       "-n", "12", "--temperature", "0"});
    QVERIFY2(result.exit_code == 0, qPrintable(result.err));
    QVERIFY2(!result.out.trimmed().isEmpty(), "no text generated");
    QVERIFY2(result.err.contains("prefill") && result.err.contains("decode") &&
                 result.err.contains("tokens/s"),
             qPrintable(result.err));
}

void TestCli::generate_is_repeatable_with_a_seed() {
    SKIP_WITHOUT_MODEL();
    const QStringList arguments{"generate", "-p", "Once upon a time", "-n", "16", "--seed", "42"};
    const auto first = run_process(KVSCOPE_CLI_PATH, arguments);
    const auto second = run_process(KVSCOPE_CLI_PATH, arguments);
    QCOMPARE(first.exit_code, 0);
    QCOMPARE(first.out, second.out);
    QVERIFY(first.err.contains("seed: 42"));
}

void TestCli::generate_drafts_speculatively_data() {
    QTest::addColumn<QStringList>("options");
    QTest::addColumn<QString>("method");
    QTest::newRow("prompt lookup") << QStringList{"--speculative", "ngram:4"} << "ngram:4";
    QTest::newRow("self-draft") << QStringList{"--draft-layers", "16"} << "draft:4";
}

void TestCli::generate_drafts_speculatively() {
    SKIP_WITHOUT_MODEL();
    QFETCH(QStringList, options);
    QFETCH(QString, method);
    // Greedy speculative decoding keeps exactly the target's tokens: the
    // same text as without drafts, and the drafts counted beside the speed.
    // On the CPU, whose kernels give a row the same sums however many rows
    // a pass has (a GPU's GEMMs may round a verifying pass differently).
    const QStringList arguments{"generate",
                                "--chat",
                                "-p",
                                "Write the numbers from 1 to 20, separated by commas.",
                                "-n",
                                "40",
                                "--temperature",
                                "0",
                                "--backend",
                                "cpu"};
    const auto plain = run_process(KVSCOPE_CLI_PATH, arguments);
    QVERIFY2(plain.exit_code == 0, qPrintable(plain.err));
    QVERIFY(!plain.err.contains("speculation:"));
    const auto drafted = run_process(KVSCOPE_CLI_PATH, arguments + options);
    QVERIFY2(drafted.exit_code == 0, qPrintable(drafted.err));
    QCOMPARE(drafted.out, plain.out);
    const QRegularExpression line("speculation: " + QRegularExpression::escape(method) +
                                  "[^:]*: (\\d+) tokens drafted, (\\d+) kept");
    const QRegularExpressionMatch match = line.match(drafted.err);
    QVERIFY2(match.hasMatch(), qPrintable(drafted.err));
    QVERIFY(match.captured(1).toInt() > 0);
    QVERIFY(match.captured(2).toInt() <= match.captured(1).toInt());
    QVERIFY(drafted.err.contains("decode") && drafted.err.contains("tokens/s"));
}

void TestCli::generate_reports_a_rejected_prompt() {
    SKIP_WITHOUT_MODEL();
    const auto result =
        run_process(KVSCOPE_CLI_PATH, {"generate", "-p", "Once upon a time there was",
                                       "--max-model-len", "4", "-n", "3"});
    QCOMPARE(result.exit_code, 1);
    QVERIFY2(result.err.contains("rejected the prompt") && result.err.contains("--max-model-len"),
             qPrintable(result.err));
}

void TestCli::generate_reports_an_invalid_model_file() {
    QTemporaryDir dir;
    const QString path = dir.filePath("not-a-model.gguf");
    QVERIFY(write_file(path, "this is not a GGUF file at all"));
    const auto result = run_process(KVSCOPE_CLI_PATH, {"generate", "-p", "hi", "-m", path});
    QCOMPARE(result.exit_code, 1);
    QVERIFY2(result.err.contains("not a GGUF file") && result.err.contains(path),
             qPrintable(result.err));
}

void TestCli::bench_prints_json_rows() {
    SKIP_WITHOUT_MODEL();
    const auto result = run_process(
        KVSCOPE_CLI_PATH, {"bench", "-b", "1,2", "-c", "8", "--decode-steps", "2", "--json"});
    QVERIFY2(result.exit_code == 0, qPrintable(result.err));
    const QJsonArray rows = QJsonDocument::fromJson(result.out.toUtf8()).array();
    QCOMPARE(rows.size(), 2);
    for (const QJsonValue& row : rows) {
        QVERIFY(row.toObject().value("decode_tokens_per_second").toDouble() > 0);
        QVERIFY(row.toObject().value("prefill_tokens_per_second").toDouble() > 0);
    }
    QCOMPARE(rows[1].toObject().value("batch").toInt(), 2);
}

namespace {
QJsonObject last_json_line(const QString& out) {
    const QStringList lines = out.trimmed().split('\n');
    return QJsonDocument::fromJson(lines.last().toUtf8()).object();
}
} // namespace

void TestCli::eval_lossy_formats_rank_and_text_matches_json() {
    SKIP_WITHOUT_MODEL();
    // 160 tokens (96 under a sanitizer, which slows the model five-fold).
    const int tokens = kvscope::test::full_or_sanitized(160, 96);
    const QStringList common{"eval",
                             "--text",
                             "alice-in-wonderland-ch1",
                             "-n",
                             QString::number(tokens),
                             "--prompt-tokens",
                             "64"};
    const auto eval = [&](const QString& format, bool json) {
        return run_process(KVSCOPE_CLI_PATH,
                           common +
                               QStringList{"--cache-type-k", format, "--cache-type-v", format} +
                               (json ? QStringList{"--json"} : QStringList{}));
    };
    std::map<QString, QJsonObject> r;
    for (const QString format : {"f16", "q8_0", "q4_0"}) {
        const auto result = eval(format, true);
        QVERIFY2(result.exit_code == 0, qPrintable(result.err));
        r[format] = last_json_line(result.out);
        qInfo("%s: KL mean %.3g, p99 %.3g, top-1 %.4f, ppl %.3f (reference %.3f)",
              qPrintable(format), r[format].value("kl_mean").toDouble(),
              r[format].value("kl_p99").toDouble(), r[format].value("top1_agreement").toDouble(),
              r[format].value("ppl").toDouble(), r[format].value("ppl_reference").toDouble());
    }
    const auto value = [&](const QString& format, const char* key) {
        return r[format].value(key).toDouble();
    };

    // `tokens` tokens: one next-token prediction scored for each but the last.
    for (const QString format : {"f16", "q8_0", "q4_0"}) {
        QCOMPARE(r[format].value("tokens").toInt(), tokens);
        QCOMPARE(r[format].value("positions").toInt(), tokens - 1);
        // top-1 agreement is a count of positions over those scored.
        const double agreeing = value(format, "top1_agreement") * (tokens - 1);
        QVERIFY2(std::abs(agreeing - std::round(agreeing)) < 1e-9, qPrintable(format));
        // The reference is the f32 cache whatever the format under test: the
        // same perplexity every time, and ppl_delta is the difference.
        QCOMPARE(value(format, "ppl_reference"), value("f16", "ppl_reference"));
        QCOMPARE(value(format, "ppl_delta"), value(format, "ppl") - value(format, "ppl_reference"));
    }
    // Bytes per cached token from the model's shape, 30 layers x 3 KV heads x
    // 64 values x 2 (K and V), and each format's bytes per value: f16 2,
    // q8_0 34 per group of 32 (an fp16 scale + 32 int8), q4_0 18 per 32.
    QCOMPARE(value("f16", "bytes_per_token"), 30.0 * 3 * 64 * 2 * 2);
    QCOMPARE(value("f16", "bytes_per_token"), 23040.0);
    QCOMPARE(value("q8_0", "bytes_per_token"), 12240.0);
    QCOMPARE(value("q4_0", "bytes_per_token"), 6480.0);

    // Lossier formats drift further from the reference: f16 is nearly exact
    // but not exactly (rounding to half precision), q8_0 clearly further,
    // q4_0 much further, with visibly worse top-1 agreement and perplexity.
    // (Seen: 8.3e-7, 4.7e-4 and 0.18 nats; top-1 0.994, 0.994, 0.704.)
    QVERIFY(value("f16", "kl_mean") > 0);
    QVERIFY2(value("f16", "kl_mean") * 10 < value("q8_0", "kl_mean"), "f16 must beat q8_0");
    QVERIFY2(value("q8_0", "kl_mean") * 10 < value("q4_0", "kl_mean"), "q8_0 must beat q4_0");
    QVERIFY(value("q4_0", "kl_p99") > value("q8_0", "kl_p99"));
    QVERIFY(value("f16", "top1_agreement") >= 0.98 && value("f16", "top1_agreement") <= 1.0);
    QVERIFY(value("f16", "top1_agreement") >= value("q8_0", "top1_agreement"));
    QVERIFY2(value("q4_0", "top1_agreement") < value("q8_0", "top1_agreement") - 0.05,
             "q4_0 must lose top-1 agreement");
    QVERIFY2(value("q4_0", "ppl_delta") > value("q8_0", "ppl_delta") &&
                 value("q4_0", "ppl_delta") > 0,
             "q4_0 must raise the perplexity");

    // The text table prints the same numbers as --json, to its precision.
    const auto text = eval("q4_0", false);
    QVERIFY2(text.exit_code == 0, qPrintable(text.err));
    QStringList cells;
    for (const QString& line : text.out.split('\n')) {
        if (line.startsWith("alice-in-wonderland-ch1 ")) {
            cells = line.split(' ', Qt::SkipEmptyParts);
        }
    }
    QVERIFY2(cells.size() == 8, qPrintable(text.out));
    const auto printed_as = [&](int column, const char* key, double half_unit, bool relative) {
        const double printed = cells[column].toDouble();
        const double json = value("q4_0", key);
        const double allowed = (relative ? std::abs(json) * half_unit : half_unit) * (1 + 1e-9);
        QVERIFY2(std::abs(printed - json) <= allowed,
                 qPrintable(QString("%1: table %2, JSON %3").arg(key, cells[column]).arg(json)));
    };
    QCOMPARE(cells[1].toInt(), r["q4_0"].value("tokens").toInt());
    printed_as(2, "kl_mean", 5e-3, true);         // %.3g
    printed_as(3, "kl_p99", 5e-3, true);          // %.3g
    printed_as(4, "top1_agreement", 5e-5, false); // %.4f
    printed_as(5, "ppl", 5e-4, false);            // %.3f
    printed_as(6, "ppl_delta", 5e-4, false);      // %+.3f
    printed_as(7, "bytes_per_token", 0.5, false); // %.0f
    QVERIFY2(text.out.contains("K q4_0, V q4_0"), qPrintable(text.out));
}

void TestCli::eval_ranks_formats() {
    SKIP_WITHOUT_MODEL();
    KVSCOPE_LEAVE_OUT_WHEN_SANITIZED("eval_lossy_formats_rank_and_text_matches_json runs eval's "
                                     "path");
    const auto kl = [](const QString& format, const QStringList& extra = {}) {
        const auto result = run_process(
            KVSCOPE_CLI_PATH, QStringList{"eval", "--text", "us-constitution-preamble-art1-3", "-n",
                                          "192", "--prompt-tokens", "96", "--cache-type-k", format,
                                          "--cache-type-v", format, "--json"} +
                                  extra);
        if (result.exit_code != 0) {
            qWarning("%s", qPrintable(result.err));
            return -1.0;
        }
        return last_json_line(result.out).value("kl_mean").toDouble();
    };
    const double q8 = kl("q8_0");
    const double q4 = kl("q4_0");
    const double window = kl("f16", {"--eviction", "window", "--kv-budget", "64"});
    const double streaming = kl("f16", {"--eviction", "streaming", "--kv-budget", "64"});
    qInfo("KL: q8_0 %.3g, q4_0 %.3g, window-64 %.3g, streaming-64 %.3g", q8, q4, window, streaming);
    QVERIFY(q8 >= 0 && q4 >= 0 && window >= 0 && streaming >= 0);
    QVERIFY2(q8 * 10 < q4, "q8_0 must be far better than q4_0");
    QVERIFY2(streaming < window, "attention sinks must help a sliding window");
}

void TestCli::run_serves_a_trace_and_reports_prefix_hits() {
    SKIP_WITHOUT_MODEL();
    QTemporaryDir dir;
    const QString trace = dir.filePath("trace.jsonl");
    // Two requests with one long shared prefix; the second arrives later.
    const QByteArray shared =
        QByteArray("The quick brown fox jumps over the lazy dog. ").repeated(8);
    QByteArray lines = "# a comment line\n";
    lines.append("{\"arrival\": 0, \"prompt\": \"" + shared +
                 "One\", \"max_tokens\": 3, "
                 "\"temperature\": 0}\n");
    lines.append("{\"arrival\": 0.2, \"prompt\": \"" + shared + "Two\", \"max_tokens\": 3}\n");
    lines.append("{\"arrival\": 0.3, \"prompt_ids\": [1, 2, 3], \"max_tokens\": 2}\n");
    QVERIFY(write_file(trace, lines));
    const QString events = dir.filePath("events.jsonl");
    const auto result = run_process(KVSCOPE_CLI_PATH, {"run", "--workload", trace, "--json",
                                                       "--per-request", "--events", events});
    QVERIFY2(result.exit_code == 0, qPrintable(result.err));
    const QJsonObject summary = QJsonDocument::fromJson(result.out.toUtf8()).object();
    QCOMPARE(summary.value("requests").toInt(), 3);
    QCOMPARE(summary.value("finished").toInt(), 3);
    QVERIFY(summary.value("prefix_hit_tokens").toInt() >= 64);
    const QJsonArray requests = summary.value("per_request").toArray();
    QCOMPARE(requests[0].toObject().value("prefix_hit_tokens").toInt(), 0);
    QVERIFY(requests[1].toObject().value("prefix_hit_tokens").toInt() >= 64);
    QCOMPARE(requests[2].toObject().value("generated_tokens").toInt(), 2);
    QFile log(events);
    QVERIFY(log.open(QIODevice::ReadOnly));
    const QByteArray text = log.readAll();
    QVERIFY(text.contains("\"kind\":\"block_shared\""));
    QVERIFY(text.contains("\"kind\":\"request_finished\""));
    // Fields by name (engine/events/typed_events.h), not a/b/c/d.
    QVERIFY(text.contains("\"cached_tokens\":"));
    QVERIFY(text.contains("\"generated_tokens\":3"));
    QVERIFY(!text.contains("\"a\":"));
    // Every event the engine emits, the sampled tokens (with their text)
    // included: 3 + 3 + 2 of them.
    int sampled = 0;
    QMap<int, QMap<int, QString>> pieces; // request -> generated -> piece
    for (const QByteArray& line : text.split('\n')) {
        const QJsonObject event = QJsonDocument::fromJson(line).object();
        if (event.value("kind").toString() == "token_sampled") {
            ++sampled;
            QVERIFY2(event.contains("piece") && event.value("generated").toInt() >= 1,
                     line.constData());
            pieces[event.value("request").toInt()][event.value("generated").toInt()] =
                event.value("piece").toString();
        }
    }
    QCOMPARE(sampled, 8);
    // --per-request has each request's whole output: the pieces the events
    // streamed, in order (two paths: the request's tokens, the events).
    for (const QJsonValue& request : requests) {
        const QJsonObject row = request.toObject();
        const QStringList streamed = pieces.value(row.value("id").toInt()).values();
        QCOMPARE(row.value("output").toString(), streamed.join(QString()));
        QVERIFY(!row.value("output").toString().isEmpty());
    }
}

void TestCli::run_sizes_the_cache_data() {
    QTest::addColumn<QStringList>("arguments");
    QTest::addColumn<int>("blocks");
    // SmolLM2 at f16: 23,040 B a token, 368,640 B a 16-token block.
    QTest::newRow("blocks") << QStringList{"--num-gpu-blocks-override", "40"} << 40;
    QTest::newRow("tokens, the old flag") << QStringList{"--cache-tokens", "1000"} << 63;
    QTest::newRow("bytes with a unit") << QStringList{"--kv-cache-memory-bytes", "23MiB"} << 65;
    QTest::newRow("share of a CPU budget")
        << QStringList{"--gpu-memory-utilization", "0.5", "--cpu-memory-budget", "100MiB"} << 142;
    QTest::newRow("default") << QStringList{} << 512;
}

void TestCli::run_sizes_the_cache() {
    SKIP_WITHOUT_MODEL();
    QFETCH(QStringList, arguments);
    QFETCH(int, blocks);
    const auto result = run_process(
        KVSCOPE_CLI_PATH,
        QStringList{"run", "--requests", "1", "-n", "1", "--all-at-once", "--json"} + arguments);
    QVERIFY2(result.exit_code == 0, qPrintable(result.err));
    const QJsonObject summary = QJsonDocument::fromJson(result.out.toUtf8()).object();
    QCOMPARE(summary.value("total_blocks").toInt(), blocks);
}

void TestCli::run_progress_in_a_log_is_a_line_each() {
    // stderr is a pipe here, as `2>log` makes it: the progress comes a line
    // every 50 steps, ended, never rewritten in place; --quiet leaves it out.
    // The tiny random-weight model: 120 greedy tokens in well under a second.
    QTemporaryDir dir;
    const QString trace = dir.filePath("trace.jsonl");
    QVERIFY(write_file(trace, "{\"prompt_ids\": [1, 2, 3], \"max_tokens\": 120}\n"));
    const QStringList args{
        "run",        "-m",  KVSCOPE_SOURCE_DIR "/tests/engine/data/tiny_llama.gguf",
        "--workload", trace, "--all-at-once"};
    const auto log = run_process(KVSCOPE_CLI_PATH, args);
    QVERIFY2(log.exit_code == 0, qPrintable(log.err));
    QVERIFY2(!log.err.contains('\r'), qPrintable(log.err));
    QVERIFY2(log.err.contains("step 50: 0 of 1 requests done, 1 running\n") &&
                 log.err.contains("step 100: "),
             qPrintable(log.err));
    const auto quiet = run_process(KVSCOPE_CLI_PATH, args + QStringList{"--quiet"});
    QVERIFY2(quiet.exit_code == 0, qPrintable(quiet.err));
    QVERIFY2(!quiet.err.contains("step 50:"), qPrintable(quiet.err));
    QVERIFY(quiet.out.contains("generated"));
}

void TestCli::run_per_request_shows_each_output() {
    SKIP_WITHOUT_MODEL();
    // The table shows each request's output on the line below its row, on one
    // line and cut at 72 characters; --json has it whole.
    QTemporaryDir dir;
    const QString trace = dir.filePath("trace.jsonl");
    QVERIFY(write_file(
        trace, "{\"prompt\": \"Once upon a time, in a quiet forest, there lived a fox who\", "
               "\"max_tokens\": 40, \"temperature\": 0}\n"
               "{\"prompt\": \"Say hi.\", \"max_tokens\": 3, "
               "\"temperature\": 0}\n"));
    const QStringList args{"run", "--workload", trace, "--all-at-once", "--per-request", "--quiet"};
    const auto json = run_process(KVSCOPE_CLI_PATH, args + QStringList{"--json"});
    QVERIFY2(json.exit_code == 0, qPrintable(json.err));
    const QJsonArray requests =
        QJsonDocument::fromJson(json.out.toUtf8()).object().value("per_request").toArray();
    QCOMPARE(requests.size(), 2);
    const auto table = run_process(KVSCOPE_CLI_PATH, args);
    QVERIFY2(table.exit_code == 0, qPrintable(table.err));
    const QStringList lines = table.out.split('\n');
    for (const QJsonValue& request : requests) {
        const QString output = request.toObject().value("output").toString();
        QVERIFY(!output.isEmpty());
        QString shown = output.left(72);
        shown.replace('\n', "\\n").replace('\t', "\\t");
        if (output.size() > 72) {
            shown += "...";
        }
        const QString id = QString::number(request.toObject().value("id").toInt());
        const auto row = std::find_if(lines.begin(), lines.end(), [&](const QString& line) {
            return line.simplified().startsWith(id + " finished ");
        });
        QVERIFY2(row != lines.end() && row + 1 != lines.end(), qPrintable(table.out));
        QCOMPARE(*(row + 1), "       \"" + shown + "\"");
    }
    QVERIFY2(requests[0].toObject().value("output").toString().size() > 72,
             "the long story is meant to be cut");
}

void TestCli::run_counts_a_rejected_prompt_as_never_run() {
    SKIP_WITHOUT_MODEL();
    QTemporaryDir dir;
    const QString trace = dir.filePath("trace.jsonl");
    // A prompt longer than the whole cache, then one of three token ids.
    QVERIFY(write_file(trace, "{\"prompt\": \"" + QByteArray(" apple").repeated(700) +
                                  "\", \"max_tokens\": 2}\n"
                                  "{\"prompt_ids\": [1, 2, 3], \"max_tokens\": 2}\n"));
    const auto result =
        run_process(KVSCOPE_CLI_PATH, {"run", "--workload", trace, "--cache-tokens", "512",
                                       "--all-at-once", "--json", "--per-request"});
    QVERIFY2(result.exit_code == 0, qPrintable(result.err));
    const QJsonObject summary = QJsonDocument::fromJson(result.out.toUtf8()).object();
    QCOMPARE(summary.value("rejected").toInt(), 1);
    const int long_prompt =
        summary.value("per_request").toArray()[0].toObject().value("prompt_tokens").toInt();
    QVERIFY(long_prompt > 512);
    QCOMPARE(summary.value("prompt_tokens").toInt(), long_prompt + 3);
    QCOMPARE(summary.value("prompt_computed_tokens").toInt(), 3); // not long_prompt + 3
    QCOMPARE(summary.value("prompt_not_run_tokens").toInt(), long_prompt);
    const auto text = run_process(
        KVSCOPE_CLI_PATH, {"run", "--workload", trace, "--cache-tokens", "512", "--all-at-once"});
    QVERIFY2(text.out.contains("3 computed, " + QString::number(long_prompt) + " never run"),
             qPrintable(text.out));
}

void TestCli::run_rejects_a_malformed_trace_with_its_line() {
    QTemporaryDir dir;
    const QString trace = dir.filePath("bad.jsonl");
    QVERIFY(
        write_file(trace, "{\"prompt\": \"fine\"}\n\n{\"prompt\": \"x\", \"max_tokens\": -3}\n"));
    const auto result = run_process(KVSCOPE_CLI_PATH, {"run", "--workload", trace});
    QCOMPARE(result.exit_code, 1);
    QVERIFY2(result.err.contains("bad.jsonl:3:") && result.err.contains("max_tokens"),
             qPrintable(result.err));
}

void TestCli::record_then_stats() {
    SKIP_WITHOUT_MODEL();
    QTemporaryDir dir;
    const QString trace = dir.filePath("trace.jsonl");
    const QByteArray shared =
        QByteArray("A paged KV cache stores keys and values in blocks. ").repeated(6);
    QVERIFY(write_file(trace, "{\"prompt\": \"" + shared +
                                  "First.\", \"max_tokens\": 4, \"temperature\": 0}\n" +
                                  "{\"arrival\": 0.3, \"prompt\": \"" + shared +
                                  "Second.\", \"max_tokens\": 4}\n"));
    const QString recording = dir.filePath("run.sqlite");
    // GPU capture asked for: it runs, or (no GPU, a CPU-only build) the run
    // says why and records the rest; never a failure.
    const auto recorded = run_process(KVSCOPE_CLI_PATH, {"record", "--workload", trace, "--out",
                                                         recording, "--gpu-capture", "on"});
    QVERIFY2(recorded.exit_code == 0, qPrintable(recorded.err));
    if (kvscope::query_gpu_devices().devices.empty()) {
        QVERIFY2(recorded.err.contains("GPU capture unavailable: "), qPrintable(recorded.err));
    } else {
        QVERIFY2(recorded.err.contains("GPU capture: CUPTI"), qPrintable(recorded.err));
    }
    const auto again =
        run_process(KVSCOPE_CLI_PATH, {"record", "--workload", trace, "--out", recording});
    QCOMPARE(again.exit_code, 1); // never overwrites without --force
    QVERIFY(again.err.contains("exists"));

    const auto stats = run_process(KVSCOPE_CLI_PATH, {"stats", recording, "--json"});
    QVERIFY2(stats.exit_code == 0, qPrintable(stats.err));
    const QJsonObject s = QJsonDocument::fromJson(stats.out.toUtf8()).object();
    QCOMPARE(s.value("requests").toInt(), 2);
    QCOMPARE(s.value("finished").toInt(), 2);
    QCOMPARE(s.value("generated_tokens").toInt(), 8);
    QVERIFY(s.value("prefix_hit_tokens").toInt() >= 48);
    QVERIFY(s.value("peak_used_blocks").toInt() > 0);
    QCOMPARE(s.value("ttft_ms").toObject().value("count").toInt(), 2);
    QCOMPARE(s.value("run_config").toObject().value("cache_type_k").toString(), QString("f16"));
    QCOMPARE(s.value("kv_formats").toString(), QString("f16"));
    QCOMPARE(s.value("kv_bytes_per_block").toInt(), 16 * 23040); // SmolLM2, f16
    // Time by name: every op of the CPU backend, once per layer per step.
    QStringList ops;
    qint64 attention_instances = 0;
    for (const QJsonValue& op : s.value("cpu_ops").toArray()) {
        ops << op.toObject().value("name").toString();
        if (op.toObject().value("name").toString() == "attention") {
            attention_instances = op.toObject().value("instances").toInteger();
        }
    }
    for (const char* name : {"attn_norm", "qkv", "rope", "kv_write", "attention", "attn_out",
                             "ffn_norm", "gate_up", "down", "lm_head"}) {
        QVERIFY2(ops.contains(name), name);
    }
    QCOMPARE(attention_instances, 30 * s.value("steps").toInteger());
    // What the steps cost: every step counted; cache entries written are the
    // tokens computed, at SmolLM2's f16 bytes a token (30 layers x 3 KV heads
    // x 64 dims x K and V x 2 bytes = 23040), and each step reads at least
    // the entries it computes.
    const QJsonObject costs = s.value("costs").toObject();
    QCOMPARE(costs.value("steps").toInteger(), s.value("steps").toInteger());
    QVERIFY(costs.value("cpu_ms").toDouble() > 0);
    const qint64 computed =
        s.value("prefill_tokens").toInteger() + s.value("decode_tokens").toInteger();
    QCOMPARE(costs.value("kv_bytes_written").toInteger(), computed * 23040);
    QVERIFY(costs.value("kv_entries_read").toInteger() >= computed);
    QCOMPARE(costs.value("kv_bytes_read").toInteger(),
             costs.value("kv_entries_read").toInteger() * 23040);
    QVERIFY(costs.value("instructions").isNull() || costs.value("instructions").toInteger() > 0);
    const auto table = run_process(KVSCOPE_CLI_PATH, {"stats", recording});
    QVERIFY(table.out.contains("CPU op time by name"));
    QVERIFY2(table.out.contains("engine CPU") && table.out.contains("KV traffic"),
             qPrintable(table.out));

    const auto text = run_process(KVSCOPE_CLI_PATH, {"stats", trace});
    QCOMPARE(text.exit_code, 1);
    QVERIFY(text.err.contains("not a kvscope recording"));
}

namespace {

// A copy of a recording whose clock runs `factor` times slower, each
// interval between consecutive events also stretched by its own random
// +-`noise` (fixed seed): samples of one run as a noisier machine would have
// taken them, in the same order. With `interval_ns`, every interval starts
// from that instead of the recorded one: the run's events and structure with
// a clock that does not depend on how busy the machine was when it recorded.
// Empty on success, else what failed.
QString stretched_copy(const QString& from, const QString& to, double factor, double noise,
                       unsigned seed, std::int64_t interval_ns = 0) {
    if (!QFile::copy(from, to)) {
        return "cannot copy " + from;
    }
    sqlite3* db = nullptr;
    if (sqlite3_open(to.toUtf8().constData(), &db) != SQLITE_OK) {
        sqlite3_close(db);
        return "cannot open " + to;
    }
    std::vector<std::pair<sqlite3_int64, sqlite3_int64>> rows; // id, t_ns
    sqlite3_stmt* select = nullptr;
    sqlite3_prepare_v2(db, "SELECT id, t_ns FROM KVSCOPE_EVENTS ORDER BY id", -1, &select, nullptr);
    while (sqlite3_step(select) == SQLITE_ROW) {
        rows.emplace_back(sqlite3_column_int64(select, 0), sqlite3_column_int64(select, 1));
    }
    sqlite3_finalize(select);
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> jitter(-noise, noise);
    sqlite3_exec(db, "BEGIN", nullptr, nullptr, nullptr);
    sqlite3_stmt* update = nullptr;
    sqlite3_prepare_v2(db, "UPDATE KVSCOPE_EVENTS SET t_ns = ? WHERE id = ?", -1, &update, nullptr);
    double t = rows.empty() ? 0.0 : static_cast<double>(rows[0].second);
    for (std::size_t i = 0; i < rows.size(); ++i) {
        if (i > 0) {
            const auto interval = static_cast<double>(
                interval_ns > 0 ? interval_ns : rows[i].second - rows[i - 1].second);
            t += interval * factor * (1.0 + jitter(rng));
        }
        sqlite3_bind_int64(update, 1, static_cast<sqlite3_int64>(t));
        sqlite3_bind_int64(update, 2, rows[i].first);
        sqlite3_step(update);
        sqlite3_reset(update);
    }
    sqlite3_finalize(update);
    const int committed = sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr);
    sqlite3_close(db);
    return committed == SQLITE_OK ? QString() : "cannot write " + to;
}

} // namespace

void TestCli::compare_gates_a_slower_run_data() {
    QTest::addColumn<double>("factor");
    QTest::addColumn<double>("noise");
    QTest::addColumn<int>("exit_code");
    QTest::addColumn<QString>("verdict"); // in the report
    // The gate's logic on known samples, not on this machine's speed: a
    // recording against stretched copies of itself. Timing between real runs
    // belongs in bench/, where a busy machine cannot fail the suite.
    QTest::newRow("itself") << 1.0 << 0.0 << 0 << "no regression";
    QTest::newRow("itself, 5% jitter") << 1.0 << 0.05 << 0 << "no regression";
    QTest::newRow("30% slower, 5% jitter") << 1.3 << 0.05 << 1 << "REGRESSED";
    QTest::newRow("4x slower") << 4.0 << 0.0 << 1 << "REGRESSED";
    QTest::newRow("30% faster, 5% jitter") << 0.7 << 0.05 << 0 << "improved";
}

void TestCli::compare_gates_a_slower_run() {
    SKIP_WITHOUT_MODEL();
    QFETCH(double, factor);
    QFETCH(double, noise);
    QFETCH(int, exit_code);
    QFETCH(QString, verdict);
    if (gate_base_.isEmpty()) { // one real recording serves every row
        const QString trace = gate_dir_.filePath("trace.jsonl");
        QByteArray lines;
        for (int i = 0; i < 8; ++i) {
            lines.append("{\"prompt\": \"Question " + QByteArray::number(i) +
                         ": what is a cache?\", \"max_tokens\": 10, \"temperature\": 0}\n");
        }
        QVERIFY(write_file(trace, lines));
        const QString real = gate_dir_.filePath("real.sqlite");
        const auto recorded = run_process(KVSCOPE_CLI_PATH, {"record", "--workload", trace, "--out",
                                                             real, "--max-num-seqs", "4"});
        QVERIFY2(recorded.exit_code == 0, qPrintable(recorded.err));
        // The real run's events on a calm clock (1 ms +-20% between events):
        // recorded on a loaded machine, its own step times can spread so
        // widely that 20 samples hide a 30% slow-down, which is the machine's
        // doing, not the gate's.
        const QString base = gate_dir_.filePath("base.sqlite");
        const QString problem = stretched_copy(real, base, 1.0, 0.2, 11, 1'000'000);
        QVERIFY2(problem.isEmpty(), qPrintable(problem));
        gate_base_ = base;
    }
    const QString copy = gate_dir_.filePath(
        QString("copy-%1.sqlite").arg(QTest::currentDataTag()).replace(' ', '-'));
    const QString problem = stretched_copy(gate_base_, copy, factor, noise, 7);
    QVERIFY2(problem.isEmpty(), qPrintable(problem));

    const auto text = run_process(KVSCOPE_CLI_PATH, {"compare", gate_base_, copy});
    QCOMPARE(text.exit_code, exit_code);
    QVERIFY2(text.out.contains(verdict), qPrintable(text.out));
    if (exit_code == 1) {
        const auto json = run_process(KVSCOPE_CLI_PATH, {"compare", gate_base_, copy, "--json"});
        const QJsonObject report = QJsonDocument::fromJson(json.out.toUtf8()).object();
        QVERIFY(report.value("regressed").toBool());
        QStringList flagged;
        for (const QJsonValue& m : report.value("metrics").toArray()) {
            if (m.toObject().value("verdict").toString() == "REGRESSED") {
                flagged << m.toObject().value("metric").toString();
            }
        }
        QVERIFY2(flagged.contains("time per output token") || flagged.contains("step time"),
                 qPrintable(json.out));
    }
}

void TestCli::gate_records_two_builds_in_rounds() {
    // The tiny random-weight model: the gate's mechanics, not the model's speed.
    QProcessEnvironment tiny = QProcessEnvironment::systemEnvironment();
    tiny.insert("KVSCOPE_MODEL", tiny_model_path());
    QTemporaryDir dir;
    const QString trace = dir.filePath("trace.jsonl");
    QVERIFY(write_file(trace, "{\"prompt\": \"What is a KV cache?\", \"max_tokens\": 3, "
                              "\"temperature\": 0}\n"
                              "{\"prompt\": \"And a page?\", \"max_tokens\": 3, "
                              "\"temperature\": 0}\n"));
    const QString out = dir.filePath("gate");
    const QStringList record = {"--workload", trace, "--all-at-once", "--threads", "1"};
    // Too few rounds to ever show a regression at the default alpha: refused.
    const auto few = run_process(
        KVSCOPE_CLI_PATH,
        QStringList{"gate", KVSCOPE_CLI_PATH, KVSCOPE_CLI_PATH, "--rounds", "3", "--"} + record,
        tiny);
    QCOMPARE(few.exit_code, 2);
    QVERIFY2(few.err.contains("cannot show a regression"), qPrintable(few.err));

    // The same build on both sides, one run after the other, in seven rounds
    // (the fewest the default alpha allows), thresholds out of reach so no
    // timing's noise decides: bounded 98% intervals, and the same work exactly.
    const auto gate =
        run_process(KVSCOPE_CLI_PATH,
                    QStringList{"gate", KVSCOPE_CLI_PATH, KVSCOPE_CLI_PATH, "--interleave", "runs",
                                "--rounds", "7", "--out", out, "--threshold", "1000",
                                "--robust-threshold", "1000", "--json", "--"} +
                        record,
                    tiny);
    QVERIFY2(gate.exit_code == 0, qPrintable(gate.err + gate.out));
    QVERIFY2(gate.err.contains("round 7/7: base"), qPrintable(gate.err));
    for (const char* file : {"base/round-001.sqlite", "base/round-007.sqlite",
                             "new/round-001.sqlite", "new/round-007.sqlite"}) {
        QVERIFY2(QFile::exists(out + "/" + file), file);
    }
    const QJsonObject report = QJsonDocument::fromJson(gate.out.toUtf8()).object();
    QCOMPARE(report.value("base_runs").toInt(), 7);
    QCOMPARE(report.value("regressed").toBool(), false);
    QStringList seen;
    for (const QJsonValue& value : report.value("metrics").toArray()) {
        const QJsonObject m = value.toObject();
        const QString name = m.value("metric").toString();
        seen << name;
        if (name == "engine CPU time" || name == "engine CPU time, run totals" ||
            name == "step time") {
            // The same workload step by step on every run: CPU time on
            // per-step floors, and on run totals over rounds beside them.
            QCOMPARE(m.value("basis").toString(), name == "engine CPU time"
                                                      ? QStringLiteral("step floors")
                                                      : QStringLiteral("rounds"));
            QCOMPARE(m.value("verdict").toString(), QStringLiteral("same"));
            const QJsonObject interval = m.value("interval").toObject();
            QVERIFY(interval.value("low").toDouble() > 0);
            QVERIFY(interval.value("high").toDouble() >= interval.value("low").toDouble());
            QVERIFY(interval.value("confidence").toDouble() >= 0.98);
        }
        if (name == "engine CPU time") {
            QVERIFY(m.value("noise_robust").toBool());
            QVERIFY(m.value("base").toDouble() > 0);
        }
        if (name == "computed tokens" || name == "KV bytes read") {
            QCOMPARE(m.value("basis").toString(), QStringLiteral("exact"));
            QCOMPARE(m.value("verdict").toString(), QStringLiteral("same"));
            QVERIFY(m.value("base").toDouble() > 0);
        }
    }
    QVERIFY2(seen.contains("instructions") && seen.contains("KV bytes written") &&
                 seen.contains("engine CPU time, run totals"),
             qPrintable(seen.join(", ")));

    // compare reads the folders the gate wrote, as the same rounds.
    const auto text = run_process(KVSCOPE_CLI_PATH,
                                  {"compare", out + "/base", out + "/new", "--threshold", "1000",
                                   "--robust-threshold", "1000"},
                                  tiny);
    QCOMPARE(text.exit_code, 0);
    QVERIFY2(text.out.contains("7 rounds") && text.out.contains("(7 runs)"), qPrintable(text.out));

    // The gate names the recordings itself; a build that fails says where
    // its output went.
    const auto clash = run_process(KVSCOPE_CLI_PATH,
                                   QStringList{"gate", KVSCOPE_CLI_PATH, KVSCOPE_CLI_PATH, "--out",
                                               out, "--", "--out", "x.sqlite"},
                                   tiny);
    QCOMPARE(clash.exit_code, 2);
    QVERIFY2(clash.err.contains("leave --out out"), qPrintable(clash.err));
    const auto failing =
        run_process(KVSCOPE_CLI_PATH,
                    QStringList{"gate", KVSCOPE_CLI_PATH, KVSCOPE_CLI_PATH, "--out", out, "--",
                                "--workload", dir.filePath("missing.jsonl")},
                    tiny);
    QCOMPARE(failing.exit_code, 1);
    QVERIFY2(failing.err.contains("record failed with status 1") &&
                 failing.err.contains("round-001.log"),
             qPrintable(failing.err));
    QVERIFY(QDir(dir.path()).mkdir("empty"));
    const auto empty = run_process(KVSCOPE_CLI_PATH,
                                   {"compare", dir.filePath("empty"), dir.filePath("empty")}, tiny);
    QCOMPARE(empty.exit_code, 1);
    QVERIFY2(empty.err.contains("holds no recordings"), qPrintable(empty.err));
}

namespace {

// Step and end times of a recording's steps, in order.
std::vector<std::pair<qint64, qint64>> step_times(const QString& recording) {
    std::vector<std::pair<qint64, qint64>> steps;
    sqlite3* db = nullptr;
    if (sqlite3_open_v2(recording.toUtf8().constData(), &db, SQLITE_OPEN_READONLY, nullptr) ==
        SQLITE_OK) {
        sqlite3_stmt* query = nullptr;
        if (sqlite3_prepare_v2(db,
                               "SELECT e.t_ns, k.name FROM KVSCOPE_EVENTS e JOIN "
                               "ENUM_KVSCOPE_EVENT_KIND k ON e.kind = k.id WHERE k.name IN "
                               "('step_begin', 'step_end') ORDER BY e.id",
                               -1, &query, nullptr) == SQLITE_OK) {
            while (sqlite3_step(query) == SQLITE_ROW) {
                const qint64 t = sqlite3_column_int64(query, 0);
                const QString kind =
                    QString::fromUtf8(reinterpret_cast<const char*>(sqlite3_column_text(query, 1)));
                if (kind == "step_begin") {
                    steps.emplace_back(t, -1);
                } else if (!steps.empty()) {
                    steps.back().second = t;
                }
            }
        }
        sqlite3_finalize(query);
    }
    sqlite3_close(db);
    return steps;
}

QString meta_value(const QString& recording, const char* key) {
    sqlite3* db = nullptr;
    QString value;
    if (sqlite3_open_v2(recording.toUtf8().constData(), &db, SQLITE_OPEN_READONLY, nullptr) ==
        SQLITE_OK) {
        sqlite3_stmt* query = nullptr;
        if (sqlite3_prepare_v2(db, "SELECT value FROM KVSCOPE_META WHERE key = ?", -1, &query,
                               nullptr) == SQLITE_OK) {
            sqlite3_bind_text(query, 1, key, -1, SQLITE_STATIC);
            if (sqlite3_step(query) == SQLITE_ROW) {
                value =
                    QString::fromUtf8(reinterpret_cast<const char*>(sqlite3_column_text(query, 0)));
            }
        }
        sqlite3_finalize(query);
    }
    sqlite3_close(db);
    return value;
}

} // namespace

void TestCli::gate_runs_two_builds_in_step() {
    // By default the two builds run at once and take the engine's steps in
    // turns: every step of one ends before the other's same step begins, the
    // first build alternating between rounds, and compare judges such rounds
    // on their steps' ratios.
    QProcessEnvironment tiny = QProcessEnvironment::systemEnvironment();
    tiny.insert("KVSCOPE_MODEL", tiny_model_path());
    QTemporaryDir dir;
    const QString out = dir.filePath("gate");
    const QStringList record = {"--requests",
                                "2",
                                "--max-tokens",
                                "6",
                                "--all-at-once",
                                "--threads",
                                "1",
                                "--max-num-batched-tokens",
                                "16"};
    const auto gate = run_process(KVSCOPE_CLI_PATH,
                                  QStringList{"gate", KVSCOPE_CLI_PATH, KVSCOPE_CLI_PATH,
                                              "--rounds", "7", "--out", out, "--threshold", "1000",
                                              "--robust-threshold", "1000", "--json", "--"} +
                                      record,
                                  tiny);
    QVERIFY2(gate.exit_code == 0, qPrintable(gate.err + gate.out));
    QVERIFY2(gate.err.contains("round 7/7: both in step"), qPrintable(gate.err));
    for (const char* round : {"round-001", "round-002"}) {
        const QString base = out + "/base/" + round + ".sqlite";
        const QString now = out + "/new/" + round + ".sqlite";
        QCOMPARE(meta_value(base, "steps_in_turns"), QStringLiteral("yes"));
        QCOMPARE(meta_value(now, "steps_in_turns"), QStringLiteral("yes"));
        // Base first in odd rounds, new first in even ones.
        const bool base_first = QString(round) == "round-001";
        const auto first = step_times(base_first ? base : now);
        const auto second = step_times(base_first ? now : base);
        QVERIFY(first.size() > 3);
        QCOMPARE(first.size(), second.size());
        for (std::size_t i = 0; i < first.size(); ++i) {
            QVERIFY2(first[i].second >= 0 && second[i].second >= 0, "a step without its end");
            QVERIFY2(
                first[i].second <= second[i].first,
                qPrintable(QString("%1 step %2 overlaps the other build's").arg(round).arg(i)));
            if (i + 1 < first.size()) {
                QVERIFY2(second[i].second <= first[i + 1].first,
                         qPrintable(QString("%1 step %2 overlaps the next").arg(round).arg(i)));
            }
        }
    }
    const QJsonObject report = QJsonDocument::fromJson(gate.out.toUtf8()).object();
    QCOMPARE(report.value("base_runs").toInt(), 7);
    bool judged = false;
    for (const QJsonValue& value : report.value("metrics").toArray()) {
        const QJsonObject m = value.toObject();
        if (m.value("metric").toString() == "engine CPU time") {
            QCOMPARE(m.value("basis").toString(), QStringLiteral("steps in step"));
            QCOMPARE(m.value("verdict").toString(), QStringLiteral("same"));
            const QJsonObject interval = m.value("interval").toObject();
            QVERIFY(interval.value("low").toDouble() > 0);
            QVERIFY(interval.value("high").toDouble() >= interval.value("low").toDouble());
            judged = true;
        }
        if (m.value("metric").toString() == "engine CPU time, run totals") {
            QCOMPARE(m.value("basis").toString(), QStringLiteral("rounds"));
        }
        if (m.value("metric").toString() == "time to first token") {
            // Its span holds the other build's steps too.
            QCOMPARE(m.value("verdict").toString(), QStringLiteral("not compared"));
        }
    }
    QVERIFY(judged);

    // The option is the gate's: a record given anything but its socket says so.
    const auto stray = run_process(
        KVSCOPE_CLI_PATH,
        QStringList{"record", "--out", dir.filePath("x.sqlite"), "--step-turns", "99"} + record,
        tiny);
    QCOMPARE(stray.exit_code, 2);
    QVERIFY2(stray.err.contains("not an open socket"), qPrintable(stray.err));
    const auto cpu = run_process(KVSCOPE_CLI_PATH,
                                 QStringList{"gate", KVSCOPE_CLI_PATH, KVSCOPE_CLI_PATH, "--cpu",
                                             "100000", "--out", out, "--"} +
                                     record,
                                 tiny);
    QCOMPARE(cpu.exit_code, 2);
    QVERIFY2(cpu.err.contains("not a CPU this gate may use"), qPrintable(cpu.err));
    // A base build from before turns rejects the option: the gate says what to
    // do instead.
    const QString old_build = dir.filePath("old-kvscope");
    QVERIFY(write_file(old_build, "#!/bin/sh\n"
                                  "for a; do if [ \"$a\" = --step-turns ]; then\n"
                                  "  echo 'The following argument was not expected: --step-turns' "
                                  ">&2; exit 2; fi; done\n"
                                  "exec '" +
                                      QByteArray(KVSCOPE_CLI_PATH) + "' \"$@\"\n"));
    QVERIFY(QFile::setPermissions(old_build, QFile::ReadOwner | QFile::ExeOwner));
    const auto old = run_process(
        KVSCOPE_CLI_PATH,
        QStringList{"gate", old_build, KVSCOPE_CLI_PATH, "--out", out, "--"} + record, tiny);
    QCOMPARE(old.exit_code, 1);
    QVERIFY2(old.err.contains("--interleave runs"), qPrintable(old.err));
}

void TestCli::gate_stops_its_record_when_stopped_data() {
    QTest::addColumn<QString>("interleave");
    QTest::addColumn<bool>("killed"); // SIGKILL: the gate cannot pass the stop on
    QTest::newRow("runs") << "runs" << false;
    QTest::newRow("steps") << "steps" << false;
    QTest::newRow("steps, gate killed") << "steps" << true;
}

void TestCli::gate_stops_its_record_when_stopped() {
    // A CI job's timeout or Ctrl-C stops the gate: the records it is running
    // stop with it and keep what they recorded, and the gate ends by the
    // signal. A gate killed outright lets go of its turns, and records in
    // step stop as well rather than run on unpaired. Throttled steps make
    // each record last seconds.
    QFETCH(QString, interleave);
    QFETCH(bool, killed);
    QProcessEnvironment tiny = QProcessEnvironment::systemEnvironment();
    tiny.insert("KVSCOPE_MODEL", tiny_model_path());
    QTemporaryDir dir;
    const QString out = dir.filePath("gate");
    QProcess gate;
    gate.setProcessEnvironment(tiny);
    gate.start(KVSCOPE_CLI_PATH,
               {"gate", KVSCOPE_CLI_PATH, KVSCOPE_CLI_PATH, "--interleave", interleave, "--rounds",
                "10", "--out", out, "--", "--requests", "1", "--max-tokens", "200", "--throttle-ms",
                "50", "--threads", "1", "--all-at-once"});
    QVERIFY(gate.waitForStarted());
    // One after the other: the base build's record. In step: both.
    QStringList recordings = {out + "/base/round-001.sqlite"};
    if (interleave == "steps") {
        recordings << out + "/new/round-001.sqlite";
    }
    const auto count = [](const QString& recording, const char* sql) {
        sqlite3* db = nullptr;
        qint64 n = -1;
        if (sqlite3_open_v2(recording.toUtf8().constData(), &db, SQLITE_OPEN_READONLY, nullptr) ==
            SQLITE_OK) {
            sqlite3_stmt* query = nullptr;
            if (sqlite3_prepare_v2(db, sql, -1, &query, nullptr) == SQLITE_OK &&
                sqlite3_step(query) == SQLITE_ROW) {
                n = sqlite3_column_int64(query, 0);
            }
            sqlite3_finalize(query);
        }
        sqlite3_close(db);
        return n;
    };
    const char* steps_sql = "SELECT count(*) FROM KVSCOPE_EVENTS WHERE kind = (SELECT id FROM "
                            "ENUM_KVSCOPE_EVENT_KIND WHERE name = 'step_end')";
    // The records are under way once their recordings have a step in them.
    const auto under_way = [&] {
        return std::all_of(recordings.begin(), recordings.end(),
                           [&](const QString& r) { return count(r, steps_sql) > 0; });
    };
    // Generous: under ASan, with ctest running a heavy suite beside it on the
    // CPU the gate pins its records to, the record has been seen to take over
    // a minute to its first step (the steps that follow keep their 50 ms).
    QTRY_VERIFY_WITH_TIMEOUT(under_way(), 180'000);
    QCOMPARE(gate.state(), QProcess::Running); // 200 steps of >= 50 ms: seconds to go
    if (killed) {
        gate.kill(); // SIGKILL
        QVERIFY2(gate.waitForFinished(30'000), "the gate did not end");
        // The records outlive it: they stop, save and say why, last of all
        // (after the recording is closed).
        const auto said = [&] {
            return std::all_of(recordings.begin(), recordings.end(), [&](QString r) {
                QFile log(r.replace(".sqlite", ".log"));
                return log.open(QIODevice::ReadOnly) &&
                       log.readAll().contains("kvscope gate stopped handing over steps");
            });
        };
        QTRY_VERIFY_WITH_TIMEOUT(said(), 30'000);
    } else {
        gate.terminate(); // SIGTERM
        QVERIFY2(gate.waitForFinished(30'000), "the gate did not stop");
        QCOMPARE(gate.exitStatus(), QProcess::CrashExit); // ended by the signal
        const QString err = QString::fromUtf8(gate.readAllStandardError());
        QVERIFY2(err.contains("stopped by signal 15"), qPrintable(err));
    }
    if (interleave == "runs") {
        QVERIFY2(!QFile::exists(out + "/new/round-001.sqlite"), "a record started after the stop");
    }
    QVERIFY2(!QFile::exists(out + "/base/round-002.sqlite"), "a round started after the stop");

    // The interrupted records saved their runs and said so.
    for (const QString& file : recordings) {
        const auto stats = run_process(KVSCOPE_CLI_PATH, {"stats", file, "--json"}, tiny);
        QVERIFY2(stats.exit_code == 0, qPrintable(stats.err));
        const QJsonObject s = QJsonDocument::fromJson(stats.out.toUtf8()).object();
        QVERIFY(s.value("steps").toInteger() > 0);
        QVERIFY2(s.value("steps").toInteger() < 150, "the record ran on after the gate stopped");
        QCOMPARE(meta_value(file, "complete"), QStringLiteral("interrupted"));
    }
}

void TestCli::gate_stops_the_round_when_a_record_fails() {
    // A record that dies mid-round ends without saying its run is over: the
    // gate stops the other build's record too (rather than let it run on
    // unpaired) and names the one that failed, not the one it stopped.
    // Throttled steps make a whole run last over 20 seconds.
    QProcessEnvironment tiny = QProcessEnvironment::systemEnvironment();
    tiny.insert("KVSCOPE_MODEL", tiny_model_path());
    QTemporaryDir dir;
    const QString out = dir.filePath("gate");
    const QString dying = dir.filePath("dying-kvscope");
    QVERIFY(write_file(dying, "#!/bin/sh\n"
                              "'" +
                                  QByteArray(KVSCOPE_CLI_PATH) +
                                  "' \"$@\" &\n"
                                  "exec 3<&- # only the record holds the gate's socket\n"
                                  "sleep 2\n"
                                  "kill -9 $!\n"
                                  "wait $!\n"
                                  "exit 1\n"));
    QVERIFY(QFile::setPermissions(dying, QFile::ReadOwner | QFile::ExeOwner));
    const auto gate = run_process(KVSCOPE_CLI_PATH,
                                  {"gate", KVSCOPE_CLI_PATH, dying, "--rounds", "7", "--out", out,
                                   "--", "--requests", "1", "--max-tokens", "200", "--throttle-ms",
                                   "50", "--threads", "1", "--all-at-once"},
                                  tiny);
    QCOMPARE(gate.exit_code, 1);
    // Base steps first in round 1; the failure named is the new build's.
    QVERIFY2(gate.err.contains("dying-kvscope record failed with status 1"), qPrintable(gate.err));
    QVERIFY2(!QFile::exists(out + "/base/round-002.sqlite"), "a round started after the failure");
    const QString survivor = out + "/base/round-001.sqlite";
    QCOMPARE(meta_value(survivor, "complete"), QStringLiteral("interrupted"));
    const auto stats = run_process(KVSCOPE_CLI_PATH, {"stats", survivor, "--json"}, tiny);
    QVERIFY2(stats.exit_code == 0, qPrintable(stats.err));
    const qint64 steps =
        QJsonDocument::fromJson(stats.out.toUtf8()).object().value("steps").toInteger();
    QVERIFY2(steps < 150, qPrintable(QString("the base build ran on alone: %1 steps").arg(steps)));
    QFile log(out + "/base/round-001.log");
    QVERIFY(log.open(QIODevice::ReadOnly));
    QVERIFY(log.readAll().contains("kvscope gate stopped handing over steps"));
}

void TestCli::export_writes_a_chrome_trace() {
    SKIP_WITHOUT_MODEL();
    QTemporaryDir dir;
    const QString recording = dir.filePath("run.sqlite");
    const auto recorded =
        run_process(KVSCOPE_CLI_PATH, {"record", "--workload", "shared-prefix", "--requests", "3",
                                       "-n", "4", "--all-at-once", "--out", recording});
    QVERIFY2(recorded.exit_code == 0, qPrintable(recorded.err));
    const QString trace = dir.filePath("trace.json");
    const auto exported =
        run_process(KVSCOPE_CLI_PATH, {"export", recording, "--chrome-trace", trace});
    QVERIFY2(exported.exit_code == 0, qPrintable(exported.err));
    QFile file(trace);
    QVERIFY(file.open(QIODevice::ReadOnly));
    const QJsonObject root = QJsonDocument::fromJson(file.readAll()).object();
    const QJsonArray events = root.value("traceEvents").toArray();
    int steps = 0, decode = 0, counters = 0, lanes = 0, attention_ops = 0;
    double last_step_end = -1;
    for (const QJsonValue& v : events) {
        const QJsonObject e = v.toObject();
        const QString ph = e.value("ph").toString();
        if (ph == "X" && e.value("tid").toInt() == 1) {
            ++steps;
            QVERIFY(e.value("dur").toDouble() >= 0);
            QVERIFY(e.value("ts").toDouble() >= last_step_end - 1e-6); // steps do not overlap
            last_step_end = e.value("ts").toDouble() + e.value("dur").toDouble();
        }
        decode += ph == "X" && e.value("name").toString() == "decode";
        attention_ops +=
            ph == "X" && e.value("tid").toInt() == 2 && e.value("name").toString() == "attention";
        counters += ph == "C";
        lanes +=
            ph == "M" && e.value("args").toObject().value("name").toString().startsWith("request ");
    }
    QVERIFY(steps >= 4); // a prefill step and three decode steps at least
    QCOMPARE(decode, 3);
    QCOMPARE(lanes, 3);
    QVERIFY(counters >= 2 * steps);
    QCOMPARE(attention_ops, 30 * steps); // per-op CPU slices: one per layer and step

    const auto bad =
        run_process(KVSCOPE_CLI_PATH, {"export", trace, "--chrome-trace", dir.filePath("x.json")});
    QCOMPARE(bad.exit_code, 1);
    QVERIFY(!QFile::exists(dir.filePath("x.json"))); // nothing half-written
}

QTEST_GUILESS_MAIN(TestCli)
#include "tst_cli.moc"
