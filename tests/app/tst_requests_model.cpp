// The requests table and panel: the rows a run's events give at a moment
// (state, cache hits, tokens so far, TTFT/TPOT against a hand computation),
// snapshots that grow and change announced without resets (checked by
// QAbstractItemModelTester), and the panel's text and selection following
// live updates.
#include "app/ui/models/requests_model.h"
#include "app/ui/panels/requests_panel.h"
#include "engine/events/engine_event.h"
#include "profiler/store/run_store.h"
#include "tests/support/engine_events.h"

#include <cmath>

#include <QAbstractItemModelTester>
#include <QItemSelectionModel>
#include <QPlainTextEdit>
#include <QSignalSpy>
#include <QSortFilterProxyModel>
#include <QTableView>
#include <QTest>

namespace events = kvscope::events;
namespace profiler = kvscope::profiler;
namespace ui = kvscope::ui;

namespace {

constexpr qint64 kMs = 1'000'000;

events::EngineEvent make_event(qint64 t_ms, events::EventKind kind, qint64 request, qint64 a = 0,
                               qint64 b = 0, std::string text = {}) {
    return kvscope::test::engine_event(t_ms * kMs, kind, request, -1, a, b, 0, 0, std::move(text));
}

// Three requests, by the millisecond:
//   1: arrives at 1 (4 prompt tokens), admitted at 2 (no hit, 4 computed),
//      tokens at 5, 7 and 11, finished at 11.
//   2: arrives at 3 (3 tokens), admitted at 6 (2 cached, 1 computed), first
//      token at 8, preempted at 13, token at 16 after re-admission at 14.
//   3: arrives at 12, never admitted.
std::vector<events::EngineEvent> run_events() {
    using K = events::EventKind;
    return {
        make_event(1, K::request_arrived, 1, 4, 0,
                   events::encode_pieces({"Hello", ",", " world", "\nBye"})),
        make_event(2, K::request_admitted, 1, 0, 4),
        make_event(3, K::request_arrived, 2, 3, 0, events::encode_pieces({"A", "B", "C"})),
        make_event(5, K::first_token, 1),
        make_event(5, K::token_sampled, 1, 100, 1, " Hi"),
        make_event(6, K::request_admitted, 2, 2, 1),
        make_event(7, K::token_sampled, 1, 101, 2, " there"),
        make_event(8, K::first_token, 2),
        make_event(8, K::token_sampled, 2, 102, 1, " x"),
        make_event(11, K::token_sampled, 1, 103, 3, "!"),
        make_event(11, K::request_finished, 1, 3, 0, "stop"),
        make_event(12, K::request_arrived, 3, 2, 0, events::encode_pieces({"Q", "?"})),
        make_event(13, K::request_preempted, 2, 1),
        make_event(14, K::request_admitted, 2, 0, 4),
        make_event(16, K::token_sampled, 2, 104, 2, " y"),
    };
}

void feed(profiler::RunStore& store, const std::vector<events::EngineEvent>& list,
          qint64 until_ms) {
    for (const events::EngineEvent& e : list) {
        if (e.time_ns <= until_ms * kMs) {
            store.append(e);
        }
    }
}

const ui::RequestRow* row_with_id(const std::vector<ui::RequestRow>& rows, qint64 id) {
    for (const ui::RequestRow& row : rows) {
        if (row.id == id) {
            return &row;
        }
    }
    return nullptr;
}

} // namespace

class TestRequestsModel : public QObject {
    Q_OBJECT

private slots:
    void rows_at_a_moment_data();
    void rows_at_a_moment();
    void prompt_preview_shows_newlines();
    void live_growth_is_announced_without_reset();
    void proxy_sorts_by_raw_numbers();
    void panel_shows_output_so_far();
    void selection_survives_refresh_that_adds_rows();
};

void TestRequestsModel::rows_at_a_moment_data() {
    QTest::addColumn<qint64>("t_ms");
    QTest::addColumn<qint64>("id");
    QTest::addColumn<QString>("state");
    QTest::addColumn<qint64>("cached");
    QTest::addColumn<qint64>("computed");
    QTest::addColumn<qint64>("generated");
    QTest::addColumn<double>("ttft_ms");
    QTest::addColumn<double>("tpot_ms");
    QTest::addColumn<qint64>("preemptions");

    // TTFT = first token - arrival; TPOT = (last token so far - first) / (tokens - 1).
    QTest::newRow("1 waiting for admission")
        << qint64{1} << qint64{1} << "waiting" << qint64{-1} << qint64{-1} << qint64{0} << -1.0
        << -1.0 << qint64{0};
    QTest::newRow("1 in prefill") << qint64{4} << qint64{1} << "prefill" << qint64{0} << qint64{4}
                                  << qint64{0} << -1.0 << -1.0 << qint64{0};
    QTest::newRow("1 after one token") << qint64{6} << qint64{1} << "decode" << qint64{0}
                                       << qint64{4} << qint64{1} << 4.0 << -1.0 << qint64{0};
    QTest::newRow("1 after two tokens") << qint64{9} << qint64{1} << "decode" << qint64{0}
                                        << qint64{4} << qint64{2} << 4.0 << 2.0 << qint64{0};
    QTest::newRow("1 finished") << qint64{20} << qint64{1} << "finished" << qint64{0} << qint64{4}
                                << qint64{3} << 4.0 << 3.0 << qint64{0};
    QTest::newRow("2 waiting") << qint64{4} << qint64{2} << "waiting" << qint64{-1} << qint64{-1}
                               << qint64{0} << -1.0 << -1.0 << qint64{0};
    QTest::newRow("2 first token") << qint64{9} << qint64{2} << "decode" << qint64{2} << qint64{1}
                                   << qint64{1} << 5.0 << -1.0 << qint64{0};
    QTest::newRow("2 preempted") << qint64{13} << qint64{2} << "preempted" << qint64{2} << qint64{1}
                                 << qint64{1} << 5.0 << -1.0 << qint64{1};
    QTest::newRow("2 decoding again") << qint64{20} << qint64{2} << "decode" << qint64{2}
                                      << qint64{1} << qint64{2} << 5.0 << 8.0 << qint64{1};
    QTest::newRow("3 arrived") << qint64{12} << qint64{3} << "waiting" << qint64{-1} << qint64{-1}
                               << qint64{0} << -1.0 << -1.0 << qint64{0};
}

void TestRequestsModel::rows_at_a_moment() {
    QFETCH(qint64, t_ms);
    QFETCH(qint64, id);
    QFETCH(QString, state);
    QFETCH(qint64, cached);
    QFETCH(qint64, computed);
    QFETCH(qint64, generated);
    QFETCH(double, ttft_ms);
    QFETCH(double, tpot_ms);
    QFETCH(qint64, preemptions);

    // The whole run is in the store; the rows must only know what was known
    // at t.
    profiler::RunStore store;
    feed(store, run_events(), 100);
    const std::vector<ui::RequestRow> rows = ui::request_rows(store, t_ms * kMs);
    const ui::RequestRow* row = row_with_id(rows, id);
    QVERIFY(row != nullptr);
    QCOMPARE(row->state, state);
    QCOMPARE(row->cached_tokens, cached);
    QCOMPARE(row->computed_tokens, computed);
    QCOMPARE(row->generated, generated);
    QVERIFY2(std::abs(row->ttft_ms - ttft_ms) < 1e-9, qPrintable(QString::number(row->ttft_ms)));
    QVERIFY2(std::abs(row->tpot_ms - tpot_ms) < 1e-9, qPrintable(QString::number(row->tpot_ms)));
    QCOMPARE(row->preemptions, preemptions);

    // Requests that had not arrived yet have no row.
    const qint64 arrived = t_ms >= 12 ? 3 : t_ms >= 3 ? 2 : 1;
    QCOMPARE(static_cast<qint64>(rows.size()), arrived);
}

void TestRequestsModel::prompt_preview_shows_newlines() {
    profiler::RunStore store;
    feed(store, run_events(), 1);
    const std::string long_prompt(200, 'x');
    store.append(make_event(1, events::EventKind::request_arrived, 9, 2, 0,
                            events::encode_pieces({long_prompt.substr(0, 100), long_prompt})));
    const std::vector<ui::RequestRow> rows = ui::request_rows(store, kMs);
    QCOMPARE(rows.at(0).prompt_preview, QStringLiteral(u"Hello, world⏎Bye"));
    QCOMPARE(rows.at(1).prompt_preview, QString(60, QLatin1Char('x')) + QStringLiteral(u"…"));

    ui::RequestsModel model;
    model.set_snapshot(rows);
    const QModelIndex prompt = model.index(0, ui::RequestsModel::PromptColumn);
    QCOMPARE(prompt.data().toString(), QStringLiteral(u"Hello, world⏎Bye"));
    // Not admitted yet: the cache columns are blank, their sort value -1.
    const QModelIndex cached = model.index(0, ui::RequestsModel::CachedTokensColumn);
    QCOMPARE(cached.data().toString(), QString());
    QCOMPARE(cached.data(ui::RequestsModel::SortRole).toLongLong(), -1);
    QVERIFY(
        model.index(0, ui::RequestsModel::PromptTokensColumn).data(Qt::TextAlignmentRole).toInt() &
        Qt::AlignRight);
}

void TestRequestsModel::live_growth_is_announced_without_reset() {
    profiler::RunStore store;
    ui::RequestsModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
    QSignalSpy resets(&model, &QAbstractItemModel::modelReset);
    QSignalSpy inserts(&model, &QAbstractItemModel::rowsInserted);
    QSignalSpy removes(&model, &QAbstractItemModel::rowsRemoved);
    QSignalSpy changes(&model, &QAbstractItemModel::dataChanged);

    // Live: the store grows, and every tick shows its end.
    const std::vector<events::EngineEvent> list = run_events();
    std::size_t fed = 0;
    for (qint64 t = 0; t <= 20; ++t) {
        while (fed < list.size() && list[fed].time_ns <= t * kMs) {
            store.append(list[fed++]);
        }
        model.set_snapshot(ui::request_rows(store, t * kMs));
    }
    QCOMPARE(model.rowCount(), 3);
    QCOMPARE(resets.count(), 0);
    QCOMPARE(inserts.count(), 3); // one per arrival
    QVERIFY(changes.count() > 0);
    QCOMPARE(model.index(0, ui::RequestsModel::StateColumn).data().toString(),
             QStringLiteral("finished"));

    // The same snapshot again changes nothing.
    changes.clear();
    model.set_snapshot(ui::request_rows(store, 20 * kMs));
    QCOMPARE(changes.count(), 0);

    // One request's cells change: one dataChanged, over that row only.
    std::vector<ui::RequestRow> rows = model.rows();
    rows[1].generated += 5;
    rows[1].tpot_ms = 1.5;
    model.set_snapshot(rows);
    QCOMPARE(changes.count(), 1);
    const auto top_left = changes.at(0).at(0).value<QModelIndex>();
    const auto bottom_right = changes.at(0).at(1).value<QModelIndex>();
    QCOMPARE(top_left.row(), 1);
    QCOMPARE(bottom_right.row(), 1);
    QCOMPARE(top_left.column(), int(ui::RequestsModel::GeneratedColumn));
    QCOMPARE(bottom_right.column(), int(ui::RequestsModel::TpotColumn));

    // Scrubbing back drops the rows of later arrivals.
    model.set_snapshot(ui::request_rows(store, 4 * kMs));
    QCOMPARE(model.rowCount(), 2);
    QCOMPARE(removes.count(), 1);
    QCOMPARE(resets.count(), 0);
    QCOMPARE(model.index(0, ui::RequestsModel::StateColumn).data().toString(),
             QStringLiteral("prefill"));

    // Ids that no longer line up (another run): a reset.
    rows = model.rows();
    std::swap(rows[0], rows[1]);
    model.set_snapshot(rows);
    QCOMPARE(resets.count(), 1);
    QCOMPARE(model.row_of(2), 0);
}

void TestRequestsModel::proxy_sorts_by_raw_numbers() {
    profiler::RunStore store;
    feed(store, run_events(), 100);
    ui::RequestsPanel panel;
    panel.set_store(&store);
    QTableView* table = panel.table();
    // TTFT 4 ms (1), 5 ms (2), unknown (3): descending puts 2 first, 3 last.
    table->sortByColumn(ui::RequestsModel::TtftColumn, Qt::DescendingOrder);
    QAbstractItemModel* proxy = table->model();
    QCOMPARE(proxy->index(0, ui::RequestsModel::IdColumn).data().toString(), QStringLiteral("2"));
    QCOMPARE(proxy->index(2, ui::RequestsModel::IdColumn).data().toString(), QStringLiteral("3"));
    table->sortByColumn(ui::RequestsModel::GeneratedColumn, Qt::DescendingOrder);
    QCOMPARE(proxy->index(0, ui::RequestsModel::IdColumn).data().toString(), QStringLiteral("1"));
}

void TestRequestsModel::panel_shows_output_so_far() {
    profiler::RunStore store;
    feed(store, run_events(), 100);
    ui::RequestsPanel panel;
    QSignalSpy selected(&panel, &ui::RequestsPanel::request_selected);
    panel.set_store(&store);
    panel.set_time_ns(9 * kMs);
    panel.select_request(1);
    QCOMPARE(selected.count(), 1);
    QCOMPARE(selected.at(0).at(0).toLongLong(), 1);
    QCOMPARE(panel.selected_request(), 1);
    QString text = panel.text_view()->toPlainText();
    QVERIFY2(text.contains("Hello, world\nBye"), qPrintable(text));
    QVERIFY2(text.contains(" Hi there"), qPrintable(text));
    QVERIFY2(!text.contains("!"), qPrintable(text));

    // Time moves on: the text grows.
    panel.set_time_ns(20 * kMs);
    text = panel.text_view()->toPlainText();
    QVERIFY2(text.endsWith(" Hi there!"), qPrintable(text));
    QCOMPARE(text.count("Hello"), 1);

    // And back: the later tokens go again.
    panel.set_time_ns(6 * kMs);
    text = panel.text_view()->toPlainText();
    QVERIFY2(text.endsWith(" Hi"), qPrintable(text));

    // Selecting the same request again is not news; another one is.
    panel.select_request(1);
    QCOMPARE(selected.count(), 1);
    panel.set_time_ns(9 * kMs);
    panel.select_request(2);
    QCOMPARE(selected.count(), 2);
    QVERIFY(panel.text_view()->toPlainText().endsWith(" x"));
    panel.select_request(-1);
    QCOMPARE(selected.count(), 3);
    QCOMPARE(panel.selected_request(), -1);
    QVERIFY(panel.text_view()->toPlainText().isEmpty());
}

void TestRequestsModel::selection_survives_refresh_that_adds_rows() {
    // Live: the panel follows the end of a growing store (time -1).
    const std::vector<events::EngineEvent> list = run_events();
    profiler::RunStore store;
    feed(store, list, 9);
    ui::RequestsPanel panel;
    panel.set_store(&store);
    QCOMPARE(panel.model()->rowCount(), 2);
    panel.select_request(2);

    for (const events::EngineEvent& e : list) {
        if (e.time_ns > 9 * kMs) {
            store.append(e);
        }
    }
    panel.refresh();
    QCOMPARE(panel.model()->rowCount(), 3);
    QCOMPARE(panel.selected_request(), 2);
    const QModelIndexList selected = panel.table()->selectionModel()->selectedRows();
    QCOMPARE(selected.size(), 1);
    QCOMPARE(selected.first().siblingAtColumn(ui::RequestsModel::IdColumn).data().toString(),
             QStringLiteral("2"));
    QVERIFY(panel.text_view()->toPlainText().endsWith(" x y"));
}

QTEST_MAIN(TestRequestsModel)
#include "tst_requests_model.moc"
