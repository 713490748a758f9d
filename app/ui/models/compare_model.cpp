#include "app/ui/models/compare_model.h"

#include <algorithm>

#include <QBrush>
#include <QColor>
#include <QFont>

namespace kvscope::ui {
namespace {

const std::string& cell(const profiler::MetricCells& cells, int column) {
    switch (column) {
    case CompareModel::MetricColumn:
        return cells.metric;
    case CompareModel::UnitColumn:
        return cells.unit;
    case CompareModel::BaseColumn:
        return cells.base;
    case CompareModel::NewColumn:
        return cells.now;
    case CompareModel::ChangeColumn:
        return cells.change;
    case CompareModel::IntervalColumn:
        return cells.interval;
    case CompareModel::RobustColumn:
        return cells.robust;
    case CompareModel::PValueColumn:
        return cells.p_value;
    case CompareModel::SamplesColumn:
        return cells.samples;
    default:
        return cells.verdict;
    }
}

} // namespace

CompareModel::CompareModel(QObject* parent)
    // The CLI's column names.
    : TableModel({{tr("metric"), false},
                  {tr("unit"), false},
                  {tr("base")},
                  {tr("new")},
                  {tr("change")},
                  {tr("interval"), false},
                  {tr("p")},
                  {tr("samples")},
                  {tr("robust"), false},
                  {tr("verdict"), false}},
                 parent) {}

void CompareModel::set_comparison(std::vector<profiler::MetricComparison> rows) {
    std::vector<CompareRow> compared;
    compared.reserve(rows.size());
    for (profiler::MetricComparison& m : rows) {
        profiler::MetricCells cells = profiler::format_metric(m);
        compared.push_back({std::move(m), std::move(cells)});
    }
    reset_rows(std::move(compared));
}

void CompareModel::clear() {
    set_comparison({});
}

int CompareModel::regressions() const {
    std::vector<profiler::MetricComparison> metrics;
    for (const CompareRow& row : rows_) {
        metrics.push_back(row.metric);
    }
    return profiler::count_regressions(metrics);
}

QString CompareModel::display(const CompareRow& row, int column) const {
    return QString::fromStdString(cell(row.cells, column));
}

QVariant CompareModel::sort_value(const CompareRow& row, int column) const {
    const profiler::MetricComparison& m = row.metric;
    switch (column) {
    case BaseColumn:
        return m.base;
    case NewColumn:
        return m.now;
    case ChangeColumn:
        return m.change;
    case IntervalColumn:
        return m.low;
    case PValueColumn:
        return m.p_value;
    case SamplesColumn:
        return static_cast<qint64>(std::min(m.base_samples, m.new_samples));
    case VerdictColumn:
        return static_cast<int>(m.verdict);
    default:
        return display(row, column);
    }
}

QVariant CompareModel::cell_role(const CompareRow& row, int column, int role) const {
    if (column == RobustColumn && role == Qt::ToolTipRole) {
        if (row.metric.basis == profiler::Basis::exact) {
            return tr("Work the workload fixes: compared exactly, no noise");
        }
        return row.metric.noise_robust
                   ? tr("Noise-robust: a busy machine delays this metric's work but barely "
                        "changes it")
                   : tr("Wall clock: a busy machine moves it; trust repetitions (kvscope gate), "
                        "not one run");
    }
    if (column == IntervalColumn && role == Qt::ToolTipRole && row.metric.high > 0) {
        return tr("%1% confidence interval of the ratio new/base")
            .arg(qRound(100 * row.metric.confidence));
    }
    if (column != VerdictColumn) {
        return {};
    }
    const profiler::Verdict verdict = row.metric.verdict;
    if (role == Qt::ForegroundRole && verdict == profiler::Verdict::regressed) {
        return QBrush(QColor(0xc6, 0x28, 0x28));
    }
    if (role == Qt::ForegroundRole && verdict == profiler::Verdict::improved) {
        return QBrush(QColor(0x2e, 0x7d, 0x32));
    }
    if (role == Qt::FontRole && verdict == profiler::Verdict::regressed) {
        QFont bold;
        bold.setBold(true);
        return bold;
    }
    return {};
}

QString regression_summary(int regressions) {
    if (regressions == 0) {
        return CompareModel::tr("No regression");
    }
    return regressions == 1 ? CompareModel::tr("1 regression")
                            : CompareModel::tr("%1 regressions").arg(regressions);
}

} // namespace kvscope::ui
