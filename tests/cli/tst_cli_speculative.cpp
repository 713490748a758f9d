// Speculative decoding from the command line, on the tiny model (whose
// random weights repeat themselves, so prompt lookup drafts well): kvscope
// run reports drafted and kept tokens with rates that follow from them and
// generates what plain decoding does, token for token; a recording of the same run gives the
// same figures from its draft_verified events (kvscope stats); a model
// drafting for itself keeps every greedy draft; bad methods, a self-draft
// deeper than the model, a draft model with another tokenizer and
// speculation with eviction are refused with a reason.
#include "engine/model_path.h"
#include "tests/support/run_process.h"
#include "tests/support/sqlite_query.h"
#include "tests/support/tiny_model.h"

#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QTest>

using kvscope::test::run_process;

namespace {

const QString kCli = QStringLiteral(KVSCOPE_CLI_PATH);

QStringList workload() {
    return {"--model", tiny_model_path(), "--all-at-once", "--requests", "6", "--max-tokens", "48"};
}

QJsonObject run_json(const QStringList& args) {
    const auto result = run_process(kCli, QStringList{"run", "--json"} + workload() + args);
    if (result.exit_code != 0) {
        qWarning("%s", qPrintable(result.err));
        return {};
    }
    return QJsonDocument::fromJson(result.out.toUtf8()).object();
}

} // namespace

class TestCliSpeculative : public QObject {
    Q_OBJECT

private slots:
    void runReportsDraftsAndGeneratesWhatPlainDecodingDoes() {
        const QJsonObject plain = run_json({});
        const QJsonObject sped = run_json({"--speculative", "ngram:4"});
        QVERIFY(!plain.isEmpty() && !sped.isEmpty());
        QCOMPARE(plain["drafted_tokens"].toInt(), 0);
        const double drafted = sped["drafted_tokens"].toDouble();
        const double accepted = sped["accepted_tokens"].toDouble();
        const double verifies = sped["verify_steps"].toDouble();
        QVERIFY2(drafted > 0 && accepted > 0 && accepted <= drafted, "no draft was verified");
        QCOMPARE(sped["acceptance_rate"].toDouble(), accepted / drafted);
        QCOMPARE(sped["tokens_per_verify"].toDouble(), (accepted + verifies) / verifies);
        QCOMPARE(sped["generated_tokens"].toInt(), plain["generated_tokens"].toInt());
        // The same tokens, request by request: each run's sampled ids from
        // its recording. Seen failing with a verifier that emitted the draft's
        // token at a mismatch (the same counts, other tokens).
        QTemporaryDir dir;
        const auto sampled = [&](const QString& name, const QStringList& options) {
            const QString file = dir.filePath(name);
            const auto record =
                run_process(kCli, QStringList{"record", "--out", file} + workload() + options);
            if (record.exit_code != 0) {
                qWarning("%s", qPrintable(record.err));
            }
            return kvscope::test::query_text(
                       file.toStdString(),
                       "SELECT group_concat(request || ':' || token, ' ') FROM ("
                       "SELECT e.request AS request, e.a AS token FROM KVSCOPE_EVENTS AS e "
                       "JOIN ENUM_KVSCOPE_EVENT_KIND AS k ON k.id = e.kind "
                       "WHERE k.name = 'token_sampled' ORDER BY e.request, e.b)")
                .value_or("");
        };
        const std::string plain_tokens = sampled("plain.sqlite", {});
        const std::string sped_tokens = sampled("sped.sqlite", {"--speculative", "ngram:4"});
        QVERIFY(!plain_tokens.empty());
        QCOMPARE(sped_tokens, plain_tokens);
        // Kept drafts are tokens gained without a step of their own.
        QVERIFY(sped["steps"].toInt() < plain["steps"].toInt());
        const auto text =
            run_process(kCli, QStringList{"run", "--speculative", "ngram:4"} + workload());
        QCOMPARE(text.exit_code, 0);
        QVERIFY2(text.out.contains("speculation     ngram:4 (prompt lookup):"),
                 qPrintable(text.out));
    }

    void aRecordingGivesTheSameFiguresFromItsEvents() {
        QTemporaryDir dir;
        const QString file = dir.filePath("spec.kvscope");
        const auto record = run_process(
            kCli, QStringList{"record", "--json", "--out", file, "--speculative", "ngram:4"} +
                      workload());
        QVERIFY2(record.exit_code == 0, qPrintable(record.err));
        const QJsonObject summary = QJsonDocument::fromJson(record.out.toUtf8()).object();
        const auto stats = run_process(kCli, {"stats", "--json", file});
        QVERIFY2(stats.exit_code == 0, qPrintable(stats.err));
        const QJsonObject s =
            QJsonDocument::fromJson(stats.out.toUtf8()).object()["speculation"].toObject();
        QCOMPARE(s["drafted_tokens"].toInt(), summary["drafted_tokens"].toInt());
        QCOMPARE(s["accepted_tokens"].toInt(), summary["accepted_tokens"].toInt());
        QCOMPARE(s["verifies"].toInt(), summary["verify_steps"].toInt());
        QVERIFY(s["drafted_tokens"].toInt() > 0);
        const auto text = run_process(kCli, {"stats", file});
        QVERIFY2(text.out.contains("verifying passes"), qPrintable(text.out));
    }

    void aDraftModelDraftsFromItsOwnCache() {
        const QJsonObject sped = run_json({"--draft-model", tiny_model_path()});
        QVERIFY(!sped.isEmpty());
        QVERIFY(sped["drafted_tokens"].toInt() > 0);
        // The same model drafting greedily: its drafts are the target's
        // tokens unless its own K/V went wrong (or a near-tie of the random
        // weights' logits flips between a 1-token and a 5-token pass).
        QVERIFY(sped["accepted_tokens"].toDouble() >= 0.97 * sped["drafted_tokens"].toDouble());
        const auto both = run_process(
            kCli, QStringList{"run", "--draft-model", tiny_model_path(), "--draft-layers", "1"} +
                      workload());
        QCOMPARE(both.exit_code, 2);
        QVERIFY2(both.err.contains("choose one"), qPrintable(both.err));
        const kvscope::ModelPath real = kvscope::resolve_model_path();
        if (!kvscope::model_path_problem(real).empty()) {
            QSKIP("a mismatched draft model needs the SmolLM2 model beside the tiny one");
        }
        const auto mismatched = run_process(
            kCli, QStringList{"run", "--draft-model", QString::fromStdString(real.path.string())} +
                      workload());
        QVERIFY(mismatched.exit_code != 0);
        QVERIFY2(mismatched.err.contains("different vocabularies"), qPrintable(mismatched.err));
    }

    void nonsenseIsRefusedWithAReason() {
        const auto method =
            run_process(kCli, QStringList{"run", "--speculative", "medusa:3"} + workload());
        QCOMPARE(method.exit_code, 2);
        QVERIFY2(method.err.contains("unknown speculative method 'medusa'"),
                 qPrintable(method.err));
        const auto deep = run_process(kCli, QStringList{"run", "--draft-layers", "9"} + workload());
        QVERIFY(deep.exit_code != 0);
        QVERIFY2(deep.err.contains("must be fewer than the model's 2 layers"),
                 qPrintable(deep.err));
        const auto evicting =
            run_process(kCli, QStringList{"run", "--speculative", "ngram:4", "--eviction", "window",
                                          "--kv-budget", "64"} +
                                  workload());
        QVERIFY(evicting.exit_code != 0);
        QVERIFY2(evicting.err.contains("does not combine with token eviction"),
                 qPrintable(evicting.err));
    }
};

QTEST_GUILESS_MAIN(TestCliSpeculative)
#include "tst_cli_speculative.moc"
