// File > Simulate trace…: the dialog replays the head of Mooncake's
// conversation trace (tests/engine/data) at several capacities and both
// cache policies on worker threads, its rows equal to what kvscope simulate
// replays from the same form's values; a wrong form says why; Cancel ends the
// replays early; "Show in views" records a configuration and the main window
// opens the recording in its views.
#include "app/ui/main_window.h"
#include "app/ui/panels/simulate_dialog.h"
#include "engine/model_path.h"
#include "profiler/store/run_store.h"
#include "tests/support/run_process.h"

#include <QChart>
#include <QChartView>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSignalSpy>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTest>

using namespace kvscope;

namespace {

const QString kTrace =
    QStringLiteral(KVSCOPE_SOURCE_DIR "/tests/engine/data/mooncake_conversation_head300.jsonl");

} // namespace

class TestSimulateDialog : public QObject {
    Q_OBJECT

private slots:
    void replaysEachConfiguration() {
        ui::SimulateDialog dialog;
        dialog.set_trace(kTrace);
        dialog.set_capacities("20000, 2000");
        dialog.set_sweep(false);
        dialog.set_policies(true, true);
        dialog.set_max_requests(120);
        QSignalSpy done(&dialog, &ui::SimulateDialog::finished_replays);
        QVERIFY(dialog.start());
        QVERIFY(dialog.running());
        QVERIFY(done.wait(120'000));
        QCOMPARE(dialog.table()->rowCount(), 4);
        QCOMPARE(dialog.results().size(), std::size_t{4});
        QCOMPARE(dialog.table()->item(3, 0)->text(), QString("LFU"));
        QCOMPARE(dialog.table()->item(3, 1)->text(), QString("2000"));
        QCOMPARE(dialog.chart()->chart()->series().size(), 2);
        // The last row against the same replay asked of kvscope simulate,
        // whose defaults (the serving limits, the cost model) the dialog's
        // must equal: the form's inputs alone decide the result.
        const auto cli =
            kvscope::test::run_process(QStringLiteral(KVSCOPE_CLI_PATH),
                                       {"simulate", kTrace, "--capacity", "2000", "--cache-policy",
                                        "lfu", "--max-requests", "120", "--json"});
        QVERIFY2(cli.exit_code == 0, qPrintable(cli.err));
        const QJsonObject direct = QJsonDocument::fromJson(cli.out.toUtf8()).object();
        QCOMPARE(direct["requests"].toInt(), 120);
        QVERIFY(direct["hit_tokens"].toDouble() > 0);
        QCOMPARE(double(dialog.results()[3].hit_tokens), direct["hit_tokens"].toDouble());
        QCOMPARE(dialog.results()[3].ttft_s.p99, direct["ttft_s"].toObject()["p99"].toDouble());
        QCOMPARE(
            dialog.table()->item(3, 4)->text(),
            QString::number(100 * direct["hit_ratio"].toObject()["tokens"].toDouble(), 'f', 2) +
                " %");
    }

    // A kvscope trace with text prompts: read through the model's tokenizer,
    // as kvscope simulate reads it.
    void readsTextPrompts() {
        const std::string problem = model_path_problem(resolve_model_path());
        if (!problem.empty()) {
            QSKIP(qPrintable("text prompts need the model's tokenizer (run scripts/setup.sh): " +
                             QString::fromStdString(problem)));
        }
        QTemporaryDir dir;
        const QString path = dir.filePath("text.jsonl");
        QFile file(path);
        QVERIFY(file.open(QIODevice::WriteOnly));
        for (int i = 0; i < 3; ++i) {
            file.write(QByteArray("{\"arrival\": ") + QByteArray::number(i * 30) +
                       ", \"prompt\": \"The same long opening sentence about caches and "
                       "memory and paging, then question " +
                       QByteArray::number(i) + "\", \"max_tokens\": 3}\n");
        }
        file.close();
        ui::SimulateDialog dialog;
        dialog.set_trace(path);
        dialog.set_capacities("1000");
        dialog.set_sweep(false);
        QSignalSpy done(&dialog, &ui::SimulateDialog::finished_replays);
        QVERIFY(dialog.start());
        QVERIFY2(done.wait(60'000), qPrintable(dialog.problem()));
        QCOMPARE(dialog.results().front().requests, std::int64_t{3});
        QVERIFY(dialog.results().front().prompt_tokens > 3 * 10);
    }

    void sweepsTenCapacities() {
        ui::SimulateDialog dialog;
        dialog.set_trace(kTrace);
        dialog.set_capacities("20000");
        dialog.set_sweep(true);
        dialog.set_max_requests(30);
        QSignalSpy done(&dialog, &ui::SimulateDialog::finished_replays);
        QVERIFY(dialog.start());
        QVERIFY(done.wait(120'000));
        QCOMPARE(dialog.table()->rowCount(), 10);
        QCOMPARE(dialog.configs().front().num_blocks, 20000 >> 9);
    }

    void wrongFormsSayWhy() {
        ui::SimulateDialog dialog;
        QVERIFY(!dialog.start());
        QVERIFY(dialog.problem().contains("trace"));
        dialog.set_trace(kTrace);
        dialog.set_capacities("lots");
        QVERIFY(!dialog.start());
        QVERIFY(dialog.problem().contains("'lots'"));
        dialog.set_capacities("100");
        dialog.set_policies(false, false);
        QVERIFY(!dialog.start());
        QVERIFY(dialog.problem().contains("policy"));
        // A trace that is not one: the reader's FILE:LINE error, shown.
        dialog.set_policies(true, false);
        dialog.set_trace(KVSCOPE_SOURCE_DIR "/README.md");
        QSignalSpy failed(&dialog, &ui::SimulateDialog::failed);
        QVERIFY(dialog.start());
        QVERIFY(failed.wait(30'000));
        QVERIFY2(dialog.problem().contains("README.md:"), qPrintable(dialog.problem()));
        QVERIFY(!dialog.running());
    }

    void cancelEndsTheReplays() {
        ui::SimulateDialog dialog;
        dialog.set_trace(kTrace);
        dialog.set_capacities("200000");
        dialog.set_sweep(true);
        dialog.set_policies(true, true);
        QSignalSpy done(&dialog, &ui::SimulateDialog::finished_replays);
        QVERIFY(dialog.start());
        dialog.cancel();
        QVERIFY(done.wait(60'000));
        QVERIFY(!dialog.running());
        std::int64_t replayed = 0;
        for (const sim::SimulationResult& r : dialog.results()) {
            replayed += r.requests;
        }
        QVERIFY(replayed < 20 * 300); // not every configuration ran through
    }

    void showsAConfigurationInTheViews() {
        ui::MainWindow window;
        ui::SimulateDialog* dialog = window.show_simulate();
        QCOMPARE(window.show_simulate(), dialog); // one dialog
        dialog->set_trace(kTrace);
        dialog->set_capacities("5000");
        dialog->set_sweep(false);
        dialog->set_max_requests(40);
        QSignalSpy done(dialog, &ui::SimulateDialog::finished_replays);
        QVERIFY(dialog->start());
        QVERIFY(done.wait(60'000));
        QSignalSpy opened(&window, &ui::MainWindow::recording_opened);
        QVERIFY(dialog->show_in_views(0));
        QVERIFY(opened.wait(60'000));
        QVERIFY(window.store() != nullptr);
        QCOMPARE(static_cast<std::int64_t>(window.store()->requests().size()),
                 dialog->results()[0].requests);
        QVERIFY(!dialog->show_in_views(7)); // no such row
    }
};

QTEST_MAIN(TestSimulateDialog)
#include "tst_simulate_dialog.moc"
