// The offload tier from the command line, on the tiny model: a trace whose
// shared prefix a stranger's prompt evicts from a 12-block pool keeps all
// its prefix hits with a tier in memory or in a file (which is gone after
// the run), none without; a recording's events give the same
// blocks moved (kvscope stats); options that do not go together are usage
// errors.
#include "tests/support/run_process.h"
#include "tests/support/tiny_model.h"

#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QTest>

using kvscope::test::run_process;

namespace {

const QString kCli = QStringLiteral(KVSCOPE_CLI_PATH);

// Six repeats of a 21-token prompt sharing 20 tokens, each followed by a
// 40-token stranger, as token ids.
QString write_trace(const QTemporaryDir& dir) {
    const QString path = dir.filePath("trace.jsonl");
    QFile file(path);
    if (!file.open(QIODevice::WriteOnly)) {
        return {};
    }
    QJsonArray prefix;
    for (int i = 0; i < 20; ++i) {
        prefix.append(10 + (i * 7) % 150);
    }
    for (int r = 0; r < 6; ++r) {
        QJsonArray shared = prefix;
        shared.append(170 + r);
        QJsonArray stranger;
        for (int i = 0; i < 40; ++i) {
            stranger.append(20 + (i * 13 + r * 31) % 200);
        }
        for (const QJsonArray& ids : {shared, stranger}) {
            QJsonObject line{{"arrival", 0.0}, {"prompt_ids", ids}, {"max_tokens", 6}};
            file.write(QJsonDocument(line).toJson(QJsonDocument::Compact) + "\n");
        }
    }
    return path;
}

QStringList serving(const QString& trace) {
    return {"--model",
            tiny_model_path(),
            "--workload",
            trace,
            "--all-at-once",
            "--block-size",
            "4",
            "--num-gpu-blocks-override",
            "12",
            "--max-num-seqs",
            "1"};
}

} // namespace

class TestCliOffload : public QObject {
    Q_OBJECT

private slots:
    void theTierKeepsTheEvictedPrefix() {
        QTemporaryDir dir;
        const QString trace = write_trace(dir);
        QVERIFY(!trace.isEmpty());
        const auto plain = run_process(kCli, QStringList{"run", "--json"} + serving(trace));
        QVERIFY2(plain.exit_code == 0, qPrintable(plain.err));
        // Without a tier the stranger evicts the prefix (all but a block,
        // where one ended early on its end token).
        QVERIFY(QJsonDocument::fromJson(plain.out.toUtf8()).object()["prefix_hit_tokens"].toInt() <=
                4);
        const QString tier_file = dir.filePath("tier.bin");
        for (const QStringList& tier :
             {QStringList{"--offload-tier", "memory", "--offload-blocks", "64"},
              QStringList{"--offload-tier", "file", "--offload-blocks", "64", "--offload-file",
                          tier_file}}) {
            const auto run =
                run_process(kCli, QStringList{"run", "--json"} + serving(trace) + tier);
            QVERIFY2(run.exit_code == 0, qPrintable(run.err));
            const QJsonObject j = QJsonDocument::fromJson(run.out.toUtf8()).object();
            // Every repeat hits its 20 shared tokens, most of them loaded
            // back (a stranger that ended early on its end token may leave
            // a block in the pool), each loaded block 4 of them.
            QCOMPARE(j["prefix_hit_tokens"].toInt(), 5 * 20);
            QVERIFY(j["tier_hit_tokens"].toInt() >= 3 * 20);
            QCOMPARE(j["tier_blocks_read"].toInt() * 4, j["tier_hit_tokens"].toInt());
            QVERIFY(j["tier_blocks_written"].toInt() > 0);
            QCOMPARE(j["tier_bytes_read"].toDouble(), j["tier_blocks_read"].toDouble() *
                                                          j["tier_bytes_written"].toDouble() /
                                                          j["tier_blocks_written"].toDouble());
        }
        QVERIFY2(!QFile::exists(tier_file), "the tier's file outlived the run");
    }

    void aRecordingCountsTheBlocksMoved() {
        QTemporaryDir dir;
        const QString trace = write_trace(dir);
        const QString recording = dir.filePath("offload.kvscope");
        const auto record = run_process(
            kCli, QStringList{"record", "--json", "--out", recording, "--offload-tier", "file",
                              "--offload-blocks", "64", "--offload-file", dir.filePath("t.bin")} +
                      serving(trace));
        QVERIFY2(record.exit_code == 0, qPrintable(record.err));
        const QJsonObject summary = QJsonDocument::fromJson(record.out.toUtf8()).object();
        const auto stats = run_process(kCli, {"stats", "--json", recording});
        QVERIFY2(stats.exit_code == 0, qPrintable(stats.err));
        const QJsonObject tier =
            QJsonDocument::fromJson(stats.out.toUtf8()).object()["offload_tier"].toObject();
        QCOMPARE(tier["blocks_offloaded"].toInt(), summary["tier_blocks_written"].toInt());
        QCOMPARE(tier["blocks_reloaded"].toInt(), summary["tier_blocks_read"].toInt());
        QCOMPARE(tier["bytes_read"].toDouble(), summary["tier_bytes_read"].toDouble());
        // Every block loaded back is a block's tokens not computed; the run
        // counts those of admissions that stuck, the recording every load.
        QVERIFY(tier["loaded_tokens"].toInt() >= summary["tier_hit_tokens"].toInt());
        QVERIFY(tier["loaded_tokens"].toInt() > 0);
        QVERIFY(tier["prefill_ms_per_token"].toDouble() > 0);
        QCOMPARE(tier["recompute_ms_estimate"].toDouble(),
                 tier["prefill_ms_per_token"].toDouble() * tier["loaded_tokens"].toInt());
        const auto text = run_process(kCli, {"stats", recording});
        QVERIFY2(text.out.contains("offload tier"), qPrintable(text.out));
        QVERIFY2(text.out.contains("prompt tokens loaded instead of computed"),
                 qPrintable(text.out));
    }

    void optionsThatDoNotGoTogetherAreUsageErrors() {
        QTemporaryDir dir;
        const QString trace = write_trace(dir);
        const struct {
            QStringList args;
            const char* says;
        } cases[] = {
            {{"--offload-tier", "memory"}, "needs --offload-blocks"},
            {{"--offload-blocks", "8"}, "need --offload-tier"},
            {{"--offload-tier", "memory", "--offload-blocks", "8", "--offload-file", "x"},
             "goes with --offload-tier file"},
            {{"--offload-tier", "memory", "--offload-blocks", "8", "--no-prefix-caching"},
             "needs prefix caching"},
        };
        for (const auto& c : cases) {
            const auto run = run_process(kCli, QStringList{"run"} + serving(trace) + c.args);
            QCOMPARE(run.exit_code, 2);
            QVERIFY2(run.err.contains(c.says), qPrintable(run.err));
        }
        const auto missing =
            run_process(kCli, QStringList{"run"} + serving(trace) +
                                  QStringList{"--offload-tier", "file", "--offload-blocks", "8",
                                              "--offload-file", "/nonexistent-dir/t.bin"});
        QVERIFY(missing.exit_code != 0);
        QVERIFY2(missing.err.contains("/nonexistent-dir/t.bin"), qPrintable(missing.err));
    }
};

QTEST_GUILESS_MAIN(TestCliOffload)
#include "tst_cli_offload.moc"
