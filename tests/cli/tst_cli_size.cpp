// `kvscope size` from the outside: a built-in model's sizes as JSON
// (Llama-3-70B at 8K tokens, bf16: 2.5 GiB a request), a GGUF sized from its
// own metadata, what fits in a device's memory, and bad input answered with
// a reason and status 2.
#include "tests/support/run_process.h"
#include "tests/support/tiny_model.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTest>

using kvscope::test::run_process;

namespace {

const QString kCli = QStringLiteral(KVSCOPE_CLI_PATH);

QJsonObject size_json(const QStringList& args) {
    const auto result = run_process(kCli, QStringList{"size", "--json"} + args);
    if (result.exit_code != 0) {
        qWarning("%s", qPrintable(result.err));
        return {};
    }
    return QJsonDocument::fromJson(result.out.toUtf8()).object();
}

} // namespace

class TestCliSize : public QObject {
    Q_OBJECT

private slots:
    void sizesABuiltInModel() {
        const QJsonObject r =
            size_json({"--preset", "Llama-3-70B", "--cache-type-k", "bf16", "--cache-type-v",
                       "bf16", "--context", "8192", "--batch", "4"});
        QCOMPARE(r["layers"].toInt(), 80);
        const QJsonArray variants = r["variants"].toArray();
        QCOMPARE(variants.size(), 4);
        const QJsonObject gqa = variants[1].toObject();
        QVERIFY(gqa["own"].toBool());
        QCOMPARE(gqa["bytes_per_request"].toDouble(), 2.0 * 80 * 8 * 128 * 8192 * 2);
        QCOMPARE(gqa["bytes_per_batch"].toDouble(), 4 * 2.0 * 80 * 8 * 128 * 8192 * 2);
        QCOMPARE(variants[0].toObject()["bytes_per_token"].toDouble(), 2.0 * 80 * 64 * 128 * 2);
        // What fits: 8 x 80 GiB at 0.9 less the weights.
        const QJsonObject fit = size_json({"--preset", "llama-3-70b", "--memory", "640GiB"});
        const double budget = 640.0 * (1 << 30) * 0.9 - 70.6e9 * 2;
        QCOMPARE(fit["cache_budget_bytes"].toDouble(), budget);
        QCOMPARE(fit["variants"].toArray()[1].toObject()["tokens_fit"].toDouble(),
                 std::floor(budget / (2.0 * 80 * 8 * 128 * 2)));
        const auto text = run_process(kCli, {"size", "--preset", "DeepSeek-V3"});
        QCOMPARE(text.exit_code, 0);
        QVERIFY2(text.out.contains("MLA (latent 576) *"), qPrintable(text.out));
        const auto list = run_process(kCli, {"size", "--list"});
        QCOMPARE(list.out.count('\n'), 6);
    }

    void sizesAGgufFromItsMetadata() {
        const QJsonObject r = size_json({"--model", tiny_model_path(), "--context", "100"});
        QVERIFY(r["layers"].toInt() > 0);
        const QJsonObject own =
            r["variants"].toArray()[r["kv_heads"].toInt() == r["heads"].toInt() ? 0 : 1].toObject();
        QVERIFY(own["own"].toBool());
        QCOMPARE(own["bytes_per_request"].toDouble(), 100 * own["bytes_per_token"].toDouble());

        // A hybrid model: the tiny Gemma 3's five sliding layers of six keep
        // its window of 8 and a block (24 tokens), the global one all 100.
        const QJsonObject gemma =
            size_json({"--model", KVSCOPE_SOURCE_DIR "/tests/engine/data/tiny_gemma3.gguf",
                       "--context", "100"});
        QCOMPARE(gemma["sliding_layers"].toInt(), 5);
        QCOMPARE(gemma["sliding_window"].toInt(), 8);
        const QJsonArray rows = gemma["variants"].toArray();
        const QJsonObject gqa = rows[1].toObject();
        QVERIFY(gqa["own"].toBool());
        const double per_layer = gqa["bytes_per_token"].toDouble() / 6;
        QCOMPARE(gqa["bytes_per_token_past_windows"].toDouble(), per_layer); // its global layer
        QCOMPARE(gqa["bytes_per_request"].toDouble(), per_layer * (100 + 5 * 24));
        const QJsonObject global = rows.last().toObject();
        QCOMPARE(global["attention"].toString(), QString("the same, every layer global"));
        QCOMPARE(global["bytes_per_request"].toDouble(), per_layer * 6 * 100);
        // The table says what its per-token figure counts for a hybrid model,
        // and what a token keeps once past the windows; a plain model has no
        // such line.
        const auto text = run_process(
            kCli, {"size", "--model", KVSCOPE_SOURCE_DIR "/tests/engine/data/tiny_gemma3.gguf"});
        QCOMPARE(text.exit_code, 0);
        QVERIFY2(text.out.contains("one past them keeps") &&
                     text.out.contains("(its 1 global layer)"),
                 qPrintable(text.out));
        const auto plain = run_process(kCli, {"size", "--model", tiny_model_path()});
        QVERIFY2(!plain.out.contains("past them"), qPrintable(plain.out));
    }

    void badInputSaysWhy() {
        auto result = run_process(kCli, {"size", "--preset", "gpt-5"});
        QCOMPARE(result.exit_code, 2);
        QVERIFY(result.err.contains("--list"));
        result = run_process(kCli, {"size", "--preset", "Llama-3-8B", "--cache-type-k", "f12"});
        QCOMPARE(result.exit_code, 2);
        result = run_process(kCli, {"size", "--preset", "Llama-3-8B", "--memory", "lots"});
        QCOMPARE(result.exit_code, 2);
        result = run_process(kCli, {"size", "--model", "/nonexistent.gguf"});
        QVERIFY(result.exit_code != 0);
        QVERIFY(!result.err.isEmpty());
    }
};

QTEST_GUILESS_MAIN(TestCliSize)
#include "tst_cli_size.moc"
