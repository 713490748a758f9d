// A hybrid KV cache from the command line, on the tiny Gemma 3 (one global
// layer, five with a window of 8): a recording's KVSCOPE_KV_GROUPS rows give
// each group's blocks, its block events say which group and which blocks the
// window let go, `kvscope stats` sums them up per group, and the same run
// with --disable-hybrid-kv-cache-manager keeps one plain group that holds
// more bytes at its peak.
#include "tests/support/run_process.h"
#include "tests/support/sqlite_query.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QTest>

using kvscope::test::run_process;

namespace {

const QString kCli = QStringLiteral(KVSCOPE_CLI_PATH);

QString tiny_gemma() {
    return QStringLiteral(KVSCOPE_SOURCE_DIR "/tests/engine/data/tiny_gemma3.gguf");
}

// One value a query selects; NaN when the file or the query fails.
double one(const QString& path, const QString& sql) {
    const std::int64_t value =
        kvscope::test::query_int(path.toStdString(), sql.toUtf8().constData());
    return value < 0 ? qQNaN() : static_cast<double>(value);
}

} // namespace

class TestCliHybridKv : public QObject {
    Q_OBJECT

private slots:
    void initTestCase();
    void groups_are_in_the_recording();
    void stats_sum_up_each_group();
    void a_plain_cache_holds_more();

private:
    QString record(const QString& name, const QStringList& extra);
    QTemporaryDir dir_;
    QString hybrid_;
    QString plain_;
};

QString TestCliHybridKv::record(const QString& name, const QStringList& extra) {
    const QString path = dir_.filePath(name);
    QStringList args{"record",       "--model", tiny_gemma(), "--workload", "shared-prefix",
                     "--requests",   "4",       "-n",         "12",         "--all-at-once",
                     "--block-size", "4",       "--out",      path};
    args += extra;
    const auto result = run_process(kCli, args);
    if (result.exit_code != 0) {
        qWarning("%s", qPrintable(result.err));
        return {};
    }
    return path;
}

void TestCliHybridKv::initTestCase() {
    QVERIFY(dir_.isValid());
    hybrid_ = record("hybrid.sqlite", {});
    plain_ = record("plain.sqlite", {"--disable-hybrid-kv-cache-manager"});
    QVERIFY(!hybrid_.isEmpty() && !plain_.isEmpty());
}

void TestCliHybridKv::groups_are_in_the_recording() {
    // Six groups of one layer: the global one first, then five windows of 8.
    QCOMPARE(one(hybrid_, "SELECT count(DISTINCT kv_group) FROM KVSCOPE_KV_GROUPS"), 6.0);
    QCOMPARE(one(hybrid_, "SELECT window FROM KVSCOPE_KV_GROUPS WHERE kv_group = 0 LIMIT 1"), 0.0);
    QCOMPARE(one(hybrid_, "SELECT min(window) FROM KVSCOPE_KV_GROUPS WHERE kv_group > 0"), 8.0);
    // At every step each window group holds at most what the global one does.
    QCOMPARE(one(hybrid_, "SELECT count(*) FROM KVSCOPE_KV_GROUPS AS s WHERE s.kv_group > 0 AND "
                          "s.used_blocks > (SELECT g.used_blocks FROM KVSCOPE_KV_GROUPS AS g "
                          "WHERE g.kv_group = 0 AND g.id < s.id ORDER BY g.id DESC LIMIT 1)"),
             0.0);
    // Blocks the windows let go, each of a window group, none of the global one.
    QVERIFY(one(hybrid_, "SELECT count(*) FROM KVSCOPE_BLOCK_EVENTS WHERE left_window = 1") > 20);
    QCOMPARE(one(hybrid_, "SELECT count(*) FROM KVSCOPE_BLOCK_EVENTS WHERE left_window = 1 AND "
                          "kv_group = 0"),
             0.0);
    // Every block allocated names its group, and the six groups' tallies
    // after each step add up to the pool's.
    QCOMPARE(one(hybrid_, "SELECT count(DISTINCT kv_group) FROM KVSCOPE_BLOCK_EVENTS WHERE kind "
                          "= 'block_allocated'"),
             6.0);
    QCOMPARE(one(hybrid_, "SELECT count(*) FROM KVSCOPE_MEMORY AS m WHERE m.kind = "
                          "'memory_sample' AND m.used_blocks != (SELECT sum(used_blocks) FROM "
                          "(SELECT used_blocks FROM KVSCOPE_KV_GROUPS AS g WHERE g.id > m.id "
                          "ORDER BY g.id LIMIT 6))"),
             0.0);
    // A plain cache has no group rows.
    QCOMPARE(one(plain_, "SELECT count(*) FROM KVSCOPE_KV_GROUPS"), 0.0);
    QCOMPARE(one(plain_, "SELECT count(*) FROM KVSCOPE_BLOCK_EVENTS WHERE left_window = 1"), 0.0);
}

void TestCliHybridKv::stats_sum_up_each_group() {
    const auto result = run_process(kCli, {"stats", "--json", hybrid_});
    QCOMPARE(result.exit_code, 0);
    const QJsonObject stats = QJsonDocument::fromJson(result.out.toUtf8()).object();
    const QJsonArray groups = stats["kv_groups"].toArray();
    QCOMPARE(groups.size(), 6);
    QCOMPARE(groups[0]["window"].toInt(), 0);
    QCOMPARE(groups[0]["blocks_left_window"].toInt(), 0);
    double let_go = 0;
    for (int g = 1; g < 6; ++g) {
        QCOMPARE(groups[g]["window"].toInt(), 8);
        QVERIFY(groups[g]["mean_used_blocks"].toDouble() <
                groups[0]["mean_used_blocks"].toDouble());
        let_go += groups[g]["blocks_left_window"].toDouble();
    }
    QCOMPARE(let_go,
             one(hybrid_, "SELECT count(*) FROM KVSCOPE_BLOCK_EVENTS WHERE left_window = 1"));
    const auto text = run_process(kCli, {"stats", hybrid_});
    QVERIFY2(text.out.contains("KV group 1    window 8: peak"), qPrintable(text.out));
}

void TestCliHybridKv::a_plain_cache_holds_more() {
    // The same requests and tokens; the plain cache keeps every layer's
    // whole context.
    const QString peak = "SELECT max(used_bytes) FROM KVSCOPE_MEMORY WHERE kind = 'kv_bytes'";
    const double hybrid_bytes = one(hybrid_, peak);
    const double plain_bytes = one(plain_, peak);
    qInfo("peak KV bytes in use: hybrid %.0f, plain %.0f", hybrid_bytes, plain_bytes);
    QVERIFY(hybrid_bytes < 0.75 * plain_bytes);
    QCOMPARE(one(hybrid_, "SELECT sum(generated_tokens) FROM KVSCOPE_REQUESTS"),
             one(plain_, "SELECT sum(generated_tokens) FROM KVSCOPE_REQUESTS"));
    // What the hybrid run's stats say a plain cache would have held is what
    // the plain run held (the pool is roomy: both schedule alike).
    const auto hybrid_stats =
        QJsonDocument::fromJson(run_process(kCli, {"stats", "--json", hybrid_}).out.toUtf8())
            .object();
    const auto plain_stats =
        QJsonDocument::fromJson(run_process(kCli, {"stats", "--json", plain_}).out.toUtf8())
            .object();
    QCOMPARE(hybrid_stats["plain_cache_peak_bytes"].toDouble(),
             plain_stats["kv_bytes_used_peak"].toDouble());
    QCOMPARE(plain_stats["plain_cache_peak_bytes"].toInt(), 0);
    const auto text = run_process(kCli, {"stats", hybrid_});
    QVERIFY2(text.out.contains("a plain cache of this model, every layer keeping"),
             qPrintable(text.out));
}

QTEST_GUILESS_MAIN(TestCliHybridKv)
#include "tst_cli_hybrid_kv.moc"
