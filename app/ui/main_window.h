// kvscope-ui's main window: the run panel on the left; the block map and
// occupancy over time, the timeline, and tabs for requests, prefix hits,
// kernels and compare in the middle; the time scrubber at the bottom. Every
// view reads one RunStore, fed live from the engine a frame at a time or
// loaded from a recording, and shows the moment the scrubber selects.
#pragma once

#include "app/ui/run/attach_controller.h"
#include "app/ui/run/run_settings.h"
#include "app/ui/workers/worker_threads.h"
#include "profiler/store/run_store.h"

#include <chrono>
#include <memory>

#include <QMainWindow>
#include <QPointer>

class QLabel;
class QStackedWidget;
class QTabWidget;
class QTimer;

namespace kvscope::ui {
class SimulateDialog;
class SizingDialog;
} // namespace kvscope::ui

namespace kvscope::ui {

class AttachController;
class AttachedBlocksView;
class AttachedPrefixPanel;
class BlockMapView;
class CompareView;
class EngineController;
class KernelSummaryPanel;
class LiveSource;
class OccupancyChart;
class PrefixView;
class ReplayBar;
class RequestsPanel;
class RunPanel;
class StartPage;
class TimelineView;

class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    explicit MainWindow(QWidget* parent = nullptr);
    ~MainWindow() override;

    enum class Mode { empty, live, replay };
    Mode mode() const { return mode_; }
    const profiler::RunStore* store() const { return store_.get(); }
    QString recording_path() const { return recording_path_; }

    StartPage* start_page() const { return start_page_; }
    RunPanel* run_panel() const { return run_panel_; }
    EngineController* engine() const { return engine_; }
    AttachController* attacher() const { return attach_; }
    AttachedBlocksView* attached_blocks() const { return attached_blocks_; }
    AttachedPrefixPanel* attached_prefixes() const { return attached_prefixes_; }
    BlockMapView* block_map() const { return block_map_; }
    OccupancyChart* occupancy() const { return occupancy_; }
    TimelineView* timeline() const { return timeline_; }
    ReplayBar* replay_bar() const { return replay_bar_; }
    RequestsPanel* requests() const { return requests_; }
    PrefixView* prefix_view() const { return prefix_; }
    KernelSummaryPanel* kernels() const { return kernels_; }
    CompareView* compare_view() const { return compare_; }
    QTabWidget* tabs() const { return tabs_; }

    // Starts the live demo `demo_id` (a teaching preset's id; empty: the
    // default one, kvscope-ui --demo), recorded into `record_path` unless it
    // is empty (--record).
    void start_demo(const QString& record_path = {}, const QString& demo_id = {});
    // Starts a live run with the run panel's settings.
    void start_run();
    // Starts a live run with these settings.
    void start_run_with(RunSettings settings);
    // Attaches to serving engines' KV-event publishers (File > Attach to
    // engine… asks for the settings first); the views follow them live.
    void start_attach(const AttachSettings& settings);
    // Loads a recording on a worker thread; recording_opened or
    // recording_failed follows.
    void open_recording(const QString& path);
    // File > Simulate trace…: the (one) simulation dialog, shown; a
    // configuration's "Show in views" opens its recording here.
    SimulateDialog* show_simulate();
    // Run > Size the KV cache…: for the run panel's model, or a built-in one.
    SizingDialog* show_sizing();
    // Shows two recordings side by side in the Compare tab.
    void compare_recordings(const QString& base, const QString& now);
    // The moment every view shows (host-clock ns).
    qint64 shown_time_ns() const { return shown_ns_; }
    void show_time(qint64 t_ns);

signals:
    void recording_opened(const QString& path);
    void recording_failed(const QString& message);
    void run_finished(const QString& summary);

private:
    // The run panel's explanation while engines are attached (`live`) or an
    // attach's recording replays.
    void explain_attached(bool live);
    void create_views();
    void create_menus();
    // The constructor's wiring, by concern: what either live source's start,
    // status and end do; the run panel and what a run's end or failure adds;
    // an attach's failure; the scrubber, timeline and cross-view selection.
    void connect_live_source(LiveSource* source);
    void connect_engine();
    void connect_attach();
    void connect_views();
    void set_store(std::shared_ptr<profiler::RunStore> store, Mode mode);
    // A frame: applies what the live source queued (at most a frame's
    // budget of it; the rest in further slices between the window's other
    // events) and refreshes the views. `everything`: the source has ended,
    // apply all of it.
    void tick(bool everything = false);
    // Applies queued events for up to `budget`; true when some remain.
    bool drain(std::chrono::nanoseconds budget);
    void drain_slice();
    void refresh_views();
    void refresh_tab(QWidget* tab);
    void choose_recording();
    void choose_attach();
    void stop_live();
    bool live_running() const; // the engine runs or engines are attached
    // An end or failure `source` reports is the one of the run shown live.
    bool is_live_end(const LiveSource* source) const;
    void live_ended(const QString& summary);
    // The live source failed: `status` in the run panel, `bar` in the status
    // bar, and a message box (`title`, object name `box_name`) with why.
    void live_failed(const QString& status, const QString& bar, const QString& title,
                     const char* box_name, const QString& message);
    // Shows the attached engines' views (or the engine's) for the store's run.
    void show_views_for_run();
    // The tokenizer for an attached run's token ids; false (and a message)
    // when `path` is not one.
    bool load_attach_tokenizer(const QString& path, bool quiet);
    void choose_comparison();
    void export_view(QWidget* view, const QString& name);
    void show_about();

    std::shared_ptr<profiler::RunStore> store_;
    Mode mode_ = Mode::empty;
    QString recording_path_;
    qint64 shown_ns_ = 0;
    qint64 refreshed_ns_ = -1; // the time the views last showed
    WorkerThreads loaders_;    // reading a recording
    QPointer<SimulateDialog> simulate_;
    RunSettings last_run_;
    bool drain_scheduled_ = false; // a drain_slice() is queued

    EngineController* engine_ = nullptr;
    AttachController* attach_ = nullptr;
    LiveSource* live_ = nullptr; // the one feeding the live store: engine_ or attach_
    QTimer* frame_timer_ = nullptr;
    StartPage* start_page_ = nullptr;
    RunPanel* run_panel_ = nullptr;
    BlockMapView* block_map_ = nullptr;
    AttachedBlocksView* attached_blocks_ = nullptr;
    AttachedPrefixPanel* attached_prefixes_ = nullptr;
    QStackedWidget* block_views_ = nullptr; // the engine's block map, or attached engines'
    OccupancyChart* occupancy_ = nullptr;
    TimelineView* timeline_ = nullptr;
    ReplayBar* replay_bar_ = nullptr;
    RequestsPanel* requests_ = nullptr;
    PrefixView* prefix_ = nullptr;
    KernelSummaryPanel* kernels_ = nullptr;
    CompareView* compare_ = nullptr;
    QTabWidget* tabs_ = nullptr;
    QLabel* mode_label_ = nullptr;
};

} // namespace kvscope::ui
