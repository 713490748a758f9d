// Time by name in the app: the summary model's numbers for CPU op slices
// against a hand computation (all spans, and only those ended by a moment),
// GPU tracks split into kernels, copies and NVTX ranges, and the panel's
// coalesced live updates growing the table without a reset.
#include "app/ui/models/kernel_summary_model.h"
#include "app/ui/panels/kernel_summary_panel.h"
#include "engine/events/engine_event.h"
#include "profiler/store/run_store.h"

#include <cmath>

#include <QAbstractItemModelTester>
#include <QElapsedTimer>
#include <QSignalSpy>
#include <QTest>

namespace events = kvscope::events;
namespace profiler = kvscope::profiler;
namespace ui = kvscope::ui;

namespace {

events::EngineEvent op_slice(qint64 begin_ns, qint64 end_ns, const std::string& name,
                             qint64 layer = 0, qint64 step = 0) {
    events::EngineEvent e;
    e.time_ns = begin_ns;
    e.kind = events::EventKind::op_slice;
    e.a = end_ns;
    e.b = layer;
    e.c = step;
    e.text = name;
    return e;
}

// matmul: 1000, 3000, 2000 ns; attention: 4000, 6000 ns; rmsnorm: 500 ns.
void feed_ops(profiler::RunStore& store) {
    store.append(op_slice(1000, 2000, "matmul", 0));
    store.append(op_slice(3000, 6000, "matmul", 1));
    store.append(op_slice(7000, 9000, "matmul", 2));
    store.append(op_slice(10000, 14000, "attention", 0));
    store.append(op_slice(15000, 15500, "rmsnorm", -1));
    store.append(op_slice(20000, 26000, "attention", 1));
}

int row_named(const QAbstractItemModel& model, const QString& name) {
    for (int row = 0; row < model.rowCount(); ++row) {
        if (model.index(row, ui::KernelSummaryModel::NameColumn).data().toString() == name) {
            return row;
        }
    }
    return -1;
}

double number(const QAbstractItemModel& model, int row, int column) {
    return model.index(row, column).data(ui::KernelSummaryModel::SortRole).toDouble();
}

} // namespace

class TestKernelSummary : public QObject {
    Q_OBJECT

private slots:
    void cpu_ops_data();
    void cpu_ops();
    void gpu_tracks_by_kind();
    void panel_updates_live_without_reset();
};

void TestKernelSummary::cpu_ops_data() {
    QTest::addColumn<qint64>("until_ns");
    QTest::addColumn<QString>("name");
    QTest::addColumn<int>("instances");
    QTest::addColumn<double>("total_ms");
    QTest::addColumn<double>("percent");
    QTest::addColumn<double>("mean_us");
    QTest::addColumn<double>("median_us");
    QTest::addColumn<double>("min_us");
    QTest::addColumn<double>("max_us");
    QTest::addColumn<double>("stddev_us"); // sample standard deviation

    // All spans: 16500 ns in all.
    QTest::newRow("matmul, all") << qint64{-1} << "matmul" << 3 << 0.006 << 100 * 6000.0 / 16500
                                 << 2.0 << 2.0 << 1.0 << 3.0 << 1.0;
    QTest::newRow("attention, all")
        << qint64{-1} << "attention" << 2 << 0.010 << 100 * 10000.0 / 16500 << 5.0 << 5.0 << 4.0
        << 6.0 << std::sqrt(2.0);
    QTest::newRow("rmsnorm, all") << qint64{-1} << "rmsnorm" << 1 << 0.0005 << 100 * 500.0 / 16500
                                  << 0.5 << 0.5 << 0.5 << 0.5 << 0.0;
    // At 24 us the second attention has begun but not ended: 10500 ns in all.
    QTest::newRow("attention, at 24 us") << qint64{24000} << "attention" << 1 << 0.004
                                         << 100 * 4000.0 / 10500 << 4.0 << 4.0 << 4.0 << 4.0 << 0.0;
    QTest::newRow("matmul, at 24 us") << qint64{24000} << "matmul" << 3 << 0.006
                                      << 100 * 6000.0 / 10500 << 2.0 << 2.0 << 1.0 << 3.0 << 1.0;
    // At 8 us only two matmuls ended, the only op so far.
    QTest::newRow("matmul, at 8 us") << qint64{8000} << "matmul" << 2 << 0.004 << 100.0 << 2.0
                                     << 2.0 << 1.0 << 3.0 << std::sqrt(2.0);
}

void TestKernelSummary::cpu_ops() {
    QFETCH(qint64, until_ns);
    QFETCH(QString, name);
    QFETCH(int, instances);
    QFETCH(double, total_ms);
    QFETCH(double, percent);
    QFETCH(double, mean_us);
    QFETCH(double, median_us);
    QFETCH(double, min_us);
    QFETCH(double, max_us);
    QFETCH(double, stddev_us);

    profiler::RunStore store;
    feed_ops(store);
    ui::KernelSummaryModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
    model.set_rows(ui::kernel_summary_rows(ui::live_time_summaries(store, until_ns)));

    const int row = row_named(model, name);
    QVERIFY(row >= 0);
    using M = ui::KernelSummaryModel;
    QCOMPARE(model.index(row, M::KindColumn).data().toString(), QStringLiteral("CPU op"));
    QCOMPARE(model.index(row, M::InstancesColumn).data(M::SortRole).toInt(), instances);
    const auto close = [](double a, double b) {
        return std::abs(a - b) < 1e-6 * (1 + std::abs(b));
    };
    QVERIFY(close(number(model, row, M::TotalColumn), total_ms));
    QVERIFY2(close(number(model, row, M::PercentColumn), percent),
             qPrintable(QString::number(number(model, row, M::PercentColumn))));
    QVERIFY(close(number(model, row, M::MeanColumn), mean_us));
    QVERIFY(close(number(model, row, M::MedianColumn), median_us));
    QVERIFY(close(number(model, row, M::MinColumn), min_us));
    QVERIFY(close(number(model, row, M::MaxColumn), max_us));
    QVERIFY2(close(number(model, row, M::StdDevColumn), stddev_us),
             qPrintable(QString::number(number(model, row, M::StdDevColumn))));
    // The text shows the same numbers.
    QCOMPARE(model.index(row, M::TotalColumn).data().toString(), QString::number(total_ms, 'f', 3));
    QCOMPARE(model.index(row, M::MeanColumn).data().toString(), QString::number(mean_us, 'f', 2));
}

void TestKernelSummary::gpu_tracks_by_kind() {
    profiler::RunStore store;
    feed_ops(store);
    const std::int32_t gemm = store.intern("gemm_kernel");
    const std::int32_t copy = store.intern("[CUDA memcpy HtoD]");
    const std::int32_t step = store.intern("step");
    store.add_gpu_track(
        {"GPU 0 stream 7", {{100, 400, gemm, 7}, {500, 600, copy, 7}, {700, 900, gemm, 7}}});
    store.add_gpu_track({"GPU 0 stream 8", {{150, 250, gemm, 8}}});
    store.add_gpu_track({"NVTX thread 1 depth 0", {{50, 1000, step, 0}}});

    const profiler::TimeSummaries s = ui::live_time_summaries(store, -1);
    QCOMPARE(s.cpu_ops.size(), std::size_t{3});
    QCOMPARE(s.gpu_kernels.size(), std::size_t{1});
    QCOMPARE(s.gpu_kernels[0].name, std::string("gemm_kernel"));
    QCOMPARE(s.gpu_kernels[0].instances, std::int64_t{3}); // over both streams
    QCOMPARE(s.gpu_kernels[0].total_ns, std::int64_t{300 + 200 + 100});
    QCOMPARE(s.gpu_kernels[0].percent, 100.0);
    QCOMPARE(s.gpu_memory_ops.size(), std::size_t{1});
    QCOMPARE(s.gpu_memory_ops[0].total_ns, std::int64_t{100});
    QCOMPARE(s.nvtx_ranges.size(), std::size_t{1});
    QCOMPARE(s.nvtx_ranges[0].name, std::string("step"));

    ui::KernelSummaryModel model;
    model.set_rows(ui::kernel_summary_rows(s));
    QCOMPARE(model.rowCount(), 6);
    using M = ui::KernelSummaryModel;
    QCOMPARE(model.index(row_named(model, "gemm_kernel"), M::KindColumn).data().toString(),
             QStringLiteral("GPU kernel"));
    QCOMPARE(model.index(row_named(model, "[CUDA memcpy HtoD]"), M::KindColumn).data().toString(),
             QStringLiteral("copy"));
    QCOMPARE(model.index(row_named(model, "step"), M::KindColumn).data().toString(),
             QStringLiteral("NVTX"));

    // Only spans ended by the moment: at 300 ns, only the gemm on stream 8.
    const profiler::TimeSummaries early = ui::live_time_summaries(store, 300);
    QCOMPARE(early.gpu_kernels.size(), std::size_t{1});
    QCOMPARE(early.gpu_kernels[0].instances, std::int64_t{1});
    QCOMPARE(early.gpu_kernels[0].total_ns, std::int64_t{100});
    QVERIFY(early.gpu_memory_ops.empty());
    QVERIFY(early.nvtx_ranges.empty());
    QVERIFY(early.cpu_ops.empty());
}

void TestKernelSummary::panel_updates_live_without_reset() {
    profiler::RunStore store;
    store.append(op_slice(1000, 2000, "matmul"));
    ui::KernelSummaryPanel panel;
    QAbstractItemModelTester tester(panel.model(),
                                    QAbstractItemModelTester::FailureReportingMode::Fatal);
    QSignalSpy resets(panel.model(), &QAbstractItemModel::modelReset);
    QSignalSpy inserts(panel.model(), &QAbstractItemModel::rowsInserted);
    QSignalSpy changes(panel.model(), &QAbstractItemModel::dataChanged);
    panel.set_store(&store);
    QCOMPARE(panel.model()->rowCount(), 1);
    QCOMPARE(inserts.count(), 1);

    // More spans arrive right away: the recompute waits for the interval,
    // then shows them, inserting the new name and changing the old one's row.
    QElapsedTimer clock;
    clock.start();
    store.append(op_slice(3000, 6000, "matmul"));
    store.append(op_slice(7000, 7500, "softmax"));
    panel.refresh();
    const bool deferred = row_named(*panel.model(), "softmax") < 0;
    QTRY_VERIFY(row_named(*panel.model(), "softmax") >= 0);
    // Deferred, unless this machine took the whole interval to get here.
    QVERIFY(deferred || clock.elapsed() >= ui::KernelSummaryPanel::kMinInterval_ms);
    QCOMPARE(resets.count(), 0);
    QCOMPARE(inserts.count(), 2);
    QVERIFY(changes.count() >= 1);
    const int matmul = row_named(*panel.model(), "matmul");
    QCOMPARE(number(*panel.model(), matmul, ui::KernelSummaryModel::InstancesColumn), 2.0);

    // Back in time, before softmax ran: a name goes, so the model resets.
    panel.set_time_ns(6500);
    QTRY_COMPARE(panel.model()->rowCount(), 1);
    QCOMPARE(resets.count(), 1);
}

QTEST_MAIN(TestKernelSummary)
#include "tst_kernel_summary.moc"
