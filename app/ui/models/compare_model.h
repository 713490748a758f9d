// The rows and columns `kvscope compare` prints, as a table model: one row per
// metric, the verdict coloured (regressed red, improved green). The text of
// every cell comes from profiler::format_metric(), the CLI's own formatting.
#pragma once

#include "profiler/compare.h"

#include <vector>

#include <QAbstractTableModel>

namespace kvscope::ui {

class CompareModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column {
        MetricColumn,
        UnitColumn,
        BaseColumn,
        NewColumn,
        ChangeColumn,
        PValueColumn,
        SamplesColumn,
        VerdictColumn,
        ColumnCount
    };
    // Raw values (numbers, not text) for sorting: use with a proxy's sortRole.
    static constexpr int SortRole = Qt::UserRole;

    explicit CompareModel(QObject* parent = nullptr);

    // A new comparison replaces the old one entirely (a reset).
    void set_comparison(std::vector<profiler::MetricComparison> rows);
    void clear();
    const std::vector<profiler::MetricComparison>& comparison() const { return rows_; }
    int regressions() const { return profiler::count_regressions(rows_); }

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation,
                        int role = Qt::DisplayRole) const override;

private:
    std::vector<profiler::MetricComparison> rows_;
    std::vector<profiler::MetricCells> cells_; // rows_ as text, formatted once
};

// The one-line outcome: "No regression", "1 regression", "3 regressions".
QString regression_summary(int regressions);

} // namespace kvscope::ui
