// Comparing two recordings in the app, the way `kvscope compare` does on the
// command line: pick a base and a new recording, set the threshold and the
// significance level, and read the metric table with its verdicts. Reading
// the recordings runs on a worker thread, so large files never freeze the UI,
// and a bad file shows its reason instead of a table.
#pragma once

#include "app/ui/workers/worker_threads.h"
#include "profiler/gate/compare.h"

#include <memory>
#include <vector>

#include <QString>
#include <QWidget>

class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QPushButton;
class QTableView;

namespace kvscope::ui {

class CompareModel;

// What one comparison produced; shared read-only between the worker and the
// view.
struct CompareResult {
    std::vector<profiler::RecordingStats> base; // a recording, or a folder's repetitions
    std::vector<profiler::RecordingStats> now;
    profiler::CompareOptions options;
    std::vector<profiler::MetricComparison> rows;
};

class CompareView : public QWidget {
    Q_OBJECT
public:
    explicit CompareView(QWidget* parent = nullptr);
    // Waits for a comparison still running (reading two files: seconds at most).
    ~CompareView() override;

    // Fills the two file fields (call start() to compare them).
    void set_files(const QString& base, const QString& now);
    QString base_file() const;
    QString new_file() const;

    profiler::CompareOptions options() const;
    void set_options(const profiler::CompareOptions& options);

    bool is_running() const { return running_ > 0; }
    // The last comparison, null before the first or after a failure.
    std::shared_ptr<const CompareResult> result() const { return result_; }
    CompareModel* model() const { return model_; }
    // "No regression", "N regressions"; empty when there is no result.
    QString summary_text() const;
    // Why the last comparison failed; empty when it did not.
    QString error_text() const { return error_; }

public slots:
    // Compares the two files on a worker thread; finished() follows. A start
    // while one runs supersedes it (the older result is dropped).
    void start();

signals:
    // A comparison ended, with a result or an error_text().
    void finished();

private:
    void browse(QLineEdit* field, const QString& title);
    void browse_folder(QLineEdit* field, const QString& title);
    void on_result(const std::shared_ptr<const CompareResult>& result);
    void on_failed(const QString& message);
    void show_status(const QString& text, bool error);

    QLineEdit* base_edit_ = nullptr;
    QLineEdit* new_edit_ = nullptr;
    QDoubleSpinBox* threshold_spin_ = nullptr; // percent
    QDoubleSpinBox* alpha_spin_ = nullptr;
    double hit_rate_drop_ = profiler::CompareOptions{}.hit_rate_drop; // no field: rarely changed
    QPushButton* compare_button_ = nullptr;
    QLabel* status_label_ = nullptr;
    QTableView* table_ = nullptr;
    QLabel* criteria_label_ = nullptr;
    CompareModel* model_ = nullptr;

    int generation_ = 0; // of the latest start(); older workers' results are stale
    int running_ = 0;
    std::shared_ptr<const CompareResult> result_;
    QString error_;
    WorkerThreads workers_; // last: goes first, while what its work reports to is there
};

} // namespace kvscope::ui
