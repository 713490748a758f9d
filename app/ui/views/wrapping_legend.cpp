#include "app/ui/views/wrapping_legend.h"

#include <QAbstractBarSeries>
#include <QAbstractSeries>
#include <QAreaSeries>
#include <QBarSet>
#include <QChart>
#include <QLegend>
#include <QLineSeries>
#include <QPen>

namespace kvscope::ui {
namespace {

QString square(const QColor& colour) {
    return QString("<span style=\"color:%1\">\u25A0</span>").arg(colour.name());
}

// The swatch: a square in an area's colour, a line's stroke in its colour
// (broken for a dashed or dotted pen).
QString swatch(const QAbstractSeries* series) {
    if (const auto* line = qobject_cast<const QLineSeries*>(series)) {
        const QPen pen = line->pen();
        const QString stroke =
            pen.style() == Qt::SolidLine ? QString("\u2501\u2501") : QString("\u254D\u254D");
        return QString("<span style=\"color:%1\">%2</span>").arg(pen.color().name(), stroke);
    }
    const auto* area = qobject_cast<const QAreaSeries*>(series);
    return square(area != nullptr ? area->brush().color() : QColor(Qt::gray));
}

} // namespace

WrappingLegend::WrappingLegend(QChart* chart, QWidget* parent)
    : QLabel(parent)
    , chart_(chart) {
    chart_->legend()->hide();
    setWordWrap(true);
    setTextFormat(Qt::RichText);
    setAlignment(Qt::AlignHCenter | Qt::AlignTop);
    setContentsMargins(6, 0, 6, 4);
    setObjectName("chart_legend");
}

void WrappingLegend::set_left_out(const QAbstractSeries* series, bool left_out) {
    left_out_.removeAll(series);
    if (left_out) {
        left_out_.append(series);
    }
}

void WrappingLegend::refresh() {
    QStringList names;
    QStringList items;
    // Non-breaking inside an entry; the space between entries is where a
    // line may break.
    const auto add = [&](const QString& name, const QString& swatch) {
        names.append(name);
        items.append("<span style=\"white-space:nowrap\">" + swatch + "&nbsp;" +
                     name.toHtmlEscaped() + "</span>");
    };
    for (const QAbstractSeries* series : chart_->series()) {
        if (!series->isVisible() || left_out_.contains(series)) {
            continue;
        }
        if (const auto* bars = qobject_cast<const QAbstractBarSeries*>(series)) {
            for (QBarSet* set : bars->barSets()) { // a bar series names its sets
                add(set->label(), square(set->color()));
            }
        } else if (!series->name().isEmpty()) {
            add(series->name(), swatch(series));
        }
    }
    entries_ = names;
    // The whole text, so a colour or pen that changed under the same names
    // is redrawn too; setText() with the same text is cheap to skip.
    const QString html = items.join("&nbsp;&nbsp; ");
    if (html != text()) {
        setText(html);
    }
}

} // namespace kvscope::ui
