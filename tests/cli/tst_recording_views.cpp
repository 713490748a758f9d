// The SQL views a new recording carries (docs/recordings.md), queried with
// SQLite on a fresh recording of the tiny model and checked against what
// `kvscope stats --json` computes from the raw events: two independent
// readings of one file. The workload shares prefixes and the cache is small,
// so prefix hits, preemptions and every block event kind show up. A copy
// without the views (a recording made before them) still reads the same.
#include "tests/support/run_process.h"
#include "tests/support/tiny_model.h"

#include <sqlite3.h>

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>

using kvscope::test::run_process;

namespace {

// One query's single row, each column as a double (NULL: NaN), or the error.
struct Row {
    QList<double> values;
    QString error;
};

Row query_row(const QString& path, const QString& sql) {
    Row row;
    sqlite3* db = nullptr;
    if (sqlite3_open_v2(path.toUtf8().constData(), &db, SQLITE_OPEN_READONLY, nullptr) !=
        SQLITE_OK) {
        row.error = "cannot open " + path;
        sqlite3_close(db);
        return row;
    }
    sqlite3_stmt* statement = nullptr;
    if (sqlite3_prepare_v2(db, sql.toUtf8().constData(), -1, &statement, nullptr) != SQLITE_OK) {
        row.error = QString::fromUtf8(sqlite3_errmsg(db)) + " in: " + sql;
    } else if (sqlite3_step(statement) == SQLITE_ROW) {
        for (int i = 0; i < sqlite3_column_count(statement); ++i) {
            row.values.append(sqlite3_column_type(statement, i) == SQLITE_NULL
                                  ? qQNaN()
                                  : sqlite3_column_double(statement, i));
        }
    } else {
        row.error = "no row from: " + sql;
    }
    sqlite3_finalize(statement);
    sqlite3_close(db);
    return row;
}

double one(const QString& path, const QString& sql) {
    const Row row = query_row(path, sql);
    if (!row.error.isEmpty() || row.values.isEmpty()) {
        qWarning("%s", qPrintable(row.error));
        return qQNaN();
    }
    return row.values.front();
}

bool close_to(double a, double b) {
    return std::abs(a - b) <= 1e-9 * std::max({1.0, std::abs(a), std::abs(b)});
}

} // namespace

class TestRecordingViews : public QObject {
    Q_OBJECT

private slots:
    void initTestCase();
    void steps_match_stats();
    void requests_match_stats();
    void requests_have_their_output();
    void op_slices_match_stats();
    void memory_matches_stats();
    void block_events_name_their_fields();
    void attached_views_are_there_and_empty();
    void a_recording_without_views_reads_the_same();

private:
    QTemporaryDir dir_;
    QString recording_;
    QJsonObject stats_;
    QJsonObject summary_; // the run's own --json --per-request
};

void TestRecordingViews::initTestCase() {
    QVERIFY(dir_.isValid());
    recording_ = dir_.filePath("views.sqlite");
    // 60 blocks of 16 tokens for byte-level prompts of about 540 tokens:
    // requests share prefixes, and some are preempted.
    const auto recorded =
        run_process(KVSCOPE_CLI_PATH, {"record", "--model", tiny_model_path(), "--workload",
                                       "shared-prefix", "--requests", "12", "--max-tokens", "40",
                                       "--num-gpu-blocks-override", "60", "--all-at-once", "--seed",
                                       "7", "--out", recording_, "--json", "--per-request"});
    QVERIFY2(recorded.exit_code == 0, qPrintable(recorded.err));
    summary_ = QJsonDocument::fromJson(recorded.out.toUtf8()).object();
    const auto stats = run_process(KVSCOPE_CLI_PATH, {"stats", recording_, "--json"});
    QVERIFY2(stats.exit_code == 0, qPrintable(stats.err));
    stats_ = QJsonDocument::fromJson(stats.out.toUtf8()).object();
    QVERIFY(stats_.value("steps").toInt() > 0);
    QVERIFY2(stats_.value("preemptions").toInt() > 0, "the cache is meant to be too small");
    QVERIFY2(stats_.value("prefix_hit_tokens").toInt() > 0, "the prompts are meant to share");
}

void TestRecordingViews::steps_match_stats() {
    const Row row = query_row(recording_, "SELECT count(*), sum(prefill_tokens), "
                                          "sum(decode_tokens), avg(duration_ms), "
                                          "max(duration_ms) FROM KVSCOPE_STEPS");
    QVERIFY2(row.error.isEmpty(), qPrintable(row.error));
    QCOMPARE(row.values[0], stats_.value("steps").toDouble());
    QCOMPARE(row.values[1], stats_.value("prefill_tokens").toDouble());
    QCOMPARE(row.values[2], stats_.value("decode_tokens").toDouble());
    const QJsonObject step_ms = stats_.value("step_ms").toObject();
    QVERIFY(close_to(row.values[3], step_ms.value("mean").toDouble()));
    QVERIFY(close_to(row.values[4], step_ms.value("max").toDouble()));
    // Every step ran something, and its phase says what.
    QCOMPARE(one(recording_, "SELECT count(*) FROM KVSCOPE_STEPS WHERE phase IS NULL"), 0.0);
    QCOMPARE(one(recording_, "SELECT count(*) FROM KVSCOPE_STEPS WHERE phase = 'decode' AND "
                             "(scheduled_tokens != sequences OR prefill_tokens != 0)"),
             0.0);
    QCOMPARE(one(recording_, "SELECT count(*) FROM KVSCOPE_STEPS WHERE phase = 'prefill' AND "
                             "scheduled_tokens = sequences"),
             0.0);
    QVERIFY(one(recording_, "SELECT count(*) FROM KVSCOPE_STEPS WHERE phase = 'mixed'") > 0);
}

void TestRecordingViews::requests_match_stats() {
    const Row row = query_row(
        recording_,
        "SELECT count(*), count(CASE WHEN state = 'finished' THEN 1 END), "
        "sum(CASE WHEN state = 'finished' THEN generated_tokens END), sum(preemptions), "
        "sum(cached_tokens), sum(CASE WHEN admitted_ns IS NOT NULL THEN prompt_tokens END), "
        "avg(ttft_ms), sum(evicted_tokens), "
        "count(CASE WHEN state = 'rejected' THEN 1 END) FROM KVSCOPE_REQUESTS");
    QVERIFY2(row.error.isEmpty(), qPrintable(row.error));
    QCOMPARE(row.values[0], stats_.value("requests").toDouble());
    QCOMPARE(row.values[1], stats_.value("finished").toDouble());
    QCOMPARE(row.values[2], stats_.value("generated_tokens").toDouble());
    QCOMPARE(row.values[3], stats_.value("preemptions").toDouble());
    QCOMPARE(row.values[4], stats_.value("prefix_hit_tokens").toDouble());
    QCOMPARE(row.values[5], stats_.value("prompt_tokens").toDouble());
    QVERIFY(close_to(row.values[6], stats_.value("ttft_ms").toObject().value("mean").toDouble()));
    QCOMPARE(row.values[7], stats_.value("evicted_tokens").toDouble());
    QCOMPARE(row.values[8], stats_.value("rejected").toDouble());
    // Each request's story is in order, and its counts add up.
    QCOMPARE(one(recording_, "SELECT count(*) FROM KVSCOPE_REQUESTS WHERE state = 'finished' AND "
                             "NOT (arrival_ns <= admitted_ns AND admitted_ns <= first_token_ns "
                             "AND first_token_ns <= end_ns)"),
             0.0);
    QCOMPARE(one(recording_, "SELECT count(*) FROM KVSCOPE_REQUESTS WHERE state = 'finished' AND "
                             "cached_tokens + computed_tokens != prompt_tokens"),
             0.0);
    QCOMPARE(one(recording_, "SELECT count(*) FROM KVSCOPE_REQUESTS WHERE state = 'finished' AND "
                             "(generated_tokens != 40 OR reason IS NULL)"),
             0.0);
}

void TestRecordingViews::requests_have_their_output() {
    // The view joins the token_sampled pieces; the run's summary decodes the
    // request's tokens: two paths to the same text, preempted requests (whose
    // tokens were computed again, not sampled again) included.
    const QJsonArray requests = summary_.value("per_request").toArray();
    QCOMPARE(requests.size(), 12);
    sqlite3* db = nullptr;
    QCOMPARE(sqlite3_open_v2(recording_.toUtf8().constData(), &db, SQLITE_OPEN_READONLY, nullptr),
             SQLITE_OK);
    sqlite3_stmt* statement = nullptr;
    QCOMPARE(sqlite3_prepare_v2(db, "SELECT output, tokens FROM KVSCOPE_OUTPUTS WHERE request = ?",
                                -1, &statement, nullptr),
             SQLITE_OK);
    for (const QJsonValue& request : requests) {
        const QJsonObject row = request.toObject();
        sqlite3_reset(statement);
        sqlite3_bind_int64(statement, 1, row.value("id").toInteger());
        QCOMPARE(sqlite3_step(statement), SQLITE_ROW);
        // The tiny model's random tokens are often not UTF-8, which the
        // summary's JSON and QString each show as U+FFFD, by the byte or by
        // the sequence: runs of them count as one.
        const auto replaced_runs_as_one = [](QString text) {
            static const QRegularExpression runs(QString(QChar(0xFFFD)) + "+");
            return text.replace(runs, QString(QChar(0xFFFD)));
        };
        const QByteArray bytes(static_cast<const char*>(sqlite3_column_blob(statement, 0)),
                               sqlite3_column_bytes(statement, 0));
        QVERIFY(!bytes.isEmpty());
        QCOMPARE(replaced_runs_as_one(QString::fromUtf8(bytes)),
                 replaced_runs_as_one(row.value("output").toString()));
        QCOMPARE(sqlite3_column_int64(statement, 1), row.value("generated_tokens").toInteger());
    }
    sqlite3_finalize(statement);
    sqlite3_close(db);
}

void TestRecordingViews::op_slices_match_stats() {
    const QJsonArray ops = stats_.value("cpu_ops").toArray();
    QVERIFY(!ops.isEmpty());
    for (const QJsonValue& value : ops) {
        const QJsonObject op = value.toObject();
        const QString name = op.value("name").toString();
        const Row row = query_row(recording_, "SELECT count(*), sum(end_ns - begin_ns), "
                                              "min(duration_us) FROM KVSCOPE_OP_SLICES WHERE op "
                                              "= '" +
                                                  name + "'");
        QVERIFY2(row.error.isEmpty(), qPrintable(row.error));
        QCOMPARE(row.values[0], op.value("instances").toDouble());
        QVERIFY2(close_to(row.values[1], op.value("total_ns").toDouble()), qPrintable(name));
        QVERIFY(row.values[2] >= 0);
    }
    QCOMPARE(one(recording_, "SELECT count(*) FROM KVSCOPE_OP_SLICES WHERE step NOT IN (SELECT "
                             "step FROM KVSCOPE_STEPS)"),
             0.0);
}

void TestRecordingViews::memory_matches_stats() {
    const Row row =
        query_row(recording_, "SELECT max(used_blocks), avg(used_blocks), avg(cached_blocks), "
                              "max(total_blocks) FROM KVSCOPE_MEMORY WHERE kind = 'memory_sample'");
    QVERIFY2(row.error.isEmpty(), qPrintable(row.error));
    QCOMPARE(row.values[0], stats_.value("peak_used_blocks").toDouble());
    QVERIFY(close_to(row.values[1], stats_.value("mean_used_blocks").toDouble()));
    QVERIFY(close_to(row.values[2], stats_.value("mean_cached_blocks").toDouble()));
    QCOMPARE(row.values[3], 60.0);
    const Row bytes = query_row(recording_, "SELECT max(used_bytes), max(bytes_per_block) FROM "
                                            "KVSCOPE_MEMORY WHERE kind = 'kv_bytes'");
    QVERIFY2(bytes.error.isEmpty(), qPrintable(bytes.error));
    QCOMPARE(bytes.values[0], stats_.value("kv_bytes_used_peak").toDouble());
    QCOMPARE(bytes.values[1], stats_.value("kv_bytes_per_block").toDouble());
    // Cache samples: entries never exceed the capacity of the blocks holding them.
    QCOMPARE(one(recording_, "SELECT count(*) FROM KVSCOPE_MEMORY WHERE kind = 'cache_fill' AND "
                             "entries > capacity"),
             0.0);
}

void TestRecordingViews::block_events_name_their_fields() {
    // Every block event of the raw table is in the view, with its kind named.
    QCOMPARE(one(recording_, "SELECT count(*) FROM KVSCOPE_BLOCK_EVENTS"),
             one(recording_, "SELECT count(*) FROM KVSCOPE_EVENTS e JOIN ENUM_KVSCOPE_EVENT_KIND "
                             "k ON k.id = e.kind WHERE k.name LIKE 'block_%'"));
    for (const char* kind :
         {"block_allocated", "block_shared", "block_freed", "block_cached", "block_evicted"}) {
        QVERIFY2(one(recording_, QString("SELECT count(*) FROM KVSCOPE_BLOCK_EVENTS WHERE kind = "
                                         "'%1'")
                                     .arg(kind)) > 0,
                 kind);
    }
    QCOMPARE(one(recording_, "SELECT count(*) FROM KVSCOPE_BLOCK_EVENTS WHERE block < 0 OR "
                             "block >= 60 OR request IS NULL"),
             0.0);
    // Fields only where their kind has them.
    QCOMPARE(one(recording_, "SELECT count(*) FROM KVSCOPE_BLOCK_EVENTS WHERE (kind = "
                             "'block_cached') != (hash IS NOT NULL)"),
             0.0);
    QCOMPARE(one(recording_, "SELECT count(*) FROM KVSCOPE_BLOCK_EVENTS WHERE (kind = "
                             "'block_freed') != (stays_cached IS NOT NULL)"),
             0.0);
    // A cached block's first token sits on a block boundary of its request.
    QCOMPARE(one(recording_, "SELECT count(*) FROM KVSCOPE_BLOCK_EVENTS WHERE kind = "
                             "'block_cached' AND first_token % 16 != 0"),
             0.0);
    // Prefix hits at first admission are block_shared events of those requests.
    QVERIFY(one(recording_, "SELECT count(*) FROM KVSCOPE_BLOCK_EVENTS WHERE kind = "
                            "'block_shared'") >=
            one(recording_, "SELECT sum(blocks_hit) FROM KVSCOPE_REQUESTS"));
}

void TestRecordingViews::attached_views_are_there_and_empty() {
    // A run of kvscope's own engine attaches to nothing; the views still
    // answer (tst_attach_session and tst_metrics_poller fill them).
    for (const char* view : {"KVSCOPE_SOURCES", "KVSCOPE_ATTACHED_BLOCKS",
                             "KVSCOPE_ATTACHED_STATUS", "KVSCOPE_ATTACHED_METRICS"}) {
        QCOMPARE(one(recording_, QString("SELECT count(*) FROM %1").arg(view)), 0.0);
    }
    QCOMPARE(one(recording_, "SELECT count(*) FROM (SELECT id, t_ns, source, name, value, labels "
                             "FROM KVSCOPE_ATTACHED_METRICS)"),
             0.0);
    QCOMPARE(one(recording_, "SELECT count(*) FROM (SELECT metrics_url FROM KVSCOPE_SOURCES)"),
             0.0);
}

void TestRecordingViews::a_recording_without_views_reads_the_same() {
    const QString old = dir_.filePath("without-views.sqlite");
    QVERIFY(QFile::copy(recording_, old));
    QFile::setPermissions(old, QFile::ReadOwner | QFile::WriteOwner);
    sqlite3* db = nullptr;
    QCOMPARE(sqlite3_open(old.toUtf8().constData(), &db), SQLITE_OK);
    char* error = nullptr;
    const int rc = sqlite3_exec(db,
                                "DROP VIEW KVSCOPE_STEPS; DROP VIEW KVSCOPE_REQUESTS; "
                                "DROP VIEW KVSCOPE_BLOCK_EVENTS; DROP VIEW KVSCOPE_OP_SLICES; "
                                "DROP VIEW KVSCOPE_MEMORY;",
                                nullptr, nullptr, &error);
    const QString message = error ? QString::fromUtf8(error) : QString();
    sqlite3_free(error);
    sqlite3_close(db);
    QVERIFY2(rc == SQLITE_OK, qPrintable(message));
    const auto stats = run_process(KVSCOPE_CLI_PATH, {"stats", old, "--json"});
    QVERIFY2(stats.exit_code == 0, qPrintable(stats.err));
    QJsonObject again = QJsonDocument::fromJson(stats.out.toUtf8()).object();
    QJsonObject expected = stats_;
    again.remove("path");
    expected.remove("path");
    QCOMPARE(again, expected);
}

QTEST_GUILESS_MAIN(TestRecordingViews)
#include "tst_recording_views.moc"
