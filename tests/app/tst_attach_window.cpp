// The app attached to a publisher this test hosts (vLLM's wire protocol on
// loopback): the attached block map and the timeline's residency rows follow
// it live, the recording it makes replays the same blocks and scrubs to
// earlier moments, and the dialog checks what is typed and remembers what
// was used.
#include "app/ui/main_window.h"
#include "app/ui/models/attached_forest_model.h"
#include "app/ui/panels/attach_dialog.h"
#include "app/ui/panels/attached_prefix_panel.h"
#include "app/ui/panels/requests_panel.h"
#include "app/ui/panels/run_panel.h"
#include "app/ui/run/attach_controller.h"
#include "app/ui/run/teaching_presets.h"
#include "app/ui/views/attached_blocks_view.h"
#include "app/ui/views/block_map_view.h"
#include "app/ui/views/occupancy_chart.h"
#include "app/ui/views/timeline_view.h"
#include "app/ui/views/wrapping_legend.h"
#include "engine/gguf/gguf_file.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/support/cut_chart_text.h"
#include "tests/support/http_server.h"
#include "tests/support/kv_event_publisher.h"
#include "tests/support/metrics_pages.h"
#include "tests/support/tiny_model.h"

#include <fstream>
#include <sstream>

#include <QLabel>
#include <QListWidget>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSettings>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QStatusBar>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QTest>

using namespace kvscope;
using namespace kvscope::ui;
using namespace std::chrono_literals;
using test::kv_event_payload;
using test::KvEventPublisher;
using test::PublishedRemoved;
using test::PublishedStored;

class TestAttachWindow : public QObject {
    Q_OBJECT

    zmq::context_t context_;
    QTemporaryDir dir_;

private slots:
    void initTestCase() {
        QStandardPaths::setTestModeEnabled(true); // QSettings away from the user's
        QCoreApplication::setOrganizationName("kvscope-test");
        QCoreApplication::setApplicationName("tst_attach_window");
        QSettings().clear(); // what an earlier run remembered
    }

    void settingsLinesRoundTrip() {
        AttachSettings settings;
        QCOMPARE(AttachSettings::from_lines({"a:1 a:2", "", "  b:1   b:2 "}, settings), QString());
        QCOMPARE(settings.endpoints, (QStringList{"a:1", "b:1"}));
        QCOMPARE(settings.replays, (QStringList{"a:2", "b:2"}));
        QCOMPARE(settings.lines(), (QStringList{"a:1 a:2", "b:1 b:2"}));
        QCOMPARE(AttachSettings::from_lines({"a:1", "b:1"}, settings), QString());
        QVERIFY(settings.replays.isEmpty());
        QVERIFY(AttachSettings::from_lines({"a:1 a:2", "b:1"}, settings).contains("or none"));
        QVERIFY(AttachSettings::from_lines({"a b c"}, settings).contains("line 1"));
        QVERIFY(AttachSettings::from_lines({"", " "}, settings).contains("at least one"));
        // A word with an http(s) scheme is the publisher's metrics URL.
        QCOMPARE(AttachSettings::from_lines(
                     {"a:1 http://a:8000/metrics a:2", "b:1 b:2 https://b/metrics"}, settings),
                 QString());
        QCOMPARE(settings.endpoints, (QStringList{"a:1", "b:1"}));
        QCOMPARE(settings.replays, (QStringList{"a:2", "b:2"}));
        QCOMPARE(settings.metrics_urls,
                 (QStringList{"http://a:8000/metrics", "https://b/metrics"}));
        QCOMPARE(settings.lines(),
                 (QStringList{"a:1 a:2 http://a:8000/metrics", "b:1 b:2 https://b/metrics"}));
        QCOMPARE(AttachSettings::from_lines({"a:1 http://a/metrics"}, settings), QString());
        QCOMPARE(settings.lines(), QStringList{"a:1 http://a/metrics"});
        QVERIFY(AttachSettings::from_lines({"a:1 http://a/m", "b:1"}, settings)
                    .contains("a metrics URL, or none"));
        QVERIFY(AttachSettings::from_lines({"a:1 http://a/m https://a/n"}, settings)
                    .contains("one metrics URL"));
        QVERIFY(AttachSettings::from_lines({"http://a/m"}, settings).contains("line 1"));
        // TensorRT-LLM servers, numbered (and their metrics URLs ordered)
        // after the ZeroMQ endpoints whatever the order of the lines.
        QCOMPARE(AttachSettings::from_lines(
                     {"trtllm t:8000 http://t/metrics", "a:1 a:2 http://a/metrics"}, settings),
                 QString());
        QCOMPARE(settings.endpoints, QStringList{"a:1"});
        QCOMPARE(settings.trtllm_urls, QStringList{"t:8000"});
        QCOMPARE(settings.metrics_urls, (QStringList{"http://a/metrics", "http://t/metrics"}));
        QCOMPARE(settings.lines(),
                 (QStringList{"a:1 a:2 http://a/metrics", "trtllm t:8000 http://t/metrics"}));
        QCOMPARE(AttachSettings::from_lines({"trtllm t:8000"}, settings), QString());
        QVERIFY(settings.endpoints.isEmpty() && settings.metrics_urls.isEmpty());
        QVERIFY(AttachSettings::from_lines({"trtllm"}, settings).contains("trtllm HOST:PORT"));
        QVERIFY(AttachSettings::from_lines({"trtllm t:1", "a:1 http://a/m"}, settings)
                    .contains("a metrics URL, or none"));
    }

    void dialogValidatesAndRemembers() {
        AttachDialog dialog;
        dialog.set_lines({"a:1 a:2", "b:1"});
        dialog.accept();
        QVERIFY(dialog.result() != QDialog::Accepted);
        auto* problem = dialog.findChild<QLabel*>("attachProblem");
        QVERIFY(problem != nullptr && !problem->isHidden());
        QVERIFY(problem->text().contains("or none"));

        dialog.set_lines({"gpu-node-1:5557 gpu-node-1:5558", "gpu-node-2:5557 gpu-node-2:5558"});
        dialog.accept();
        QCOMPARE(dialog.result(), int(QDialog::Accepted));
        QCOMPARE(dialog.settings().endpoints.size(), 2);
        QCOMPARE(AttachDialog::recent_lines().first(), QString("gpu-node-1:5557 gpu-node-1:5558"));
        AttachDialog::remember({"gpu-node-2:5557 gpu-node-2:5558"}); // used again: first, once
        QCOMPARE(AttachDialog::recent_lines(), (QStringList{"gpu-node-2:5557 gpu-node-2:5558",
                                                            "gpu-node-1:5557 gpu-node-1:5558"}));
        AttachDialog again;
        QCOMPARE(again.recent()->count(), 2);
        QCOMPARE(again.publishers()->toPlainText(), QString("gpu-node-2:5557 gpu-node-2:5558"));
    }

    void followsAPublisherLiveThenReplays() {
        KvEventPublisher publisher(context_);
        const QString recording = dir_.filePath("attached.sqlite");
        MainWindow window;
        window.show();
        AttachSettings settings;
        settings.endpoints = {QString::fromStdString(publisher.endpoint)};
        settings.replays = {QString::fromStdString(publisher.replay_endpoint)};
        settings.topic = "kv-events";
        settings.num_blocks = 10;
        settings.record_path = recording;
        settings.tokenizer_path = tiny_model_path();
        // The engine's metrics too, as the dialog passes them.
        test::HttpServer metrics;
        metrics.set("/metrics", {200, kvscope::test::metrics_page()});
        settings.metrics_urls = {QString::fromStdString(metrics.url("/metrics"))};
        window.start_attach(settings);
        QVERIFY(window.attacher()->running());
        // Stop, yes; pause, no: the engines attached to do not wait for us.
        QVERIFY(window.run_panel()->stop_button()->isEnabled());
        QVERIFY(!window.run_panel()->pause_button()->isEnabled());
        QVERIFY(publisher.wait_for_subscriber([] { QCoreApplication::processEvents(); }, 20000ms));

        const tokenizer::Tokenizer tokenizer =
            tokenizer::Tokenizer::from_gguf(gguf::GgufFile::open(tiny_model_path()));
        const std::vector<tokenizer::TokenId> hello = tokenizer.encode("Hello world", false);
        QVERIFY(hello.size() >= 2);
        const QString first_text = QString::fromStdString(tokenizer.decode({hello[0], hello[1]}));
        QVERIFY(publisher.publish(
            0, kv_event_payload(
                   {PublishedStored{{1, 2, 3}, std::nullopt, {hello[0], hello[1], 7, 7, 8, 8}},
                    PublishedStored{{4}, std::nullopt}})));
        QTRY_VERIFY_WITH_TIMEOUT(
            window.store() != nullptr && window.store()->attached().state().source(0) != nullptr &&
                window.store()->attached().state().source(0)->blocks.size() == 4,
            20000);
        QTest::qWait(150); // a frame
        AttachedBlocksView* view = window.attached_blocks();
        QVERIFY(view->isVisible());
        QVERIFY(!window.block_map()->isVisible());
        QCOMPARE(view->sections().size(), std::size_t{1});
        const AttachedBlocksView::Section& section = view->sections()[0];
        QCOMPARE(section.title, QString("source 0 · rank 0 · GPU: 4 of 10 blocks resident"));
        QCOMPARE(section.cells.size(), std::size_t{10}); // the capacity given
        // The three-block chain first (the largest tree), then the lone block.
        QCOMPARE(section.cells[0].tree, 0);
        QCOMPARE(section.cells[2].tree, 0);
        QCOMPARE(section.cells[3].tree, 1);
        QCOMPARE(section.cells[4].tree, -1);
        QVERIFY(view->tooltip_for(0, 1).contains("0x0000000000000002"));
        QVERIFY(view->tooltip_for(0, 1).contains("continues 0x0000000000000001"));
        QVERIFY(view->tooltip_for(0, 5).contains("Free capacity"));
        const QPoint inside = section.grid_rect.topLeft() + QPoint(1, 1);
        QCOMPARE(view->cell_at(inside), (std::pair<int, int>{0, 0}));
        QVERIFY(window.timeline()->row_rect("Resident blocks").isValid());
        // The prefix forest tab, with the first block's text through the tokenizer.
        QCOMPARE(window.tabs()->currentWidget(), window.attached_prefixes());
        const auto check_forest = [&](qint64 resident) {
            AttachedForestModel* model = window.attached_prefixes()->model();
            QCOMPARE(model->rowCount(), 1);
            const QModelIndex tier = model->index(0, 0);
            QCOMPARE(tier.data().toString(), QString("source 0 · rank 0 · GPU"));
            QCOMPARE(model->index(0, AttachedForestModel::blocks_column).data().toLongLong(),
                     resident);
            const QModelIndex root = model->index(0, 0, tier);
            QCOMPARE(root.data().toString(), QString("0x0000000000000001"));
            QCOMPARE(model->index(0, AttachedForestModel::blocks_column, tier).data().toInt(), 3);
            QCOMPARE(model->index(0, AttachedForestModel::depth_column, tier).data().toInt(), 3);
            QCOMPARE(model->index(0, AttachedForestModel::tokens_column, tier).data().toString(),
                     first_text);
            QCOMPARE(model->rowCount(root), 1); // block 2 continues it
        };
        window.attached_prefixes()->set_time_ns(window.shown_time_ns());
        check_forest(4);
        QVERIFY(!window.tabs()->isTabVisible(window.tabs()->indexOf(window.requests())));
        QVERIFY(!window.timeline()->row_rect("Used blocks").isValid());

        if (qEnvironmentVariableIsSet("KVSCOPE_SHOT")) {
            window.resize(1400, 900);
            QTest::qWait(300);
            window.grab().save(qEnvironmentVariable("KVSCOPE_SHOT"));
        }
        // The metrics URL was polled into the store (vLLM's page: 25% KV
        // usage, 27,215 GPU blocks).
        QTRY_VERIFY_WITH_TIMEOUT(!window.store()->attached().state().source(0)->metrics.empty(),
                                 20000);
        const attach::MetricsSummary polled =
            attach::summarize_metrics(window.store()->attached().state().source(0)->metrics);
        QCOMPARE(polled.kv_usage, std::optional<double>(0.25));
        QCOMPARE(polled.num_gpu_blocks, std::optional<std::int64_t>(27215));
        QTest::qWait(600); // a moment apart, for scrubbing back to it
        const qint64 before_removal = window.store()->end_ns();
        QVERIFY(publisher.publish(1, kv_event_payload({PublishedRemoved{{4}}})));
        QTRY_COMPARE_WITH_TIMEOUT(window.store()->attached().state().source(0)->blocks.size(),
                                  std::size_t{3}, 20000);

        window.attacher()->stop();
        QTRY_VERIFY_WITH_TIMEOUT(!window.attacher()->running(), 20000);
        QTRY_VERIFY(window.statusBar()->currentMessage().contains("recorded to"));

        // The recording replays the same blocks, and earlier moments too.
        QSignalSpy opened(&window, &MainWindow::recording_opened);
        window.open_recording(recording);
        QVERIFY(opened.wait(10'000));
        QCOMPARE(window.mode(), MainWindow::Mode::replay);
        QVERIFY(view->isVisible());
        QCOMPARE(view->sections().at(0).title,
                 QString("source 0 · rank 0 · GPU: 3 of 10 blocks resident"));
        QCOMPARE(window.tabs()->currentWidget(), window.attached_prefixes());
        check_forest(3); // with the tokenizer the recording names, loaded again
        // The run panel says what is replayed, not the demo it had chosen
        // (about a run that is not there); a demo chosen brings that back.
        const QString explained = window.run_panel()->explanation_text();
        QVERIFY2(explained.contains("Replaying attached engines") &&
                     !explained.contains(teaching_presets().front().title),
                 qPrintable(explained));
        // At the README screenshot's size every chart names what it shows
        // in full ("Used (not in KV events)" was cut).
        window.resize(1440, 900);
        QTest::qWait(50);
        QTRY_VERIFY(test::charts_laid_out(window));
        const QStringList cut = test::cut_chart_texts(window);
        QVERIFY2(cut.isEmpty(), qPrintable(cut.join("; ")));
        QVERIFY(window.occupancy()->legend()->entries().contains("Used (not in KV events)"));
        window.run_panel()->choose_preset(teaching_presets().front().id);
        QVERIFY(window.run_panel()->explanation_text().contains(teaching_presets().front().title));
        window.show_time(before_removal);
        QCOMPARE(view->sections().at(0).title,
                 QString("source 0 · rank 0 · GPU: 4 of 10 blocks resident"));
        check_forest(4);
    }

    void refusedEndpointSaysWhy() {
        MainWindow window;
        AttachSettings settings;
        settings.endpoints = {"tcp://"};
        window.start_attach(settings);
        QTRY_VERIFY_WITH_TIMEOUT(window.findChild<QMessageBox*>("attachFailedMessage") != nullptr,
                                 20000);
        QVERIFY(window.findChild<QMessageBox*>("attachFailedMessage")->text().contains("tcp://"));
        QVERIFY(!window.attacher()->running());
    }
};

QTEST_MAIN(TestAttachWindow)
#include "tst_attach_window.moc"
