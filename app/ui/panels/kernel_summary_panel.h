// The time-by-name view: CPU ops, GPU kernels, copies and NVTX ranges in a
// sortable table, summarised up to the moment shown. Recomputing walks every
// span of the run, so live updates are coalesced to about two a second.
#pragma once

#include <QElapsedTimer>
#include <QWidget>

class QSortFilterProxyModel;
class QTableView;
class QTimer;

namespace kvscope::profiler {
class RunStore;
}

namespace kvscope::ui {

class KernelSummaryModel;

class KernelSummaryPanel : public QWidget {
    Q_OBJECT
public:
    explicit KernelSummaryPanel(QWidget* parent = nullptr);

    // The run to show (not owned; it must outlive the panel or be replaced
    // first); nullptr empties the table. Recomputes at once.
    void set_store(const profiler::RunStore* store);
    // The moment to show: spans that ended by then; negative follows the end
    // of the run so far (live). Refreshes.
    void set_time_ns(qint64 t_ns);
    qint64 time_ns() const { return time_ns_; }
    // Recomputes from the store, at once when the last recompute is older
    // than kMinInterval_ms, else once that interval has passed.
    void refresh();

    static constexpr int kMinInterval_ms = 500;

    KernelSummaryModel* model() const { return model_; }
    QTableView* table() const { return table_; }

private:
    void recompute();

    const profiler::RunStore* store_ = nullptr;
    qint64 time_ns_ = -1;
    KernelSummaryModel* model_ = nullptr;
    QSortFilterProxyModel* proxy_ = nullptr;
    QTableView* table_ = nullptr;
    QTimer* pending_ = nullptr;
    QElapsedTimer since_recompute_;
};

} // namespace kvscope::ui
