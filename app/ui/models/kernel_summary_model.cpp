#include "app/ui/models/kernel_summary_model.h"

#include "profiler/store/run_store.h"

#include <algorithm>
#include <map>
#include <unordered_map>

namespace kvscope::ui {
namespace {

using Durations = std::unordered_map<std::int32_t, std::vector<std::int64_t>>;

// Spans are sorted by begin; those that began after `until_ns` cannot have
// ended by then, so only the prefix up to there is looked at.
void collect(const profiler::SpanTrack& track, qint64 until_ns, Durations& by_label) {
    auto end = track.spans.end();
    if (until_ns >= 0) {
        end = std::upper_bound(
            track.spans.begin(), track.spans.end(), until_ns,
            [](qint64 t, const profiler::Span& span) { return t < span.begin_ns; });
    }
    for (auto span = track.spans.begin(); span != end; ++span) {
        if (span->end_ns >= span->begin_ns && (until_ns < 0 || span->end_ns <= until_ns)) {
            by_label[span->label].push_back(span->end_ns - span->begin_ns);
        }
    }
}

std::vector<profiler::NamedDurations> summarise(const profiler::RunStore& store,
                                                Durations by_label) {
    std::map<std::string, std::vector<std::int64_t>> by_name;
    for (auto& [label, durations] : by_label) {
        std::vector<std::int64_t>& into = by_name[store.names()[static_cast<std::size_t>(label)]];
        into.insert(into.end(), durations.begin(), durations.end());
    }
    return profiler::summarise_durations(std::move(by_name));
}

bool is_copy(const std::string& name) {
    return name.starts_with("[CUDA memcpy") || name.starts_with("[CUDA memset");
}

QVariant value_of(const KernelSummaryRow& row, int column) {
    const profiler::NamedDurations& d = row.durations;
    switch (column) {
    case KernelSummaryModel::KindColumn:
        return time_kind_name(row.kind);
    case KernelSummaryModel::NameColumn:
        return QString::fromStdString(d.name);
    case KernelSummaryModel::PercentColumn:
        return d.percent;
    case KernelSummaryModel::TotalColumn:
        return static_cast<double>(d.total_ns) * 1e-6;
    case KernelSummaryModel::InstancesColumn:
        return static_cast<qint64>(d.instances);
    case KernelSummaryModel::MeanColumn:
        return d.mean_ns * 1e-3;
    case KernelSummaryModel::MedianColumn:
        return d.median_ns * 1e-3;
    case KernelSummaryModel::MinColumn:
        return static_cast<double>(d.min_ns) * 1e-3;
    case KernelSummaryModel::MaxColumn:
        return static_cast<double>(d.max_ns) * 1e-3;
    case KernelSummaryModel::StdDevColumn:
        return d.stddev_ns * 1e-3;
    default:
        return {};
    }
}

QString text_of(const KernelSummaryRow& row, int column) {
    const QVariant raw = value_of(row, column);
    switch (column) {
    case KernelSummaryModel::KindColumn:
    case KernelSummaryModel::NameColumn:
        return raw.toString();
    case KernelSummaryModel::InstancesColumn:
        return QString::number(raw.toLongLong());
    case KernelSummaryModel::PercentColumn:
        return QString::number(raw.toDouble(), 'f', 1);
    case KernelSummaryModel::TotalColumn:
        return QString::number(raw.toDouble(), 'f', 3);
    default:
        return QString::number(raw.toDouble(), 'f', 2);
    }
}

bool same_key(const KernelSummaryRow& a, const KernelSummaryRow& b) {
    return a.kind == b.kind && a.durations.name == b.durations.name;
}

} // namespace

QString time_kind_name(TimeKind kind) {
    switch (kind) {
    case TimeKind::cpu_op:
        return KernelSummaryModel::tr("CPU op");
    case TimeKind::gpu_kernel:
        return KernelSummaryModel::tr("GPU kernel");
    case TimeKind::gpu_copy:
        return KernelSummaryModel::tr("copy");
    case TimeKind::nvtx:
        return KernelSummaryModel::tr("NVTX");
    }
    return {};
}

profiler::TimeSummaries live_time_summaries(const profiler::RunStore& store, qint64 until_ns) {
    Durations cpu;
    collect(store.cpu_ops(), until_ns, cpu);
    Durations gpu;
    Durations nvtx;
    for (const profiler::SpanTrack& track : store.gpu_tracks()) {
        collect(track, until_ns, track.name.starts_with("NVTX") ? nvtx : gpu);
    }
    // Copies and memsets share the kernels' tracks; split them by name.
    Durations copies;
    for (auto it = gpu.begin(); it != gpu.end();) {
        if (is_copy(store.names()[static_cast<std::size_t>(it->first)])) {
            copies.insert(std::move(*it));
            it = gpu.erase(it);
        } else {
            ++it;
        }
    }
    profiler::TimeSummaries s;
    s.cpu_ops = summarise(store, std::move(cpu));
    s.gpu_kernels = summarise(store, std::move(gpu));
    s.gpu_memory_ops = summarise(store, std::move(copies));
    s.nvtx_ranges = summarise(store, std::move(nvtx));
    return s;
}

std::vector<KernelSummaryRow> kernel_summary_rows(const profiler::TimeSummaries& summaries) {
    std::vector<KernelSummaryRow> rows;
    const auto add = [&rows](TimeKind kind, const std::vector<profiler::NamedDurations>& list) {
        for (const profiler::NamedDurations& d : list) {
            rows.push_back({kind, d});
        }
    };
    add(TimeKind::cpu_op, summaries.cpu_ops);
    add(TimeKind::gpu_kernel, summaries.gpu_kernels);
    add(TimeKind::gpu_copy, summaries.gpu_memory_ops);
    add(TimeKind::nvtx, summaries.nvtx_ranges);
    return rows;
}

KernelSummaryModel::KernelSummaryModel(QObject* parent)
    : TableModel({{tr("Kind"), false},
                  {tr("Name"), false},
                  {tr("Time %")},
                  {tr("Total (ms)")},
                  {tr("Instances")},
                  {tr("Mean (us)")},
                  {tr("Median (us)")},
                  {tr("Min (us)")},
                  {tr("Max (us)")},
                  {tr("StdDev (us)")}},
                 parent) {}

void KernelSummaryModel::set_rows(std::vector<KernelSummaryRow> rows) {
    // Where each shown name is in the new rows; any missing means a reset.
    std::vector<std::size_t> source;
    source.reserve(rows_.size());
    std::vector<bool> taken(rows.size(), false);
    for (const KernelSummaryRow& shown : rows_) {
        std::size_t i = 0;
        while (i < rows.size() && (taken[i] || !same_key(rows[i], shown))) {
            ++i;
        }
        if (i == rows.size()) {
            beginResetModel();
            rows_ = std::move(rows);
            endResetModel();
            return;
        }
        taken[i] = true;
        source.push_back(i);
    }
    bool changed = false;
    for (std::size_t i = 0; i < rows_.size(); ++i) {
        const KernelSummaryRow& now = rows[source[i]];
        for (int column = PercentColumn; column < ColumnCount && !changed; ++column) {
            changed = value_of(now, column) != value_of(rows_[i], column);
        }
        rows_[i] = std::move(rows[source[i]]);
    }
    const int old_count = static_cast<int>(rows_.size());
    if (changed) {
        emit dataChanged(index(0, PercentColumn), index(old_count - 1, ColumnCount - 1),
                         {Qt::DisplayRole, SortRole});
    }
    std::vector<KernelSummaryRow> added;
    for (std::size_t i = 0; i < rows.size(); ++i) {
        if (!taken[i]) {
            added.push_back(std::move(rows[i]));
        }
    }
    if (!added.empty()) {
        beginInsertRows({}, old_count, old_count + static_cast<int>(added.size()) - 1);
        rows_.insert(rows_.end(), std::make_move_iterator(added.begin()),
                     std::make_move_iterator(added.end()));
        endInsertRows();
    }
}

QString KernelSummaryModel::display(const KernelSummaryRow& row, int column) const {
    return text_of(row, column);
}

QVariant KernelSummaryModel::sort_value(const KernelSummaryRow& row, int column) const {
    return value_of(row, column);
}

QVariant KernelSummaryModel::cell_role(const KernelSummaryRow& row, int column, int role) const {
    return role == Qt::ToolTipRole && column == NameColumn
               ? QVariant(QString::fromStdString(row.durations.name))
               : QVariant();
}

} // namespace kvscope::ui
