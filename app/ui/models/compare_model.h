// The rows and columns `kvscope compare` prints, as a table model: one row per
// metric, the verdict coloured (regressed red, improved green), with each
// metric's interval and whether noise moves it (the robust column's tooltip
// says what that means). The text of
// every cell comes from profiler::format_metric(), the CLI's own formatting.
#pragma once

#include "app/ui/models/table_model.h"
#include "profiler/gate/compare.h"

#include <vector>

namespace kvscope::ui {

// One metric compared, and its cells as text (formatted once).
struct CompareRow {
    profiler::MetricComparison metric;
    profiler::MetricCells cells;
};

class CompareModel : public TableModel<CompareRow> {
    Q_OBJECT
public:
    enum Column {
        MetricColumn,
        UnitColumn,
        BaseColumn,
        NewColumn,
        ChangeColumn,
        IntervalColumn,
        PValueColumn,
        SamplesColumn,
        RobustColumn,
        VerdictColumn,
        ColumnCount
    };

    explicit CompareModel(QObject* parent = nullptr);

    // A new comparison replaces the old one entirely (a reset).
    void set_comparison(std::vector<profiler::MetricComparison> rows);
    void clear();
    int regressions() const;

private:
    QString display(const CompareRow& row, int column) const override;
    QVariant sort_value(const CompareRow& row, int column) const override;
    QVariant cell_role(const CompareRow& row, int column, int role) const override;
};

// The one-line outcome: "No regression", "1 regression", "3 regressions".
QString regression_summary(int regressions);

} // namespace kvscope::ui
