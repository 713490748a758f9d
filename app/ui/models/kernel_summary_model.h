// Time by name in a table, the way `nsys stats` summarises kernels and NVTX
// ranges: CPU ops, GPU kernels, GPU copies and NVTX ranges, each with its
// share of its kind's total and the spread of its durations. Computed from
// the run in memory, so it works live and in replay, up to the moment shown.
#pragma once

#include "profiler/time_by_name.h"

#include <vector>

#include <QAbstractTableModel>

namespace kvscope::profiler {
class RunStore;
}

namespace kvscope::ui {

enum class TimeKind { cpu_op, gpu_kernel, gpu_copy, nvtx };
QString time_kind_name(TimeKind kind);

struct KernelSummaryRow {
    TimeKind kind = TimeKind::cpu_op;
    profiler::NamedDurations durations; // percent: of its kind's total
};

// Spans that ended by `until_ns` (negative: all of them), summarised by name:
// the CPU ops track, and every GPU track (kernels; copies by their
// "[CUDA mem...]" names; NVTX ranges from the tracks named "NVTX ...").
profiler::TimeSummaries live_time_summaries(const profiler::RunStore& store, qint64 until_ns);

// The rows of all four summaries, kind by kind, largest total first.
std::vector<KernelSummaryRow> kernel_summary_rows(const profiler::TimeSummaries& summaries);

class KernelSummaryModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column {
        KindColumn,
        NameColumn,
        PercentColumn,
        TotalColumn,
        InstancesColumn,
        MeanColumn,
        MedianColumn,
        MinColumn,
        MaxColumn,
        StdDevColumn,
        ColumnCount
    };
    // Raw values (numbers in ms or us as the header says, not text) for
    // sorting: use with a proxy's sortRole.
    static constexpr int SortRole = Qt::UserRole;

    explicit KernelSummaryModel(QObject* parent = nullptr);

    // Replaces the rows. Names already shown keep their row (so a sorted,
    // selected view stays put as numbers grow); new names are inserted; a
    // reset only when a shown name disappears (scrubbing back in time).
    void set_rows(std::vector<KernelSummaryRow> rows);
    const std::vector<KernelSummaryRow>& rows() const { return rows_; }

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation,
                        int role = Qt::DisplayRole) const override;

private:
    std::vector<KernelSummaryRow> rows_;
};

} // namespace kvscope::ui
