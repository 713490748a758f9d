// Time by name in a table, the way `nsys stats` summarises kernels and NVTX
// ranges: CPU ops, GPU kernels, GPU copies and NVTX ranges, each with its
// share of its kind's total and the spread of its durations. Computed from
// the run in memory, so it works live and in replay, up to the moment shown.
#pragma once

#include "app/ui/models/table_model.h"
#include "profiler/gate/time_by_name.h"

#include <vector>

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

class KernelSummaryModel : public TableModel<KernelSummaryRow> {
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
    // SortRole gives numbers in ms or us, as the header says.

    explicit KernelSummaryModel(QObject* parent = nullptr);

    // Replaces the rows. Names already shown keep their row (so a sorted,
    // selected view stays put as numbers grow); new names are inserted; a
    // reset only when a shown name disappears (scrubbing back in time).
    void set_rows(std::vector<KernelSummaryRow> rows);

private:
    QString display(const KernelSummaryRow& row, int column) const override;
    QVariant sort_value(const KernelSummaryRow& row, int column) const override;
    QVariant cell_role(const KernelSummaryRow& row, int column, int role) const override;
};

} // namespace kvscope::ui
