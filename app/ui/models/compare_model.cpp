#include "app/ui/models/compare_model.h"

#include <algorithm>

#include <QBrush>
#include <QColor>
#include <QFont>

namespace kvscope::ui {
namespace {

bool numeric(int column) {
    return column != CompareModel::MetricColumn && column != CompareModel::UnitColumn &&
           column != CompareModel::VerdictColumn;
}

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
    case CompareModel::PValueColumn:
        return cells.p_value;
    case CompareModel::SamplesColumn:
        return cells.samples;
    default:
        return cells.verdict;
    }
}

QVariant raw_value(const profiler::MetricComparison& m, const profiler::MetricCells& cells,
                   int column) {
    switch (column) {
    case CompareModel::BaseColumn:
        return m.base;
    case CompareModel::NewColumn:
        return m.now;
    case CompareModel::ChangeColumn:
        return m.change;
    case CompareModel::PValueColumn:
        return m.p_value;
    case CompareModel::SamplesColumn:
        return static_cast<qint64>(std::min(m.base_samples, m.new_samples));
    case CompareModel::VerdictColumn:
        return static_cast<int>(m.verdict);
    default:
        return QString::fromStdString(cell(cells, column));
    }
}

} // namespace

CompareModel::CompareModel(QObject* parent)
    : QAbstractTableModel(parent) {}

void CompareModel::set_comparison(std::vector<profiler::MetricComparison> rows) {
    beginResetModel();
    rows_ = std::move(rows);
    cells_.clear();
    for (const profiler::MetricComparison& m : rows_) {
        cells_.push_back(profiler::format_metric(m));
    }
    endResetModel();
}

void CompareModel::clear() {
    set_comparison({});
}

int CompareModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}

int CompareModel::columnCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant CompareModel::data(const QModelIndex& index, int role) const {
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) {
        return {};
    }
    const auto row = static_cast<std::size_t>(index.row());
    const profiler::MetricComparison& m = rows_[row];
    switch (role) {
    case Qt::DisplayRole:
        return QString::fromStdString(cell(cells_[row], index.column()));
    case SortRole:
        return raw_value(m, cells_[row], index.column());
    case Qt::TextAlignmentRole:
        return static_cast<int>(numeric(index.column()) ? Qt::AlignRight | Qt::AlignVCenter
                                                        : Qt::AlignLeft | Qt::AlignVCenter);
    case Qt::ForegroundRole:
        if (index.column() == VerdictColumn && m.verdict == profiler::Verdict::regressed) {
            return QBrush(QColor(0xc6, 0x28, 0x28));
        }
        if (index.column() == VerdictColumn && m.verdict == profiler::Verdict::improved) {
            return QBrush(QColor(0x2e, 0x7d, 0x32));
        }
        return {};
    case Qt::FontRole:
        if (index.column() == VerdictColumn && m.verdict == profiler::Verdict::regressed) {
            QFont bold;
            bold.setBold(true);
            return bold;
        }
        return {};
    default:
        return {};
    }
}

QVariant CompareModel::headerData(int section, Qt::Orientation orientation, int role) const {
    if (orientation != Qt::Horizontal || section < 0 || section >= ColumnCount) {
        return {};
    }
    if (role == Qt::TextAlignmentRole) {
        return static_cast<int>(numeric(section) ? Qt::AlignRight | Qt::AlignVCenter
                                                 : Qt::AlignLeft | Qt::AlignVCenter);
    }
    if (role != Qt::DisplayRole) {
        return {};
    }
    // The CLI's column names.
    switch (section) {
    case MetricColumn:
        return tr("metric");
    case UnitColumn:
        return tr("unit");
    case BaseColumn:
        return tr("base");
    case NewColumn:
        return tr("new");
    case ChangeColumn:
        return tr("change");
    case PValueColumn:
        return tr("p");
    case SamplesColumn:
        return tr("samples");
    case VerdictColumn:
        return tr("verdict");
    default:
        return {};
    }
}

QString regression_summary(int regressions) {
    if (regressions == 0) {
        return CompareModel::tr("No regression");
    }
    return regressions == 1 ? CompareModel::tr("1 regression")
                            : CompareModel::tr("%1 regressions").arg(regressions);
}

} // namespace kvscope::ui
