// Comparing recordings in the app: the compare model shows the CLI's rows and
// cells with coloured verdicts (QAbstractItemModelTester on it), the view
// flags a slower recording written by the recorder as regressed, and bad
// files give a clear message instead of a crash.
#include "app/ui/models/compare_model.h"
#include "app/ui/panels/compare_view.h"
#include "engine/events/engine_event.h"
#include "profiler/recording/recorder.h"

#include <fstream>

#include <QAbstractItemModelTester>
#include <QApplication>
#include <QBrush>
#include <QDir>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QPushButton>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>
#include <QTimer>

namespace events = kvscope::events;
namespace profiler = kvscope::profiler;
namespace ui = kvscope::ui;

namespace {

constexpr int kTimeout_ms = 30000; // two small files; generous for a loaded machine

std::vector<double> spread(double median, int n) {
    std::vector<double> v;
    for (int i = 0; i < n; ++i) {
        v.push_back(median - 0.45 + 0.1 * (i % 10));
    }
    return v;
}

profiler::RecordingStats stats(double step_ms, double ttft_ms, double hit_rate) {
    profiler::RecordingStats s;
    s.step_ms_samples = spread(step_ms, 60);
    s.ttft_ms_samples = spread(ttft_ms, 16);
    s.tpot_ms_samples = spread(25, 16);
    s.prefix_hit_rate = hit_rate;
    return s;
}

int row_of_metric(const QAbstractItemModel& model, const QString& metric) {
    for (int row = 0; row < model.rowCount(); ++row) {
        if (model.index(row, ui::CompareModel::MetricColumn).data().toString() == metric) {
            return row;
        }
    }
    return -1;
}

QString verdict_of(const QAbstractItemModel& model, const QString& metric) {
    const int row = row_of_metric(model, metric);
    return row < 0 ? QString()
                   : model.index(row, ui::CompareModel::VerdictColumn).data().toString().toLower();
}

// A recording of `steps` steps of about `step_ms` each (a little jitter, so
// the samples are not all ties).
void write_recording(const QString& path, int steps, double step_ms) {
    profiler::Recorder recorder(path.toStdString(), {{"model_name", "test"}});
    qint64 t = 1'000'000;
    for (int i = 0; i < steps; ++i) {
        events::EngineEvent begin;
        begin.time_ns = t;
        begin.kind = events::EventKind::step_begin;
        begin.a = i;
        begin.b = 1;
        begin.c = 1;
        recorder.on_event(begin);
        t += static_cast<qint64>((step_ms + 0.05 * (i % 7)) * 1e6);
        events::EngineEvent end = begin;
        end.time_ns = t;
        end.kind = events::EventKind::step_end;
        end.b = 0;
        recorder.on_event(end);
        t += 100'000;
    }
    recorder.close();
}

// Clicks `button` and, in the file dialog it opens, chooses `path`.
bool choose_in_dialog(QPushButton* button, const QString& path) {
    if (button == nullptr) {
        return false;
    }
    bool chosen = false;
    QTimer poll;
    QObject::connect(&poll, &QTimer::timeout, [&] {
        auto* dialog = qobject_cast<QFileDialog*>(QApplication::activeModalWidget());
        if (dialog == nullptr) {
            return; // not open yet
        }
        poll.stop();
        dialog->setDirectory(path);
        chosen = true;
        static_cast<QDialog*>(dialog)->accept(); // QFileDialog::accept, through the public base
    });
    poll.start(20);
    button->click(); // returns once the dialog has closed
    return chosen;
}

} // namespace

class TestCompareView : public QObject {
    Q_OBJECT

private slots:
    void model_shows_the_cli_table();
    void regression_summary_counts();
    void slower_recording_is_regressed();
    void bad_files_give_a_message_data();
    void bad_files_give_a_message();
};

void TestCompareView::model_shows_the_cli_table() {
    ui::CompareModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
    const auto rows = profiler::compare_stats(stats(20, 300, 0.5), stats(26, 300, 0.5), {});
    model.set_comparison(rows);
    QCOMPARE(model.rowCount(), static_cast<int>(rows.size()));
    QCOMPARE(model.columnCount(), 10);
    QCOMPARE(model.headerData(ui::CompareModel::PValueColumn, Qt::Horizontal).toString(),
             QStringLiteral("p"));
    QCOMPARE(model.headerData(ui::CompareModel::IntervalColumn, Qt::Horizontal).toString(),
             QStringLiteral("interval"));
    QCOMPARE(model.headerData(ui::CompareModel::RobustColumn, Qt::Horizontal).toString(),
             QStringLiteral("robust"));

    // Step time went from a median of 20 to 26 ms: +30%, regressed, in red.
    const int step = row_of_metric(model, "step time");
    QVERIFY(step >= 0);
    const auto cell = [&](int row, int column) {
        return model.index(row, column).data().toString();
    };
    QCOMPARE(cell(step, ui::CompareModel::UnitColumn), QStringLiteral("ms"));
    QCOMPARE(cell(step, ui::CompareModel::BaseColumn), QStringLiteral("20.000"));
    QCOMPARE(cell(step, ui::CompareModel::NewColumn), QStringLiteral("26.000"));
    QCOMPARE(cell(step, ui::CompareModel::ChangeColumn), QStringLiteral("+30.0%"));
    QCOMPARE(cell(step, ui::CompareModel::SamplesColumn), QStringLiteral("60/60"));
    // One run a side: no interval; wall clock, so not noise-robust, and the
    // tooltip says what to trust instead.
    QCOMPARE(cell(step, ui::CompareModel::IntervalColumn), QStringLiteral("-"));
    QCOMPARE(cell(step, ui::CompareModel::RobustColumn), QStringLiteral("no"));
    QVERIFY(model.index(step, ui::CompareModel::RobustColumn)
                .data(Qt::ToolTipRole)
                .toString()
                .contains("kvscope gate"));
    QCOMPARE(verdict_of(model, "step time"), QStringLiteral("regressed"));
    QCOMPARE(model.index(step, ui::CompareModel::VerdictColumn)
                 .data(Qt::ForegroundRole)
                 .value<QBrush>()
                 .color(),
             QColor(0xc6, 0x28, 0x28));
    const double p = model.index(step, ui::CompareModel::PValueColumn)
                         .data(ui::CompareModel::SortRole)
                         .toDouble();
    QVERIFY(p >= 0 && p < 0.01);

    // Unchanged timings are "same", uncoloured; single numbers have no test.
    QCOMPARE(verdict_of(model, "time to first token"), QStringLiteral("same"));
    const int ttft = row_of_metric(model, "time to first token");
    QVERIFY(!model.index(ttft, ui::CompareModel::VerdictColumn).data(Qt::ForegroundRole).isValid());
    const int preemptions = row_of_metric(model, "preemptions");
    QCOMPARE(cell(preemptions, ui::CompareModel::PValueColumn), QStringLiteral("-"));
    QCOMPARE(cell(preemptions, ui::CompareModel::SamplesColumn), QStringLiteral("-"));
    QCOMPARE(model.regressions(), 1);

    // Every cell, as text worked out by hand from the samples above.
    // spread(m, n) holds m - 0.45 + 0.1 * (i % 10): ten values 0.1 apart.
    // Step time: 60 samples, each value 6 times; the median is the mean of
    // the 30th and 31st, (m - 0.05 + m + 0.05) / 2 = m, so 20.000 and 26.000,
    // +30.0%. The samples do not overlap (U = 3600, mean 1800); 20 tie groups
    // of 6 give sum(t^3 - t) = 4200, variance 3600 / 12 * (121 - 4200 /
    // (120 * 119)) = 36211.76, z = (1800 - 0.5) / 190.29 = 9.457 and
    // p = Q(9.457) = 1.59e-21, printed "%.2g": 1.6e-21.
    // TTFT and TPOT: 16 samples (i % 10 = 0..5 twice, 6..9 once), the median
    // is the mean of 8th and 9th, m - 0.15 and m - 0.05: m - 0.1, so 299.900
    // and 24.900. Both sides are equal, U is its mean 128; tie groups: 6 of
    // 4 and 4 of 2, sum(t^3 - t) = 384, variance 256 / 12 * (33 - 384 /
    // (32 * 31)) = 695.74, z = -0.5 / 26.377 = -0.019, p = Q(-0.019) = 0.5076:
    // 0.51 either way round.
    // The hit rate and the work figures are single numbers: no test, no
    // samples; the work is compared exactly. These samples carry no step
    // costs: CPU time, counters and KV bytes read are "not measured".
    // One run a side: no interval anywhere.
    const std::vector<QStringList> expected{
        {"step time", "ms", "20.000", "26.000", "+30.0%", "-", "1.6e-21", "60/60", "no",
         "REGRESSED"},
        {"time to first token", "ms", "299.900", "299.900", "+0.0%", "-", "0.51", "16/16", "no",
         "same"},
        {"time per output token", "ms", "24.900", "24.900", "+0.0%", "-", "0.51", "16/16", "no",
         "same"},
        {"engine CPU time", "ms", "-", "-", "-", "-", "-", "-", "yes", "not measured"},
        {"instructions", "", "-", "-", "-", "-", "-", "-", "yes", "not measured"},
        {"cycles", "", "-", "-", "-", "-", "-", "-", "no", "not measured"},
        {"prefix hit rate", "%", "50.000", "50.000", "+0.0%", "-", "-", "-", "yes", "same"},
        {"computed tokens", "", "0", "0", "+0.0%", "-", "-", "-", "exact", "same"},
        {"generated tokens", "", "0", "0", "+0.0%", "-", "-", "-", "exact", "same"},
        {"prefix hit tokens", "", "0", "0", "+0.0%", "-", "-", "-", "exact", "same"},
        {"KV bytes written", "B", "0", "0", "+0.0%", "-", "-", "-", "exact", "same"},
        {"KV bytes read", "B", "-", "-", "-", "-", "-", "-", "exact", "not measured"},
        {"preemptions", "", "0", "0", "+0.0%", "-", "-", "-", "exact", "same"},
        {"peak used blocks", "", "0", "0", "+0.0%", "-", "-", "-", "exact", "same"},
    };
    QCOMPARE(model.rowCount(), static_cast<int>(expected.size()));
    for (int row = 0; row < model.rowCount(); ++row) {
        for (int column = 0; column < model.columnCount(); ++column) {
            QCOMPARE(cell(row, column),
                     expected[static_cast<std::size_t>(row)][static_cast<qsizetype>(column)]);
        }
    }

    // The other way round it is an improvement, in green.
    model.set_comparison(profiler::compare_stats(stats(26, 300, 0.5), stats(20, 300, 0.5), {}));
    QCOMPARE(verdict_of(model, "step time"), QStringLiteral("improved"));
    QCOMPARE(model.index(row_of_metric(model, "step time"), ui::CompareModel::VerdictColumn)
                 .data(Qt::ForegroundRole)
                 .value<QBrush>()
                 .color(),
             QColor(0x2e, 0x7d, 0x32));
    QCOMPARE(model.regressions(), 0);
    model.clear();
    QCOMPARE(model.rowCount(), 0);
}

void TestCompareView::regression_summary_counts() {
    QCOMPARE(ui::regression_summary(0), QStringLiteral("No regression"));
    QCOMPARE(ui::regression_summary(1), QStringLiteral("1 regression"));
    QCOMPARE(ui::regression_summary(3), QStringLiteral("3 regressions"));
    // A slower step and a lower hit rate: two.
    const auto rows = profiler::compare_stats(stats(20, 300, 0.6), stats(26, 300, 0.5), {});
    QCOMPARE(profiler::count_regressions(rows), 2);
}

void TestCompareView::slower_recording_is_regressed() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const QString base = dir.filePath("base.sqlite");
    const QString slow = dir.filePath("slow.sqlite");
    write_recording(base, 40, 10);
    write_recording(slow, 40, 15);

    ui::CompareView view;
    QSignalSpy finished(&view, &ui::CompareView::finished);
    view.set_files(base, slow);
    view.start();
    QVERIFY(view.is_running());
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, kTimeout_ms);
    QVERIFY2(view.error_text().isEmpty(), qPrintable(view.error_text()));
    QVERIFY(view.result() != nullptr);
    QCOMPARE(view.result()->base.size(), std::size_t{1});
    QCOMPARE(view.result()->base.front().steps, std::int64_t{40});
    QCOMPARE(verdict_of(*view.model(), "step time"), QStringLiteral("regressed"));
    QCOMPARE(view.summary_text(), QStringLiteral("1 regression"));

    // The same file on both sides: no regression.
    view.set_files(base, base);
    view.start();
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 2, kTimeout_ms);
    QCOMPARE(verdict_of(*view.model(), "step time"), QStringLiteral("same"));
    QCOMPARE(view.summary_text(), QStringLiteral("No regression"));

    // Folders of repetitions (as kvscope gate writes them) on both sides.
    const QDir root(QFileInfo(base).absolutePath());
    for (const char* side : {"rounds-base", "rounds-new"}) {
        QVERIFY(root.mkpath(side));
        for (const char* round : {"round-001.sqlite", "round-002.sqlite"}) {
            QVERIFY(QFile::copy(base, root.filePath(QString(side) + "/" + round)));
        }
    }
    // Chosen with the Folder… buttons, as a user picks kvscope gate's folders.
    view.set_files(QString(), QString());
    QVERIFY(choose_in_dialog(view.findChild<QPushButton*>("baseFileFolder"),
                             root.filePath("rounds-base")));
    QVERIFY(choose_in_dialog(view.findChild<QPushButton*>("newFileFolder"),
                             root.filePath("rounds-new")));
    QCOMPARE(QDir(view.base_file()), QDir(root.filePath("rounds-base")));
    QCOMPARE(QDir(view.new_file()), QDir(root.filePath("rounds-new")));
    view.start();
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 3, kTimeout_ms);
    QVERIFY2(view.error_text().isEmpty(), qPrintable(view.error_text()));
    QCOMPARE(view.result()->base.size(), std::size_t{2});
    const int step = row_of_metric(*view.model(), "step time");
    QCOMPARE(view.model()->index(step, ui::CompareModel::SamplesColumn).data().toString(),
             QStringLiteral("2 rounds"));
    QTRY_VERIFY(!view.is_running());
}

void TestCompareView::bad_files_give_a_message_data() {
    QTest::addColumn<QString>("base");
    QTest::addColumn<QString>("now");
    QTest::addColumn<QStringList>("message_parts");

    QTest::newRow("both missing") << "missing-base.sqlite"
                                  << "missing-new.sqlite"
                                  << QStringList{"base recording", "missing-base.sqlite"};
    QTest::newRow("new not a recording")
        << "good.sqlite"
        << "text.sqlite" << QStringList{"new recording", "not a kvscope"};
    QTest::newRow("no files") << ""
                              << "" << QStringList{"Choose"};
}

void TestCompareView::bad_files_give_a_message() {
    QFETCH(QString, base);
    QFETCH(QString, now);
    QFETCH(QStringList, message_parts);

    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    write_recording(dir.filePath("good.sqlite"), 5, 1);
    std::ofstream(dir.filePath("text.sqlite").toStdString()) << "not a database\n";
    const auto in_dir = [&](const QString& name) {
        return name.isEmpty() ? name : dir.filePath(name);
    };

    ui::CompareView view;
    QSignalSpy finished(&view, &ui::CompareView::finished);
    view.set_files(in_dir(base), in_dir(now));
    view.start();
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, kTimeout_ms);
    for (const QString& part : message_parts) {
        QVERIFY2(view.error_text().contains(part), qPrintable(view.error_text()));
    }
    QVERIFY(view.result() == nullptr);
    QCOMPARE(view.model()->rowCount(), 0);
    QCOMPARE(view.summary_text(), QString());
}

QTEST_MAIN(TestCompareView)
#include "tst_compare_view.moc"
