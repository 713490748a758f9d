#include "app/ui/main_window.h"

#include "app/ui/export/plot_export.h"
#include "app/ui/panels/attach_dialog.h"
#include "app/ui/panels/attached_prefix_panel.h"
#include "app/ui/panels/compare_view.h"
#include "app/ui/panels/kernel_summary_panel.h"
#include "app/ui/panels/quality_panel.h"
#include "app/ui/panels/replay_bar.h"
#include "app/ui/panels/requests_panel.h"
#include "app/ui/panels/run_panel.h"
#include "app/ui/panels/simulate_dialog.h"
#include "app/ui/panels/sizing_dialog.h"
#include "app/ui/panels/start_page.h"
#include "app/ui/run/attach_controller.h"
#include "app/ui/run/engine_controller.h"
#include "app/ui/run/teaching_presets.h"
#include "app/ui/views/attached_blocks_view.h"
#include "app/ui/views/block_map_view.h"
#include "app/ui/views/occupancy_chart.h"
#include "app/ui/views/prefix_view.h"
#include "app/ui/views/timeline_view.h"
#include "app/ui/workers/free_on_worker.h"
#include "app/ui/workers/thread_handoff.h"
#include "engine/gguf/gguf_file.h"
#include "engine/tokenizer/tokenizer.h"
#include "kvscope/build_info.h"
#include "profiler/recording/recording_reader.h"

#include <limits>
#include <utility>

#include <QAction>
#include <QApplication>
#include <QDockWidget>
#include <QFileDialog>
#include <QFileInfo>
#include <QKeySequence>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QPointer>
#include <QProgressDialog>
#include <QPushButton>
#include <QScrollArea>
#include <QSplitter>
#include <QStackedWidget>
#include <QStatusBar>
#include <QTabWidget>
#include <QThread>
#include <QTimer>
#include <QVBoxLayout>

namespace kvscope::ui {
namespace {

// Views refresh at 10 Hz while live: smooth enough to watch blocks fill,
// cheap enough to leave the CPU to the engine.
constexpr int kFrameMs = 100;
// A slice of applying live events, between the window's other events (and
// before a frame refreshes the views): a few slices and a refresh may run
// before the window gets to input or a paint, and together they stay well
// inside the 16 ms of a 60 Hz display however fast events come (at 2 ms the
// window still applies 320,000 attached rows a second on a 2-vCPU machine).
constexpr std::chrono::milliseconds kDrainBudget{2};
// The attached views' time for "the newest state, whatever comes".
constexpr qint64 kNow = std::numeric_limits<qint64>::max();

} // namespace

MainWindow::MainWindow(QWidget* parent)
    : QMainWindow(parent) {
    setWindowTitle(tr("kvscope"));
    setObjectName("kvscopeMainWindow");
    engine_ = new EngineController(this);
    attach_ = new AttachController(this);
    live_ = engine_;
    create_views();
    create_menus();
    mode_label_ = new QLabel(tr("No run"));
    statusBar()->addPermanentWidget(mode_label_);
    statusBar()->showMessage(tr("Ready: start a demo from the run panel, or open a recording"));
    resize(1440, 900);

    frame_timer_ = new QTimer(this);
    frame_timer_->setInterval(kFrameMs);
    connect(frame_timer_, &QTimer::timeout, this, [this] { tick(); });

    // The handlers both sources share come first: Qt calls a signal's slots
    // in the order connected, and a run's end is shown (its last events
    // applied) before what the engine's end adds.
    connect_live_source(engine_);
    connect_live_source(attach_);
    connect_engine();
    connect_attach();
    connect_views();
}

void MainWindow::connect_live_source(LiveSource* source) {
    connect(source, &LiveSource::started, this, [this, source] {
        live_ = source;
        recording_path_.clear();
        set_store(source->new_store(), Mode::live);
        run_panel_->set_running(true, source->can_pause());
        frame_timer_->start();
    });
    connect(source, &LiveSource::status, this, [this](const QString& text) {
        run_panel_->set_status(text);
        statusBar()->showMessage(text);
    });
    connect(source, &LiveSource::finished, this, [this, source](const QString& summary) {
        if (is_live_end(source)) {
            live_ended(summary);
        }
    });
}

void MainWindow::connect_engine() {
    connect(run_panel_, &RunPanel::start_requested, this, &MainWindow::start_run);
    connect(run_panel_, &RunPanel::pause_toggled, engine_, &EngineController::set_paused);
    connect(run_panel_, &RunPanel::stop_requested, this, &MainWindow::stop_live);
    connect(engine_, &EngineController::loading, run_panel_, &RunPanel::set_loading);
    connect(engine_, &EngineController::progress, run_panel_, &RunPanel::set_progress);
    connect(engine_, &LiveSource::finished, this, [this](const QString& summary) {
        if (!is_live_end(engine_)) {
            return;
        }
        // A run that trades quality for memory says how much, unasked.
        const bool lossy = last_run_.eviction.enabled() ||
                           last_run_.cache_format.key != kv::KvFormat::f16 ||
                           last_run_.cache_format.value != kv::KvFormat::f16;
        if (lossy) {
            run_panel_->quality()->measure(last_run_);
        }
        if (!last_run_.record_path.empty()) {
            run_panel_->advance_record_path();
        }
        emit run_finished(summary);
    });
    connect(engine_, &LiveSource::failed, this, [this](const QString& message) {
        if (!is_live_end(engine_)) {
            return;
        }
        run_panel_->set_loading(false);
        live_failed(tr("Failed: %1").arg(message), tr("The run failed"), tr("The run failed"),
                    "runFailedMessage", message);
    });
    connect(run_panel_->quality(), &QualityPanel::measure_requested, this,
            [this] { run_panel_->quality()->measure(run_panel_->settings()); });
}

void MainWindow::connect_attach() {
    connect(attach_, &LiveSource::failed, this, [this](const QString& message) {
        if (!is_live_end(attach_)) {
            return;
        }
        run_panel_->explain_preset(); // nothing attached after all
        const QString status = tr("Attach failed: %1").arg(message);
        live_failed(status, status, tr("Cannot attach"), "attachFailedMessage", message);
    });
}

void MainWindow::connect_views() {
    connect(replay_bar_, &ReplayBar::time_changed, this, &MainWindow::show_time);
    connect(replay_bar_, &ReplayBar::following_changed, this, [this](bool following) {
        timeline_->set_follow_live(following && mode_ == Mode::live);
        if (following && store_) {
            show_time(store_->end_ns());
        }
    });
    connect(timeline_, &TimelineView::cursor_requested, this, [this](qint64 t) {
        replay_bar_->set_following(false);
        replay_bar_->set_time_ns(t);
        show_time(replay_bar_->time_ns());
    });
    connect(block_map_, &BlockMapView::request_selected, this, [this](qint64 id) {
        requests_->select_request(id);
        tabs_->setCurrentWidget(requests_);
    });
    connect(prefix_, &PrefixView::request_selected, requests_, &RequestsPanel::select_request);
    connect(tabs_, &QTabWidget::currentChanged, this,
            [this](int index) { refresh_tab(tabs_->widget(index)); });
}

MainWindow::~MainWindow() {
    loaders_.stop();
    loaders_.wait(); // a recording being read stops at its next progress report
    stop_live();
    // Views point into the store: detach them before it goes.
    set_store(nullptr, Mode::empty);
}

void MainWindow::create_views() {
    run_panel_ = new RunPanel;
    auto* scroll = new QScrollArea;
    scroll->setWidget(run_panel_);
    scroll->setWidgetResizable(true);
    scroll->setMinimumWidth(360);
    auto* dock = new QDockWidget(tr("Run"), this);
    dock->setObjectName("runDock");
    dock->setWidget(scroll);
    dock->setFeatures(QDockWidget::DockWidgetMovable | QDockWidget::DockWidgetFloatable);
    addDockWidget(Qt::LeftDockWidgetArea, dock);

    block_map_ = new BlockMapView;
    attached_blocks_ = new AttachedBlocksView;
    block_views_ = new QStackedWidget;
    block_views_->addWidget(block_map_);
    block_views_->addWidget(attached_blocks_);
    occupancy_ = new OccupancyChart;
    timeline_ = new TimelineView;
    requests_ = new RequestsPanel;
    prefix_ = new PrefixView;
    attached_prefixes_ = new AttachedPrefixPanel;
    kernels_ = new KernelSummaryPanel;
    compare_ = new CompareView;
    start_page_ = new StartPage;
    replay_bar_ = new ReplayBar;

    auto* top = new QSplitter(Qt::Horizontal);
    top->addWidget(block_views_);
    top->addWidget(occupancy_);
    top->setStretchFactor(0, 1);
    top->setStretchFactor(1, 1);
    occupancy_->setMinimumWidth(360);
    top->setSizes({600, 480}); // the chart needs room for its axes
    tabs_ = new QTabWidget;
    tabs_->setObjectName("viewTabs");
    tabs_->addTab(requests_, tr("Requests"));
    tabs_->addTab(prefix_, tr("Prefix hits"));
    tabs_->addTab(attached_prefixes_, tr("Attached prefixes"));
    tabs_->setTabVisible(tabs_->indexOf(attached_prefixes_), false);
    tabs_->addTab(kernels_, tr("Kernels and ops"));
    tabs_->addTab(compare_, tr("Compare"));
    tabs_->addTab(start_page_, tr("Machine"));
    auto* split = new QSplitter(Qt::Vertical);
    split->addWidget(top);
    split->addWidget(timeline_);
    split->addWidget(tabs_);
    split->setStretchFactor(0, 3);
    split->setStretchFactor(1, 3);
    split->setStretchFactor(2, 3);

    auto* central = new QWidget;
    auto* layout = new QVBoxLayout(central);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(split, 1);
    layout->addWidget(replay_bar_);
    setCentralWidget(central);
}

void MainWindow::create_menus() {
    QMenu* file_menu = menuBar()->addMenu(tr("&File"));
    QAction* open =
        file_menu->addAction(tr("&Open recording…"), this, &MainWindow::choose_recording);
    open->setShortcut(QKeySequence::Open);
    file_menu->addAction(tr("&Attach to engine…"), this, &MainWindow::choose_attach);
    file_menu->addAction(tr("&Compare recordings…"), this, &MainWindow::choose_comparison);
    file_menu->addAction(tr("&Simulate trace…"), this, &MainWindow::show_simulate);
    QMenu* export_menu = file_menu->addMenu(tr("&Export view"));
    const auto add_export = [this, export_menu](const QString& name, QWidget* view) {
        export_menu->addAction(tr("%1 as PNG or SVG…").arg(name), this,
                               [this, view, name] { export_view(view, name); });
    };
    add_export(tr("Block map"), block_map_);
    add_export(tr("Occupancy"), occupancy_);
    add_export(tr("Timeline"), timeline_);
    add_export(tr("Prefix hits"), prefix_);
    file_menu->addSeparator();
    QAction* quit = file_menu->addAction(tr("&Quit"), qApp, &QApplication::quit);
    quit->setShortcut(QKeySequence::Quit);

    QMenu* run_menu = menuBar()->addMenu(tr("&Run"));
    QMenu* demos = run_menu->addMenu(tr("&Demos"));
    for (const TeachingPreset& preset : teaching_presets()) {
        const QString id = preset.id;
        demos->addAction(preset.title, this, [this, id] {
            run_panel_->choose_preset(id);
            start_run();
        });
    }
    run_menu->addAction(tr("&Start"), this, &MainWindow::start_run);
    run_menu->addAction(tr("S&top"), this, &MainWindow::stop_live);
    run_menu->addSeparator();
    run_menu->addAction(tr("Si&ze the KV cache…"), this, &MainWindow::show_sizing);

    QMenu* help_menu = menuBar()->addMenu(tr("&Help"));
    help_menu->addAction(tr("&About kvscope"), this, &MainWindow::show_about);
}

void MainWindow::set_store(std::shared_ptr<profiler::RunStore> store, Mode mode) {
    // Views first, then the old store goes (they point into it).
    const profiler::RunStore* raw = store.get();
    block_map_->set_store(raw);
    attached_blocks_->set_store(raw);
    attached_prefixes_->set_store(raw);
    occupancy_->set_store(raw);
    timeline_->set_store(raw);
    requests_->set_store(raw);
    prefix_->set_store(raw);
    kernels_->set_store(raw);
    // A long attach's store holds a million rows and several copies of its
    // engines' blocks: freeing it here froze the window for a second.
    free_on_worker(std::exchange(store_, std::move(store)));
    mode_ = mode;
    const bool live = mode == Mode::live;
    replay_bar_->set_range(raw ? raw->start_ns() : 0, raw ? raw->end_ns() : 0);
    replay_bar_->set_following(live);
    replay_bar_->live_button()->setEnabled(live);
    timeline_->set_follow_live(live);
    if (!live) {
        timeline_->fit_all();
    }
    mode_label_->setText(live  ? tr("Live")
                         : raw ? tr("Replay: %1").arg(QFileInfo(recording_path_).fileName())
                               : tr("No run"));
    show_time(live || !raw ? std::numeric_limits<qint64>::max() : raw->end_ns());
}

bool MainWindow::drain(std::chrono::nanoseconds budget) {
    // Slices of a few thousand events, until the budget is spent: an attach
    // can queue more rows than the window can apply, and a frame that took
    // them all at once would freeze it.
    constexpr std::size_t kSlice = 256;
    const auto start = std::chrono::steady_clock::now();
    const std::shared_ptr<profiler::LiveEventQueue> queue = live_->events();
    live_->feed(*store_);
    while (true) {
        const std::vector<events::EngineEvent> batch = queue->take(kSlice);
        for (const events::EngineEvent& event : batch) {
            store_->append(event);
        }
        if (batch.size() < kSlice) {
            return false;
        }
        if (std::chrono::steady_clock::now() - start >= budget) {
            return true;
        }
    }
}

void MainWindow::drain_slice() {
    drain_scheduled_ = false;
    if (!store_ || mode_ != Mode::live) {
        return;
    }
    if (drain(kDrainBudget)) {
        // More is queued: another slice once the window's pending events
        // (input, paints) have run; the next frame shows what was applied.
        drain_scheduled_ = true;
        QTimer::singleShot(0, this, &MainWindow::drain_slice);
    }
}

void MainWindow::tick(bool everything) {
    if (!store_ || mode_ != Mode::live) {
        return;
    }
    if (everything) {
        drain(std::chrono::nanoseconds::max());
    } else if (drain(kDrainBudget) && !drain_scheduled_) {
        drain_scheduled_ = true;
        QTimer::singleShot(0, this, &MainWindow::drain_slice);
    }
    replay_bar_->set_range(store_->start_ns(), store_->end_ns());
    if (replay_bar_->following()) {
        shown_ns_ = store_->end_ns();
    }
    refresh_views();
    if (everything && replay_bar_->following()) {
        // The source ended and no frame follows: the attached views show the
        // last state now, whatever their throttle says.
        if (block_views_->currentWidget() == attached_blocks_) {
            attached_blocks_->set_time_ns(kNow);
        }
        if (tabs_->currentWidget() == attached_prefixes_) {
            attached_prefixes_->set_time_ns(kNow);
        }
    }
}

void MainWindow::show_time(qint64 t_ns) {
    if (store_) {
        t_ns = std::min<qint64>(t_ns, store_->end_ns());
    }
    shown_ns_ = t_ns;
    refresh_views();
}

void MainWindow::refresh_views() {
    // set_time_ns() of a view that moved redraws it; refresh() picks up what
    // the store gained. Once each, never both.
    // Following a live run, the time moves with every frame while what is
    // shown stays "now": the attached views refresh (as often as their cost
    // allows) rather than rebuild for a new time.
    const bool following = replay_bar_->following() && mode_ == Mode::live;
    const bool moved = shown_ns_ != refreshed_ns_;
    refreshed_ns_ = shown_ns_;
    show_views_for_run();
    if (block_views_->currentWidget() == attached_blocks_) {
        if (following && attached_blocks_->showing_past()) {
            attached_blocks_->set_time_ns(kNow); // back to live
        } else if (moved && !following) {
            attached_blocks_->set_time_ns(shown_ns_);
        } else {
            attached_blocks_->refresh();
        }
    } else if (moved) {
        block_map_->set_time_ns(shown_ns_);
    } else {
        block_map_->refresh();
    }
    occupancy_->set_time_ns(shown_ns_);
    occupancy_->refresh();
    if (replay_bar_->following() && mode_ == Mode::live) {
        timeline_->clear_cursor();
    } else {
        timeline_->set_cursor_ns(shown_ns_);
    }
    timeline_->refresh();
    refresh_tab(tabs_->currentWidget());
}

// Only the tab in sight is kept up to date (their tables and trees cost time
// in proportion to the run); switching tabs brings the new one up to date.
void MainWindow::refresh_tab(QWidget* tab) {
    if (tab == requests_) {
        requests_->set_time_ns(shown_ns_); // refreshes
    } else if (tab == prefix_) {
        if (prefix_->time_ns() != shown_ns_) {
            prefix_->set_time_ns(shown_ns_); // refreshes
        } else {
            prefix_->refresh();
        }
    } else if (tab == attached_prefixes_) {
        const bool following = replay_bar_->following() && mode_ == Mode::live;
        if (following && attached_prefixes_->time_ns() != kNow) {
            attached_prefixes_->set_time_ns(kNow); // back to live
        } else if (!following && attached_prefixes_->time_ns() != shown_ns_) {
            attached_prefixes_->set_time_ns(shown_ns_);
        } else {
            attached_prefixes_->refresh();
        }
    } else if (tab == kernels_) {
        kernels_->set_time_ns(shown_ns_); // refreshes, at most twice a second
    }
}

void MainWindow::start_demo(const QString& record_path, const QString& demo_id) {
    const TeachingPreset* preset =
        demo_id.isEmpty() ? &teaching_presets().front() : find_teaching_preset(demo_id);
    if (preset == nullptr) { // the command line checks names; a caller may not
        statusBar()->showMessage(tr("No demo called %1").arg(demo_id));
        return;
    }
    run_panel_->choose_preset(preset->id);
    RunSettings settings = run_panel_->settings();
    if (!record_path.isEmpty()) {
        settings.record_path = record_path.toStdString();
    }
    start_run_with(std::move(settings));
    statusBar()->showMessage(tr("Live demo: %1").arg(preset->title));
}

void MainWindow::start_run() {
    start_run_with(run_panel_->settings());
}

void MainWindow::start_run_with(RunSettings settings) {
    if (live_running()) {
        statusBar()->showMessage(tr("A run is under way: stop it first"));
        return;
    }
    loaders_.stop();                 // a recording still loading must not replace the live run
    run_panel_->quality()->cancel(); // its threads would distort the run's timings
    run_panel_->explain_preset();    // after an attach's text
    recording_path_.clear();
    last_run_ = std::move(settings);
    engine_->start(last_run_);
}

void MainWindow::open_recording(const QString& path) {
    stop_live();
    loaders_.stop(); // the one read before, if any: this one replaces it
    auto* dialog = new QProgressDialog(tr("Reading %1…").arg(QFileInfo(path).fileName()),
                                       tr("Cancel"), 0, 1000, this);
    dialog->setAttribute(Qt::WA_DeleteOnClose);
    dialog->setMinimumDuration(300);
    dialog->setValue(0);
    statusBar()->showMessage(tr("Reading %1…").arg(path));

    // The worker builds a store of its own and hands it over whole.
    QPointer<MainWindow> self(this);
    QPointer<QProgressDialog> progress(dialog);
    std::stop_source load = loaders_.start([self, progress, path](const std::stop_token& stop) {
        auto store = std::make_shared<profiler::RunStore>();
        QString error;
        try {
            profiler::load_recording(path.toStdString(), *store, [&](double share) {
                run_on_thread_of(qApp, [progress, share] {
                    if (progress) {
                        progress->setValue(static_cast<int>(share * 1000));
                    }
                });
                return !stop.stop_requested();
            });
        } catch (const std::exception& e) {
            error = QString::fromUtf8(e.what());
        }
        run_on_thread_of(qApp, [self, progress, stop, store, error, path] {
            // Read the flag first: closing the dialog would raise it.
            const bool cancelled = stop.stop_requested();
            if (progress) {
                progress->disconnect();
                progress->deleteLater();
            }
            if (!self || cancelled || self->live_running()) {
                return;
            }
            if (!error.isEmpty()) {
                self->statusBar()->showMessage(error);
                auto* box = new QMessageBox(QMessageBox::Warning, tr("Cannot open the recording"),
                                            error, QMessageBox::Ok, self);
                box->setObjectName("openFailedMessage");
                box->setAttribute(Qt::WA_DeleteOnClose);
                box->open();
                emit self->recording_failed(error);
                return;
            }
            self->recording_path_ = path;
            self->set_store(store, Mode::replay);
            if (store->attached().state().empty()) {
                self->run_panel_->explain_preset(); // not an attach's text
            } else {
                self->explain_attached(false);
                // The tokenizer the attach was given, when it is still there.
                std::string tokenizer;
                try {
                    const auto metadata = profiler::recording_metadata(path.toStdString());
                    if (const auto it = metadata.find("tokenizer"); it != metadata.end()) {
                        tokenizer = it->second;
                    }
                } catch (const std::exception&) {
                }
                self->load_attach_tokenizer(QString::fromStdString(tokenizer), true);
            }
            // The whole run at a glance first; Play replays it from the start.
            self->replay_bar_->set_time_ns(store->end_ns());
            self->show_time(store->end_ns());
            self->statusBar()->showMessage(
                tr("Opened %1: %2 events, %3 requests, %4 s; Play replays it, the slider picks a "
                   "moment")
                    .arg(path)
                    .arg(store->event_count())
                    .arg(store->requests().size())
                    .arg(static_cast<double>(store->end_ns() - store->start_ns()) * 1e-9, 0, 'f',
                         2));
            emit self->recording_opened(path);
        });
    });
    connect(dialog, &QProgressDialog::canceled, this, [load]() mutable { load.request_stop(); });
}

void MainWindow::choose_recording() {
    const QString path = QFileDialog::getOpenFileName(
        this, tr("Open recording"), QString(), tr("kvscope recordings (*.sqlite);;All files (*)"));
    if (!path.isEmpty()) {
        open_recording(path);
    }
}

SizingDialog* MainWindow::show_sizing() {
    auto* dialog =
        new SizingDialog(QString::fromStdString(run_panel_->settings().model_path), this);
    dialog->setAttribute(Qt::WA_DeleteOnClose);
    dialog->show();
    return dialog;
}

SimulateDialog* MainWindow::show_simulate() {
    if (!simulate_) {
        simulate_ = new SimulateDialog(this);
        connect(simulate_, &SimulateDialog::record_ready, this, &MainWindow::open_recording);
    }
    simulate_->show();
    simulate_->raise();
    return simulate_;
}

void MainWindow::choose_attach() {
    AttachDialog dialog(this);
    if (dialog.exec() == QDialog::Accepted) {
        start_attach(dialog.settings());
    }
}

void MainWindow::show_views_for_run() {
    // An attached engine's run has hashes, not our physical blocks: its own
    // map and prefix forest.
    const bool attached = store_ && !store_->attached().state().empty() && store_->steps().empty();
    QWidget* blocks =
        attached ? static_cast<QWidget*>(attached_blocks_) : static_cast<QWidget*>(block_map_);
    if (block_views_->currentWidget() == blocks) {
        return;
    }
    block_views_->setCurrentWidget(blocks);
    tabs_->setTabVisible(tabs_->indexOf(attached_prefixes_), attached);
    tabs_->setTabVisible(tabs_->indexOf(prefix_), !attached);
    tabs_->setTabVisible(tabs_->indexOf(requests_), !attached);
    if (attached) {
        tabs_->setCurrentWidget(attached_prefixes_);
    } else if (tabs_->currentWidget() == attached_prefixes_) {
        tabs_->setCurrentWidget(requests_);
    }
}

bool MainWindow::load_attach_tokenizer(const QString& path, bool quiet) {
    std::shared_ptr<const tokenizer::Tokenizer> tokenizer;
    if (!path.isEmpty()) {
        try {
            tokenizer = std::make_shared<const tokenizer::Tokenizer>(
                tokenizer::Tokenizer::from_gguf(gguf::GgufFile::open(path.toStdString())));
        } catch (const std::exception& e) {
            const QString message =
                tr("Cannot read a tokenizer from %1: %2").arg(path, QString::fromUtf8(e.what()));
            statusBar()->showMessage(message);
            if (!quiet) {
                auto* box = new QMessageBox(QMessageBox::Warning, tr("Cannot attach"), message,
                                            QMessageBox::Ok, this);
                box->setObjectName("attachFailedMessage");
                box->setAttribute(Qt::WA_DeleteOnClose);
                box->open();
            }
            attached_prefixes_->set_tokenizer(nullptr);
            return false;
        }
    }
    attached_prefixes_->set_tokenizer(std::move(tokenizer));
    return true;
}

void MainWindow::start_attach(const AttachSettings& settings) {
    if (live_running()) {
        statusBar()->showMessage(tr("A run is under way: stop it first"));
        return;
    }
    if (!load_attach_tokenizer(settings.tokenizer_path, false)) {
        return;
    }
    loaders_.stop();
    explain_attached(true);
    attach_->start(settings);
}

void MainWindow::explain_attached(bool live) {
    // The run panel's demo text is about a run of kvscope's engine; here
    // none runs, so it says what is shown instead.
    run_panel_->explain_other(
        live ? tr("Attached to engines") : tr("Replaying attached engines"),
        tr("<p>%1 what serving engines published about their KV caches (vLLM's and SGLang's "
           "KV events, TensorRT-LLM's), not a run of kvscope's engine: there are no steps or "
           "requests, only the blocks each engine holds.</p>"
           "<p><b>Watch:</b> the block view draws each engine's resident blocks by prefix "
           "tree, <i>Attached prefixes</i> lists the trees with their tokens, and the "
           "timeline and chart follow how many blocks are resident.</p>"
           "<p>The settings below start a new run of kvscope's own engine.</p>")
            .arg(live ? tr("The window follows") : tr("This recording holds")));
}

void MainWindow::stop_live() {
    engine_->stop();
    attach_->stop();
}

bool MainWindow::live_running() const {
    return engine_->running() || attach_->running();
}

bool MainWindow::is_live_end(const LiveSource* source) const {
    // Not when a new run of it began before this one's end came, nor when
    // the other source has taken the window over since.
    return source == live_ && !source->running();
}

void MainWindow::live_ended(const QString& summary) {
    tick(true); // the last events
    frame_timer_->stop();
    run_panel_->set_running(false);
    run_panel_->set_status(summary);
    statusBar()->showMessage(summary);
}

void MainWindow::live_failed(const QString& status, const QString& bar, const QString& title,
                             const char* box_name, const QString& message) {
    live_ended(status);
    statusBar()->showMessage(bar);
    // Window-modal but not blocking: the event loop (and tests) go on.
    auto* box = new QMessageBox(QMessageBox::Warning, title, message, QMessageBox::Ok, this);
    box->setObjectName(box_name);
    box->setAttribute(Qt::WA_DeleteOnClose);
    box->open();
}

void MainWindow::choose_comparison() {
    const QString base = QFileDialog::getOpenFileName(
        this, tr("Base recording (before)"), recording_path_, tr("kvscope recordings (*.sqlite)"));
    if (base.isEmpty()) {
        return;
    }
    const QString now = QFileDialog::getOpenFileName(this, tr("New recording (after)"), base,
                                                     tr("kvscope recordings (*.sqlite)"));
    if (!now.isEmpty()) {
        compare_recordings(base, now);
    }
}

void MainWindow::compare_recordings(const QString& base, const QString& now) {
    tabs_->setCurrentWidget(compare_);
    compare_->set_files(base, now);
    compare_->start();
}

void MainWindow::export_view(QWidget* view, const QString& name) {
    const QString path = QFileDialog::getSaveFileName(this, tr("Export %1").arg(name),
                                                      name.toLower().replace(' ', '-') + ".png",
                                                      tr("PNG image (*.png);;SVG image (*.svg)"));
    if (path.isEmpty()) {
        return;
    }
    const QString error = export_widget(*view, path);
    if (!error.isEmpty()) {
        QMessageBox::warning(this, tr("Export failed"), error);
    } else {
        statusBar()->showMessage(tr("Saved %1").arg(path));
    }
}

void MainWindow::show_about() {
    QMessageBox::about(this, tr("About kvscope"),
                       tr("<p><b>kvscope %1</b></p><p>A profiler and visualiser of KV-cache "
                          "behaviour in LLM inference.</p><p>Apache License 2.0.</p>")
                           .arg(build_info::version));
}

} // namespace kvscope::ui
