// The prefix tree shows the cached prefixes at the moment shown: a row per
// cached block under the block its prefix extends, with text, reuse and
// eviction; a newer snapshot that only adds rows inserts them (the view keeps
// its expansion). The prefix view charts cached against computed tokens per
// request and the hit rate over time.
#include "app/ui/models/prefix_tree_model.h"
#include "app/ui/views/prefix_view.h"
#include "profiler/store/run_store.h"
#include "tests/app/sample_kv_run.h"

#include <QAbstractItemModelTester>
#include <QBarCategoryAxis>
#include <QBarSet>
#include <QChart>
#include <QHorizontalStackedBarSeries>
#include <QLineSeries>
#include <QSignalSpy>
#include <QTest>
#include <QTreeView>

using kvscope::ui::PrefixTreeModel;
using kvscope::ui::PrefixView;
namespace test = kvscope::test;

namespace {

QString cell(const QAbstractItemModel& model, const QModelIndex& row, int column) {
    return model.index(row.row(), column, row.parent()).data().toString();
}

kvscope::ui::PrefixTreeSnapshot snapshot_at(const kvscope::profiler::RunStore& store, qint64 t_ms) {
    return kvscope::ui::prefix_tree_snapshot(store, t_ms * test::kMs);
}

} // namespace

class TestPrefixTreeModel : public QObject {
    Q_OBJECT

private slots:
    void init();
    void passes_the_model_tester();
    void shows_prefixes_cached_by_then_data();
    void shows_prefixes_cached_by_then();
    void tree_spells_the_prefixes();
    void reuses_and_eviction_as_of_the_time();
    void growing_inserts_rows_and_keeps_indexes();
    void going_back_resets();
    void view_charts_cached_and_computed_tokens();
    void view_keeps_the_latest_requests();
    void view_selects_request_from_tree();

private:
    kvscope::profiler::RunStore store_;
};

void TestPrefixTreeModel::init() {
    store_ = kvscope::profiler::RunStore();
    test::append_all(store_, test::sample_run_events());
}

void TestPrefixTreeModel::passes_the_model_tester() {
    PrefixTreeModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    for (const qint64 t_ms : {1000, 15, 47, 5, 1000, 25}) {
        model.set_snapshot(snapshot_at(store_, t_ms));
        if (QTest::currentTestFailed()) {
            return;
        }
    }
}

void TestPrefixTreeModel::shows_prefixes_cached_by_then_data() {
    QTest::addColumn<qint64>("t_ms");
    QTest::addColumn<int>("roots");
    QTest::addColumn<int>("shown");
    QTest::newRow("before any block is cached") << qint64(12) << 0 << 0;
    QTest::newRow("first request's blocks") << qint64(13) << 1 << 2;
    QTest::newRow("while the second request runs") << qint64(30) << 1 << 2;
    QTest::newRow("after the third request's") << qint64(47) << 2 << 4;
    QTest::newRow("the end") << qint64(1000) << 2 << 4;
}

void TestPrefixTreeModel::shows_prefixes_cached_by_then() {
    QFETCH(qint64, t_ms);
    QFETCH(int, roots);
    QFETCH(int, shown);
    PrefixTreeModel model;
    model.set_snapshot(snapshot_at(store_, t_ms));
    QCOMPARE(model.rowCount(), roots);
    QCOMPARE(model.shown_count(), shown);
}

void TestPrefixTreeModel::tree_spells_the_prefixes() {
    PrefixTreeModel model;
    model.set_snapshot(snapshot_at(store_, 1000));
    QCOMPARE(model.columnCount(), 5);
    QCOMPARE(model.headerData(0, Qt::Horizontal).toString(), QString("Prefix text"));
    QCOMPARE(model.headerData(4, Qt::Horizontal).toString(), QString("Status"));

    const QModelIndex cat = model.index(0, 0);
    QCOMPARE(cat.data().toString(), QString("The cat sat on"));
    QCOMPARE(cell(model, cat, PrefixTreeModel::block_column), QString("0"));
    QCOMPARE(cell(model, cat, PrefixTreeModel::cached_at_column), QString("0.012"));
    QCOMPARE(cell(model, cat, PrefixTreeModel::status_column), QString("cached"));
    QCOMPARE(cat.data(PrefixTreeModel::request_role).toLongLong(), 1);
    QCOMPARE(model.rowCount(cat), 1);
    const QModelIndex mat = model.index(0, 0, cat);
    QCOMPARE(mat.data().toString(), QString(" the mat. It"));
    QCOMPARE(model.parent(mat), cat);
    QCOMPARE(model.rowCount(mat), 0);
    // The row's tooltip spells the whole prefix it ends.
    QVERIFY2(mat.data(Qt::ToolTipRole).toString().contains("The cat sat on the mat. It"),
             qPrintable(mat.data(Qt::ToolTipRole).toString()));

    const QModelIndex dog = model.index(1, 0);
    QCOMPARE(dog.data().toString(), QString("A dog ran x<y"));
    QCOMPARE(cell(model, dog, PrefixTreeModel::block_column), QString("3"));
    QCOMPARE(model.rowCount(dog), 1);
    const QModelIndex slept = model.index(0, 0, dog);
    QCOMPARE(slept.data().toString(), QString(" and then it slept"));
    QCOMPARE(cell(model, slept, PrefixTreeModel::block_column), QString("1"));
    QCOMPARE(slept.data(PrefixTreeModel::node_role).toInt(), 3);
    QCOMPARE(model.index_of_node(3), slept);
    QVERIFY(!model.index(2, 0).isValid());
    QVERIFY(!model.index(0, 5).isValid());
}

void TestPrefixTreeModel::reuses_and_eviction_as_of_the_time() {
    PrefixTreeModel model;
    model.set_snapshot(snapshot_at(store_, 25));
    const QModelIndex cat = model.index(0, 0);
    const QModelIndex mat = model.index(0, 0, cat);
    QCOMPARE(model.index(0, PrefixTreeModel::reuses_column).data().toInt(), 1);
    QCOMPARE(cell(model, mat, PrefixTreeModel::reuses_column), QString("1"));
    QCOMPARE(cell(model, mat, PrefixTreeModel::status_column), QString("cached"));

    // r4 hits b0 again at 61 ms; b1's first prefix was evicted at 46 ms.
    model.set_snapshot(snapshot_at(store_, 1000));
    QCOMPARE(model.index(0, PrefixTreeModel::reuses_column).data().toInt(), 2);
    const QModelIndex evicted = model.index(0, 0, model.index(0, 0));
    QCOMPARE(cell(model, evicted, PrefixTreeModel::reuses_column), QString("1"));
    QCOMPARE(cell(model, evicted, PrefixTreeModel::status_column), QString("evicted at 0.045 s"));
    QCOMPARE(model.index(0, 0, model.index(1, 0)).data(PrefixTreeModel::request_role).toLongLong(),
             3);
    QVERIFY(evicted.data(Qt::ForegroundRole).isValid());
    QVERIFY(!model.index(0, 0).data(Qt::ForegroundRole).isValid());
}

void TestPrefixTreeModel::growing_inserts_rows_and_keeps_indexes() {
    // Live: the store grows and the model follows its end.
    kvscope::profiler::RunStore store;
    const std::vector<kvscope::events::EngineEvent> events = test::sample_run_events();
    const std::vector<kvscope::events::EngineEvent> early = test::sample_run_events(30);
    test::append_all(store, early);
    PrefixTreeModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.set_snapshot(kvscope::ui::prefix_tree_snapshot(store, store.end_ns()));
    QCOMPARE(model.shown_count(), 2);
    const QPersistentModelIndex mat = model.index(0, 0, model.index(0, 0));
    QCOMPARE(mat.data().toString(), QString(" the mat. It"));

    QSignalSpy resets(&model, &QAbstractItemModel::modelReset);
    QSignalSpy inserted(&model, &QAbstractItemModel::rowsInserted);
    QSignalSpy changed(&model, &QAbstractItemModel::dataChanged);
    for (std::size_t i = early.size(); i < events.size(); ++i) {
        store.append(events[i]);
    }
    const kvscope::ui::PrefixTreeSnapshot previous = model.snapshot();
    model.set_snapshot(kvscope::ui::prefix_tree_snapshot(store, store.end_ns(), &previous));
    QCOMPARE(resets.count(), 0);
    QVERIFY(inserted.count() >= 1);
    QCOMPARE(model.shown_count(), 4);
    QVERIFY(mat.isValid());
    QCOMPARE(mat.data().toString(), QString(" the mat. It"));
    QCOMPARE(model.index(mat.row(), PrefixTreeModel::status_column, mat.parent()).data().toString(),
             QString("evicted at 0.045 s"));
    QVERIFY(changed.count() >= 2); // b1 evicted, b0 hit again
    QCOMPARE(model.index(1, 0).data().toString(), QString("A dog ran x<y"));
    QCOMPARE(model.rowCount(model.index(1, 0)), 1);

    // The same snapshot again: nothing to tell the view.
    resets.clear();
    inserted.clear();
    changed.clear();
    model.set_snapshot(kvscope::ui::prefix_tree_snapshot(store, store.end_ns()));
    QCOMPARE(resets.count() + inserted.count() + changed.count(), 0);
}

void TestPrefixTreeModel::going_back_resets() {
    PrefixTreeModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.set_snapshot(snapshot_at(store_, 1000));
    QSignalSpy resets(&model, &QAbstractItemModel::modelReset);
    model.set_snapshot(snapshot_at(store_, 20));
    QCOMPARE(resets.count(), 1);
    QCOMPARE(model.shown_count(), 2);
    QCOMPARE(model.rowCount(), 1);
}

void TestPrefixTreeModel::view_charts_cached_and_computed_tokens() {
    PrefixView view;
    view.resize(900, 700);
    view.set_store(&store_);
    view.set_time_ns(25 * test::kMs);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    QCOMPARE(view.shown_requests(), (std::vector<qint64>{1, 2}));
    auto* bars =
        qobject_cast<QHorizontalStackedBarSeries*>(view.requests_chart()->series().value(0));
    QVERIFY(bars != nullptr);
    QCOMPARE(bars->barSets().size(), 2);
    const QBarSet* cached = bars->barSets()[0];
    const QBarSet* computed = bars->barSets()[1];
    QCOMPARE(cached->label(), QString("Cached"));
    QCOMPARE(cached->count(), 2);
    QCOMPARE(cached->at(0), 0.0);
    QCOMPARE(cached->at(1), 8.0);
    QCOMPARE(computed->at(0), 8.0);
    QCOMPARE(computed->at(1), 2.0);
    auto* categories =
        qobject_cast<QBarCategoryAxis*>(view.requests_chart()->axes(Qt::Vertical).value(0));
    QVERIFY(categories != nullptr);
    QCOMPARE(categories->categories(), (QStringList{"#1", "#2"}));
    QCOMPARE(view.tree_model()->shown_count(), 2);

    // The hit rate over the whole run, the cursor at the time shown.
    QLineSeries* rate = nullptr;
    QLineSeries* cursor = nullptr;
    for (QAbstractSeries* series : view.hit_rate_chart()->series()) {
        (series->name() == "Shown time" ? cursor : rate) = qobject_cast<QLineSeries*>(series);
    }
    QVERIFY(rate != nullptr && cursor != nullptr);
    QCOMPARE(rate->count(), 4); // one sample per first admission
    QCOMPARE(rate->at(1).y(), 100.0 * 8 / 18);
    QCOMPARE(rate->at(3).y(), 100.0 * 12 / 32);
    QCOMPARE(cursor->at(0).x(), 0.024);

    view.set_time_ns(1000 * test::kMs);
    QCOMPARE(view.shown_requests(), (std::vector<qint64>{1, 2, 3, 4}));
    QCOMPARE(cached->at(3), 4.0);
    QCOMPARE(view.tree_model()->shown_count(), 4);
    QCOMPARE(view.contextMenuPolicy(), Qt::ActionsContextMenu);
}

void TestPrefixTreeModel::view_keeps_the_latest_requests() {
    kvscope::profiler::RunStore store;
    store.append(test::kv_event(1, kvscope::events::EventKind::run_config, -1, -1, 64, 16));
    // Admitted in the reverse of arrival order: the chart goes by admission.
    for (int r = 0; r < 100; ++r) {
        store.append(test::kv_event(2, kvscope::events::EventKind::request_arrived, r, -1, 20));
    }
    for (int r = 99; r >= 0; --r) {
        store.append(test::kv_event(3 + (99 - r), kvscope::events::EventKind::request_admitted, r,
                                    -1, r % 16, 20 - r % 16));
    }
    PrefixView view;
    view.set_store(&store);
    const std::vector<qint64> shown = view.shown_requests();
    QCOMPARE(shown.size(), PrefixView::kMaxRequests);
    QCOMPARE(shown.front(), qint64(63));
    QCOMPARE(shown.back(), qint64(0));
    // Live growth: one more request admitted.
    store.append(test::kv_event(200, kvscope::events::EventKind::request_arrived, 100, -1, 20));
    store.append(test::kv_event(201, kvscope::events::EventKind::request_admitted, 100, -1, 4, 16));
    view.refresh();
    QCOMPARE(view.shown_requests().back(), qint64(100));
    QCOMPARE(view.shown_requests().front(), qint64(62));
}

void TestPrefixTreeModel::view_selects_request_from_tree() {
    PrefixView view;
    view.resize(900, 700);
    view.set_store(&store_);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    QSignalSpy selected(&view, &PrefixView::request_selected);
    QTreeView* tree = view.tree_view();
    const QRect row = tree->visualRect(view.tree_model()->index(1, 0));
    QVERIFY(row.isValid());
    QTest::mouseClick(tree->viewport(), Qt::LeftButton, {}, row.center());
    QCOMPARE(selected.count(), 1);
    QCOMPARE(selected.at(0).at(0).toLongLong(), 3);
}

QTEST_MAIN(TestPrefixTreeModel)
#include "tst_prefix_tree_model.moc"
