// TimelineView's painting: the ruler, one folded drawing plan per track, the
// counters reduced to one column of pixels per sample bucket, and the cursor.
// Nothing here walks a whole track: spans come from fold_spans(), counter
// samples from the visible range only.
#include "app/ui/views/counter_columns.h"
#include "app/ui/views/span_folding.h"
#include "app/ui/views/timeline_view.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <QFontMetrics>
#include <QLocale>
#include <QPaintEvent>
#include <QPainter>
#include <QPolygonF>
#include <QScrollBar>

namespace kvscope::ui {

namespace {

const QColor kSpanText(0x1a, 0x1a, 0x1a);
const QColor kFoldedFill(0xd2, 0xd2, 0xd2);
const QColor kFoldedHatch(0x8c, 0x8c, 0x8c);
const QColor kCursor(0xc0, 0x10, 0x30);
// Text is drawn on a span only when it has this much room, so small spans
// stay clean colour blocks.
constexpr int kMinTextPx = 28;
constexpr double kMinTickSpacingPx = 90;

QColor counter_color(profiler::Counter counter) {
    switch (counter) {
    case profiler::Counter::used_blocks:
        return QColor(0x3b, 0x7d, 0xd8);
    case profiler::Counter::cached_blocks:
        return QColor(0x2e, 0x9e, 0x6a);
    case profiler::Counter::global_group_blocks:
        return QColor(0x1f, 0x3c, 0x6e);
    case profiler::Counter::window_group_blocks:
        return QColor(0x78, 0x3c, 0x96);
    default:
        return QColor(0xc0, 0x70, 0x2b);
    }
}

QString q(std::string_view text) {
    return QString::fromUtf8(text.data(), static_cast<qsizetype>(text.size()));
}

// Where a plan rectangle lands in widget pixels: at least one pixel wide, so
// an isolated narrow span stays visible.
QRectF span_rect(const FoldedRect& rect, const QRect& track) {
    return QRectF(track.left() + rect.x0, track.top() + 1, std::max(rect.x1 - rect.x0, 1.0),
                  track.height() - 2);
}

void paint_folded(QPainter& painter, const QRectF& rect) {
    painter.fillRect(rect, kFoldedFill);
    painter.fillRect(rect, QBrush(kFoldedHatch, Qt::BDiagPattern));
}

// The text when it fits `room`, elided when there is room for a few
// characters, else nothing.
QString fitted_text(const QFontMetrics& metrics, const QString& text, qreal room) {
    if (room < kMinTextPx) {
        return {};
    }
    if (metrics.horizontalAdvance(text) <= room) {
        return text;
    }
    return metrics.elidedText(text, Qt::ElideRight, static_cast<int>(room));
}

// Paints one track's plan: folded runs hatched, spans in `color_of(index)`,
// with `text_of(index)` on those wide enough.
template <typename ColorOf, typename TextOf>
void paint_plan(QPainter& painter, const QRect& track, const std::vector<FoldedRect>& plan,
                ColorOf color_of, TextOf text_of) {
    const QFontMetrics metrics = painter.fontMetrics();
    const bool has_room_for_text = track.height() >= metrics.height();
    for (const FoldedRect& rect : plan) {
        const QRectF area = span_rect(rect, track);
        if (rect.folded()) {
            paint_folded(painter, area);
            continue;
        }
        painter.fillRect(area, color_of(rect.first));
        if (!has_room_for_text || area.width() < kMinTextPx) {
            continue;
        }
        // Clip the text to the visible part of a span crossing an edge.
        const QRectF visible = area.intersected(QRectF(track)).adjusted(3, 0, -3, 0);
        const QString text = fitted_text(metrics, text_of(rect.first), visible.width());
        if (!text.isEmpty()) {
            painter.setPen(kSpanText);
            painter.drawText(visible, Qt::AlignVCenter | Qt::AlignLeft, text);
        }
    }
}

} // namespace

void TimelineView::paintEvent(QPaintEvent* event) {
    QPainter painter(this);
    painter.fillRect(event->rect(), palette().base());
    QFont small = font();
    if (small.pointSizeF() > 0) {
        small.setPointSizeF(small.pointSizeF() * 0.85);
    }
    painter.setFont(small);

    paint_grid(painter);
    const std::vector<Row> all = rows();
    for (const Row& row : all) {
        painter.setClipRect(row.rect.adjusted(kLabelWidth, 0, 0, 0));
        if (row.kind == RowKind::counter) {
            paint_counter(painter, row);
        } else if (store_ != nullptr) {
            paint_row(painter, row);
        }
        painter.setClipping(false);
        paint_row_label(painter, row);
    }
    // Lanes have no borders of their own (they may be 4 px): one line above them.
    painter.setPen(palette().mid().color());
    painter.drawLine(0, lanes_top(), width(), lanes_top());
    paint_ruler(painter);
    paint_cursor(painter);
}

void TimelineView::paint_grid(QPainter& painter) const {
    QColor line = palette().text().color();
    line.setAlpha(28);
    painter.setPen(line);
    const std::int64_t origin = store_ != nullptr ? store_->start_ns() : 0;
    for (const TimeTick& tick : time_ticks(axis_, origin, kMinTickSpacingPx)) {
        const double x = kLabelWidth + tick.x;
        painter.drawLine(QPointF(x, kRulerHeight), QPointF(x, height()));
    }
}

void TimelineView::paint_ruler(QPainter& painter) const {
    const QRect ruler(0, 0, width(), kRulerHeight);
    painter.fillRect(ruler, palette().window());
    painter.setPen(palette().mid().color());
    painter.drawLine(ruler.bottomLeft(), ruler.bottomRight());

    // The one hint the mouse needs; the ruler's tooltip has the rest.
    QColor hint = palette().text().color();
    hint.setAlpha(150);
    painter.setPen(hint);
    painter.drawText(QRect(4, 0, kLabelWidth - 8, kRulerHeight), Qt::AlignVCenter | Qt::AlignLeft,
                     tr("wheel: zoom, drag: pan"));

    painter.setClipRect(ruler.adjusted(kLabelWidth, 0, 0, 0));
    painter.setPen(palette().text().color());
    const std::int64_t origin = store_ != nullptr ? store_->start_ns() : 0;
    for (const TimeTick& tick : time_ticks(axis_, origin, kMinTickSpacingPx)) {
        const double x = kLabelWidth + tick.x;
        painter.drawLine(QPointF(x, kRulerHeight - 6), QPointF(x, kRulerHeight));
        painter.drawText(QPointF(x + 3, kRulerHeight - 8), q(tick.label));
    }
    painter.setClipping(false);
}

void TimelineView::paint_row_label(QPainter& painter, const Row& row) const {
    const QRect label(row.rect.left(), row.rect.top(), kLabelWidth, row.rect.height());
    painter.fillRect(label, palette().window());
    painter.setPen(palette().mid().color());
    painter.drawLine(label.topRight(), label.bottomRight());
    if (row.kind != RowKind::lane) {
        painter.drawLine(row.rect.topLeft(), row.rect.topRight());
    }
    const QFontMetrics metrics = painter.fontMetrics();
    if (row.rect.height() + 2 < metrics.height()) {
        return; // thin request lanes: the tooltip names them
    }
    painter.setPen(palette().text().color());
    const QRect text_area = label.adjusted(6, 0, -6 - (lane_scroll_->isVisible() ? 14 : 0), 0);
    if (row.kind != RowKind::counter) {
        painter.drawText(text_area, Qt::AlignVCenter | Qt::AlignLeft,
                         metrics.elidedText(row_label(row), Qt::ElideRight, text_area.width()));
        return;
    }
    // Counters: the name, and the value at the cursor (or the latest one).
    painter.drawText(text_area.adjusted(0, 3, 0, 0), Qt::AlignTop | Qt::AlignLeft, row_label(row));
    if (store_ == nullptr) {
        return;
    }
    const CounterRow& counter = kCounterRows[row.index];
    const profiler::CounterTrack& track = store_->counter(counter.counter);
    if (track.values.empty()) {
        return;
    }
    const double value = cursor_ns_ ? track.value_at(*cursor_ns_) : track.values.back();
    const bool bytes = counter.counter == profiler::Counter::kv_bytes_used ||
                       counter.counter == profiler::Counter::gpu_used_bytes;
    const QString text = bytes ? QLocale().formattedDataSize(static_cast<qint64>(value))
                               : QString::number(value, 'f', 0);
    painter.setPen(counter_color(counter.counter).darker(130));
    painter.drawText(text_area.adjusted(0, 0, 0, -3), Qt::AlignBottom | Qt::AlignLeft, text);
}

void TimelineView::paint_row(QPainter& painter, const Row& row) const {
    const QRect track = row.rect.adjusted(kLabelWidth, 0, 0, 0);
    const FoldOptions options{kMinSpanPx, open_end_ns()};
    const std::vector<std::string>& names = store_->names();
    const auto name_of = [&names](const profiler::Span& span) {
        return static_cast<std::size_t>(span.label) < names.size()
                   ? std::string_view(names[static_cast<std::size_t>(span.label)])
                   : std::string_view();
    };
    switch (row.kind) {
    case RowKind::steps: {
        const std::vector<profiler::StepSpan>& steps = store_->steps();
        paint_plan(
            painter, track, fold_spans(steps, axis_, options),
            [&](std::size_t i) {
                return steps[i].drafted > 0 ? verify_color() : phase_color(steps[i].phase());
            },
            [&](std::size_t i) {
                // Batch composition: step number, prefill and decode tokens,
                // and a verified draft's kept and drafted tokens.
                QString label = QStringLiteral("#%1 P%2 D%3")
                                    .arg(steps[i].step)
                                    .arg(steps[i].prefill_tokens)
                                    .arg(steps[i].decode_tokens);
                if (steps[i].drafted > 0) {
                    label += QStringLiteral(" V%1/%2").arg(steps[i].accepted).arg(steps[i].drafted);
                }
                return label;
            });
        break;
    }
    case RowKind::cpu_ops:
    case RowKind::gpu: {
        const std::vector<profiler::Span>& spans = row.kind == RowKind::cpu_ops
                                                       ? store_->cpu_ops().spans
                                                       : store_->gpu_tracks()[row.index].spans;
        paint_plan(
            painter, track, fold_spans(spans, axis_, options),
            [&](std::size_t i) { return name_color(name_of(spans[i])); },
            [&](std::size_t i) { return q(name_of(spans[i])); });
        break;
    }
    case RowKind::lane: {
        const std::vector<profiler::LaneSpan>& lanes = store_->requests()[row.index].lanes;
        paint_plan(
            painter, track, fold_spans(lanes, axis_, options),
            [&](std::size_t i) { return lane_color(lanes[i].state); },
            [&](std::size_t i) { return q(profiler::lane_state_name(lanes[i].state)); });
        break;
    }
    case RowKind::counter:
        break;
    }
}

void TimelineView::paint_counter(QPainter& painter, const Row& row) const {
    if (store_ == nullptr) {
        return;
    }
    const profiler::Counter counter = kCounterRows[row.index].counter;
    const profiler::CounterTrack& track = store_->counter(counter);
    if (track.t_ns.empty()) {
        return;
    }
    const QRect area = row.rect.adjusted(kLabelWidth, 4, 0, -2);
    // One bucket per pixel column: a million samples become a few thousand
    // numbers before anything is drawn.
    CounterSummary& summary = counter_summaries_[row.index];
    summary.update(track);
    const CounterColumns buckets = summary.columns(track, axis_);
    const std::vector<CounterColumn>& columns = buckets.columns;
    double visible_max = buckets.has_carried ? buckets.carried : 0;
    for (const CounterColumn& column : columns) {
        if (column.has_samples) {
            visible_max = std::max(visible_max, column.high);
        }
    }

    // Scale to the capacity when the run says what it is, so the chart reads
    // as "how full"; otherwise to the highest value in view.
    double full_scale = 0;
    if (counter == profiler::Counter::kv_bytes_used) {
        full_scale = static_cast<double>(store_->bytes_per_block()) * store_->total_blocks();
    } else if (counter == profiler::Counter::gpu_used_bytes) {
        full_scale = static_cast<double>(store_->device_memory().device_total_bytes);
    } else if (counter == profiler::Counter::attached_resident) {
        full_scale = static_cast<double>(store_->attached().capacity_blocks());
    } else if (counter == profiler::Counter::attached_stored ||
               counter == profiler::Counter::attached_removed) {
        full_scale = 0; // rates: the highest in view
    } else {
        full_scale = store_->total_blocks();
    }
    if (full_scale <= 0) {
        full_scale = visible_max > 0 ? visible_max : 1;
    }
    const auto y_of = [&](double value) {
        return area.bottom() - std::clamp(value / full_scale, 0.0, 1.0) * (area.height() - 1);
    };

    // The value holds from one sample to the next and after the last until
    // the run's latest time: a step chart.
    const double end_x = std::min(axis_.x_of(store_->end_ns()), axis_.width());
    QPolygonF outline;
    std::vector<QLineF> spreads; // columns whose samples disagree: min..max
    constexpr double kNone = std::numeric_limits<double>::quiet_NaN();
    double carried = buckets.has_carried ? buckets.carried : kNone;
    for (std::size_t index = 0; index < columns.size() && static_cast<double>(index) < end_x;
         ++index) {
        const CounterColumn& column = columns[index];
        double top = carried;
        if (column.has_samples) {
            double bottom = column.low;
            top = column.high;
            if (!std::isnan(carried)) {
                bottom = std::min(bottom, carried);
                top = std::max(top, carried);
            }
            if (bottom < top) {
                const double x = area.left() + static_cast<double>(index) + 0.5;
                spreads.emplace_back(x, y_of(bottom), x, y_of(top));
            }
            carried = column.last;
        }
        if (std::isnan(top)) {
            continue; // before the first sample
        }
        const double x = area.left() + static_cast<double>(index);
        outline << QPointF(x, y_of(top)) << QPointF(x + 1, y_of(top));
    }
    if (outline.isEmpty()) {
        return;
    }
    const QColor color = counter_color(counter);
    QColor fill = color;
    fill.setAlpha(70);
    QPolygonF area_shape = outline;
    area_shape << QPointF(outline.back().x(), area.bottom() + 1)
               << QPointF(outline.front().x(), area.bottom() + 1);
    painter.setPen(Qt::NoPen);
    painter.setBrush(fill);
    painter.drawPolygon(area_shape);
    painter.setBrush(Qt::NoBrush);
    painter.setPen(color);
    painter.drawPolyline(outline);
    if (!spreads.empty()) {
        painter.drawLines(spreads.data(), static_cast<int>(spreads.size()));
    }
}

void TimelineView::paint_cursor(QPainter& painter) const {
    if (!cursor_ns_) {
        return;
    }
    const double x = axis_.x_of(*cursor_ns_);
    if (x < 0 || x > axis_.width()) {
        return;
    }
    // Through the centre of the pixel column holding the time, so the line
    // is one crisp pixel wide.
    const double column = kLabelWidth + std::floor(x) + 0.5;
    painter.setPen(QPen(kCursor, 1));
    painter.drawLine(QPointF(column, 0), QPointF(column, height()));
}

} // namespace kvscope::ui
