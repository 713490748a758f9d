// Chart text Qt Charts had to cut: a title, axis title or legend label that
// did not fit its room comes out ending in "..." (ChartPresenter's
// truncation). The app's README screenshot is 1440x900; at that size every
// chart must say what it shows in full.
#pragma once

#include <QChartView>
#include <QGraphicsScene>
#include <QGraphicsSimpleTextItem>
#include <QGraphicsTextItem>
#include <QStringList>
#include <QWidget>

namespace kvscope::test {

// Each cut text of the visible charts under `root`, "chart: text".
inline QStringList cut_chart_texts(const QWidget& root) {
    QStringList cut;
    for (const QChartView* view : root.findChildren<QChartView*>()) {
        if (!view->isVisible() || view->scene() == nullptr) {
            continue;
        }
        for (const QGraphicsItem* item : view->scene()->items()) {
            if (!item->isVisible()) {
                continue;
            }
            QString text;
            if (const auto* rich = qgraphicsitem_cast<const QGraphicsTextItem*>(item)) {
                text = rich->toPlainText();
            } else if (const auto* plain =
                           qgraphicsitem_cast<const QGraphicsSimpleTextItem*>(item)) {
                text = plain->text();
            }
            if (text.endsWith("...") || text.endsWith(QChar(0x2026))) {
                cut.append(view->chart()->title() + ": " + text);
            }
        }
    }
    return cut;
}

// Whether every visible chart under `root` has laid out (its plot area has
// a size): before that, nothing is cut yet and a check would prove nothing.
inline bool charts_laid_out(const QWidget& root) {
    for (const QChartView* view : root.findChildren<QChartView*>()) {
        if (view->isVisible() && view->chart()->plotArea().isEmpty()) {
            return false;
        }
    }
    return true;
}

} // namespace kvscope::test
