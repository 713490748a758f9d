// A chart's legend as text that wraps under it. Qt Charts lays its own
// legend out in one row and cuts the names that do not fit ("Fragmenta...",
// "Us..."); a narrow chart with a hybrid cache's or an offload tier's lines
// then names none of them. This label breaks between entries instead, so
// every series keeps its whole name at any width.
#pragma once

#include <QLabel>
#include <QList>
#include <QStringList>

class QAbstractSeries;
class QChart;

namespace kvscope::ui {

class WrappingLegend : public QLabel {
    Q_OBJECT
public:
    // Hides `chart`'s own legend and stands in for it.
    explicit WrappingLegend(QChart* chart, QWidget* parent = nullptr);

    // Leaves `series` out (or back in) while it stays in the chart: a time
    // cursor, a line with nothing to draw in this run.
    void set_left_out(const QAbstractSeries* series, bool left_out);
    // Takes in series added, renamed, shown or hidden since the last call.
    void refresh();
    // The names shown, in the chart's order.
    const QStringList& entries() const { return entries_; }

private:
    QChart* chart_;
    QList<const QAbstractSeries*> left_out_;
    QStringList entries_;
};

} // namespace kvscope::ui
