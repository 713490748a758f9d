// File > Simulate trace…: kvscope simulate in the app. A trace (Mooncake,
// Qwen-Bailian or kvscope JSONL), capacities (several, or a sweep of ten
// halving), cache policies, a cluster's nodes and router; the replays run on
// worker threads with their progress shown and can be cancelled; the hit
// ratio against capacity is plotted (a line per policy) and tabled. "Show in
// views" records the chosen row's configuration - its first requests: a
// recording holds every block event - and the main window opens the
// recording in the usual views (block map, occupancy, prefix tree, timeline).
#pragma once

#include "app/ui/workers/worker_threads.h"
#include "engine/sim/simulator.h"

#include <memory>
#include <vector>

#include <QDialog>
#include <QTemporaryDir>

class QCheckBox;
class QComboBox;
class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QTableWidget;
class QChartView;

namespace kvscope::ui {

class SimulateDialog : public QDialog {
    Q_OBJECT
public:
    explicit SimulateDialog(QWidget* parent = nullptr);
    ~SimulateDialog() override;

    // The form, for tests and for a trace given on the command line.
    void set_trace(const QString& path);
    void set_capacities(const QString& text); // "100000,20000" or "8GiB"-free block counts
    void set_sweep(bool sweep);
    void set_policies(bool lru, bool lfu);
    void set_nodes(int nodes, bool cache_aware);
    void set_max_requests(int requests); // 0: the whole trace

    // Starts the replays; false (the reason shown) when the form is wrong.
    bool start();
    void cancel();
    bool running() const { return running_; }
    // Records the table's row `row` and emits record_ready with the file.
    bool show_in_views(int row);

    const std::vector<sim::SimulationConfig>& configs() const { return configs_; }
    const std::vector<sim::SimulationResult>& results() const { return results_; }
    QTableWidget* table() const { return table_; }
    QChartView* chart() const { return chart_; }
    QString problem() const;

    static constexpr int kRecordedRequests = 500;

signals:
    void finished_replays(); // results() holds them (cancelled ones partly)
    void record_ready(const QString& path);
    void failed(const QString& why);

private:
    void browse();
    bool read_form(std::vector<sim::SimulationConfig>& configs, QString& why) const;
    void show_results();
    void set_busy(bool busy);
    sim::TraceOpener opener() const;

    QLineEdit* trace_ = nullptr;
    QComboBox* format_ = nullptr;
    QSpinBox* block_size_ = nullptr;
    QLineEdit* capacities_ = nullptr;
    QCheckBox* sweep_ = nullptr;
    QCheckBox* lru_ = nullptr;
    QCheckBox* lfu_ = nullptr;
    QSpinBox* nodes_ = nullptr;
    QComboBox* router_ = nullptr;
    QSpinBox* max_requests_ = nullptr;
    QPushButton* run_ = nullptr;
    QPushButton* cancel_ = nullptr;
    QPushButton* show_ = nullptr;
    QProgressBar* progress_ = nullptr;
    QLabel* status_ = nullptr;
    QTableWidget* table_ = nullptr;
    QChartView* chart_ = nullptr;

    bool running_ = false;
    WorkerThreads workers_; // replays and recordings; the destructor waits for them
    std::vector<sim::SimulationConfig> configs_;
    std::vector<sim::SimulationResult> results_;
    QTemporaryDir recordings_;
};

} // namespace kvscope::ui
