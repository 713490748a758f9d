#include "app/ui/views/timeline_view.h"

#include "app/ui/views/span_folding.h"

#include <algorithm>
#include <cmath>

#include <QApplication>
#include <QHelpEvent>
#include <QKeyEvent>
#include <QLocale>
#include <QMouseEvent>
#include <QScrollBar>
#include <QStyle>
#include <QToolTip>
#include <QWheelEvent>

namespace kvscope::ui {

namespace {

// One wheel notch (120 units) zooms by 2^(1/4), about 19%: four notches double.
constexpr double kWheelUnitsPerDoubling = 480;
constexpr double kKeyZoomFactor = 1.25;
constexpr double kKeyPanShare = 0.1;

QString q(std::string_view text) {
    return QString::fromUtf8(text.data(), static_cast<qsizetype>(text.size()));
}

} // namespace

TimelineView::TimelineView(QWidget* parent)
    : QWidget(parent) {
    setFocusPolicy(Qt::StrongFocus);
    setAttribute(Qt::WA_OpaquePaintEvent);
    lane_scroll_ = new QScrollBar(Qt::Vertical, this);
    lane_scroll_->hide();
    connect(lane_scroll_, &QScrollBar::valueChanged, this, qOverload<>(&QWidget::update));
    axis_.set_width(track_area().width());
}

void TimelineView::set_store(const profiler::RunStore* store) {
    store_ = store;
    fitted_ = true;
    for (CounterSummary& summary : counter_summaries_) {
        summary.clear();
    }
    lane_scroll_->setValue(0);
    refresh();
}

void TimelineView::refresh() {
    if (store_ != nullptr) {
        axis_.set_data_range(store_->start_ns(), store_->end_ns());
    } else {
        axis_.set_data_range(0, 0);
    }
    if (fitted_) {
        axis_.fit_data();
    } else if (follow_live_) {
        axis_.scroll_to_end(axis_.data_end_ns());
    }
    view_changed();
}

void TimelineView::set_cursor_ns(qint64 ns) {
    cursor_ns_ = ns;
    update();
}

void TimelineView::clear_cursor() {
    cursor_ns_.reset();
    update();
}

void TimelineView::set_follow_live(bool follow) {
    if (follow == follow_live_) {
        return;
    }
    follow_live_ = follow;
    if (follow_live_ && !fitted_) {
        axis_.scroll_to_end(axis_.data_end_ns());
        view_changed();
    }
    emit follow_live_changed(follow_live_);
}

void TimelineView::fit_all() {
    fitted_ = true;
    axis_.fit_data();
    view_changed();
}

void TimelineView::set_visible_range(qint64 begin_ns, qint64 end_ns) {
    fitted_ = false;
    axis_.fit(begin_ns, end_ns);
    view_changed();
}

QRect TimelineView::track_area() const {
    return QRect(kLabelWidth, kRulerHeight, std::max(1, width() - kLabelWidth),
                 std::max(0, height() - kRulerHeight));
}

QSize TimelineView::sizeHint() const {
    return {1000, 480};
}

QSize TimelineView::minimumSizeHint() const {
    const int counters = static_cast<int>(counter_rows()) * kCounterHeight;
    return {kLabelWidth + 200, lanes_top() + counters + 4 * kMinLaneHeight};
}

std::vector<std::size_t> TimelineView::shown_counter_rows() const {
    std::vector<std::size_t> shown;
    // An attached engine's run has no steps of ours: its residency and churn
    // take the engine rows' place.
    const bool attached =
        store_ != nullptr && !store_->attached().state().empty() && store_->steps().empty();
    const bool gpu = store_ != nullptr && store_->device_memory().device_total_bytes > 0;
    for (std::size_t i = 0; i < std::size(kCounterRows); ++i) {
        const profiler::Counter counter = kCounterRows[i].counter;
        const bool attached_row = counter == profiler::Counter::attached_resident ||
                                  counter == profiler::Counter::attached_stored ||
                                  counter == profiler::Counter::attached_removed;
        if (attached_row != attached) {
            continue;
        }
        if (counter == profiler::Counter::gpu_used_bytes && !gpu) {
            continue;
        }
        const bool group_row = counter == profiler::Counter::global_group_blocks ||
                               counter == profiler::Counter::window_group_blocks;
        if (group_row && (store_ == nullptr || store_->kv_group_count() < 2)) {
            continue;
        }
        shown.push_back(i);
    }
    return shown;
}

std::int64_t TimelineView::open_end_ns() const {
    return store_ != nullptr ? store_->end_ns() : 0;
}

// ---- rows ----------------------------------------------------------------

int TimelineView::lanes_top() const {
    const std::size_t gpu_tracks = store_ != nullptr ? store_->gpu_tracks().size() : 0;
    return kRulerHeight + kStepsHeight + kSpanRowHeight * (1 + static_cast<int>(gpu_tracks));
}

int TimelineView::lanes_bottom() const {
    const int counters = static_cast<int>(counter_rows()) * kCounterHeight;
    return std::max(lanes_top(), height() - counters);
}

std::vector<std::size_t> TimelineView::requests_in_view() const {
    // Only requests alive somewhere in the visible range get a lane: zoomed
    // in on a long run, the few dozen running requests fill the lane area
    // instead of scrolling among thousands of finished ones.
    std::vector<std::size_t> shown;
    if (store_ == nullptr) {
        return shown;
    }
    const std::vector<profiler::RequestRecord>& requests = store_->requests();
    for (std::size_t i = 0; i < requests.size(); ++i) {
        const std::vector<profiler::LaneSpan>& lanes = requests[i].lanes;
        if (lanes.empty()) {
            continue;
        }
        const std::int64_t end = lanes.back().end_ns < 0 ? open_end_ns() : lanes.back().end_ns;
        if (end > axis_.begin_ns() && lanes.front().begin_ns < axis_.end_ns()) {
            shown.push_back(i);
        }
    }
    return shown;
}

int TimelineView::lane_height(std::size_t lanes) const {
    if (lanes == 0) {
        return kMaxLaneHeight;
    }
    // Lanes share the room left; below the minimum they scroll instead.
    const int room = lanes_bottom() - lanes_top();
    return std::clamp(room / static_cast<int>(std::min<std::size_t>(lanes, 1'000'000)),
                      kMinLaneHeight, kMaxLaneHeight);
}

void TimelineView::view_changed() {
    update_lane_scrollbar();
    update();
}

void TimelineView::update_lane_scrollbar() {
    const auto lanes = static_cast<int>(requests_in_view().size());
    const int room = lanes_bottom() - lanes_top();
    const int fitting = room / lane_height(static_cast<std::size_t>(lanes));
    if (lanes <= fitting) {
        lane_scroll_->setValue(0);
        lane_scroll_->hide();
        return;
    }
    // The scroll bar sits in the label column, so the time axis keeps its width.
    const int bar_width = style()->pixelMetric(QStyle::PM_ScrollBarExtent, nullptr, this);
    lane_scroll_->setGeometry(kLabelWidth - bar_width, lanes_top(), bar_width, room);
    lane_scroll_->setRange(0, lanes - fitting);
    lane_scroll_->setPageStep(std::max(1, fitting));
    lane_scroll_->setSingleStep(1);
    lane_scroll_->show();
}

std::vector<TimelineView::Row> TimelineView::rows() const {
    std::vector<Row> rows;
    const int full_width = width();
    int y = kRulerHeight;
    const auto add = [&](RowKind kind, std::size_t index, int row_height) {
        rows.push_back({kind, index, QRect(0, y, full_width, row_height)});
        y += row_height;
    };
    add(RowKind::steps, 0, kStepsHeight);
    add(RowKind::cpu_ops, 0, kSpanRowHeight);
    if (store_ != nullptr) {
        for (std::size_t i = 0; i < store_->gpu_tracks().size(); ++i) {
            add(RowKind::gpu, i, kSpanRowHeight);
        }
        const std::vector<std::size_t> shown = requests_in_view();
        const int lane = lane_height(shown.size());
        const int bottom = lanes_bottom();
        for (auto i = static_cast<std::size_t>(lane_scroll_->value());
             i < shown.size() && y + lane <= bottom; ++i) {
            add(RowKind::lane, shown[i], lane);
        }
    }
    y = lanes_bottom();
    for (const std::size_t i : shown_counter_rows()) {
        add(RowKind::counter, i, kCounterHeight);
    }
    return rows;
}

const TimelineView::Row* TimelineView::row_at(int y, const std::vector<Row>& rows) const {
    const auto found = std::find_if(rows.begin(), rows.end(), [y](const Row& row) {
        return y >= row.rect.top() && y <= row.rect.bottom();
    });
    return found == rows.end() ? nullptr : &*found;
}

QString TimelineView::row_label(const Row& row) const {
    switch (row.kind) {
    case RowKind::steps:
        return tr("Steps");
    case RowKind::cpu_ops:
        return tr("CPU ops");
    case RowKind::gpu:
        return q(store_->gpu_tracks()[row.index].name);
    case RowKind::lane:
        return tr("Request %1").arg(store_->requests()[row.index].id);
    case RowKind::counter:
        return tr(kCounterRows[row.index].label);
    }
    return {};
}

QRect TimelineView::row_rect(const QString& name) const {
    for (const Row& row : rows()) {
        if (row_label(row) == name) {
            return row.rect;
        }
    }
    return {};
}

// ---- input ---------------------------------------------------------------

void TimelineView::resizeEvent(QResizeEvent* event) {
    QWidget::resizeEvent(event);
    axis_.set_width(track_area().width());
    view_changed();
}

void TimelineView::zoom_by(double x, double factor) {
    fitted_ = false;
    // While following the live end, the newest events stay in view.
    axis_.zoom_at(follow_live_ ? axis_.width() : x, factor);
    if (follow_live_) {
        axis_.scroll_to_end(axis_.data_end_ns());
    }
    view_changed();
}

void TimelineView::pan_by(double dx_px) {
    fitted_ = false;
    set_follow_live(false);
    axis_.pan_by(dx_px);
    view_changed();
}

void TimelineView::mousePressEvent(QMouseEvent* event) {
    if (event->button() != Qt::LeftButton) {
        QWidget::mousePressEvent(event);
        return;
    }
    pressed_ = true;
    dragging_ = false;
    press_pos_ = event->position().toPoint();
    last_drag_x_ = press_pos_.x();
}

void TimelineView::mouseMoveEvent(QMouseEvent* event) {
    if (!pressed_) {
        QWidget::mouseMoveEvent(event);
        return;
    }
    const QPoint pos = event->position().toPoint();
    if (!dragging_ && (pos - press_pos_).manhattanLength() >= QApplication::startDragDistance()) {
        dragging_ = true;
        setCursor(Qt::ClosedHandCursor);
    }
    if (dragging_) {
        pan_by(pos.x() - last_drag_x_);
        last_drag_x_ = pos.x();
    }
}

void TimelineView::mouseReleaseEvent(QMouseEvent* event) {
    if (event->button() != Qt::LeftButton || !pressed_) {
        QWidget::mouseReleaseEvent(event);
        return;
    }
    pressed_ = false;
    if (dragging_) {
        dragging_ = false;
        unsetCursor();
        return;
    }
    // A click, not a drag: ask for the cursor there (the ruler counts too).
    const double x = event->position().x() - kLabelWidth;
    if (x >= 0) {
        emit cursor_requested(axis_.ns_of(x));
    }
}

void TimelineView::mouseDoubleClickEvent(QMouseEvent* event) {
    if (event->button() == Qt::LeftButton) {
        fit_all();
    }
}

void TimelineView::wheelEvent(QWheelEvent* event) {
    const int delta = event->angleDelta().y();
    if (delta == 0) {
        event->ignore();
        return;
    }
    if (event->modifiers() & Qt::ShiftModifier) {
        lane_scroll_->setValue(lane_scroll_->value() - delta / 40);
    } else {
        const double x = std::clamp(event->position().x() - kLabelWidth, 0.0, axis_.width());
        zoom_by(x, std::exp2(delta / kWheelUnitsPerDoubling));
    }
    event->accept();
}

void TimelineView::keyPressEvent(QKeyEvent* event) {
    const double middle = axis_.width() / 2;
    switch (event->key()) {
    case Qt::Key_Plus:
    case Qt::Key_Equal:
        zoom_by(middle, kKeyZoomFactor);
        break;
    case Qt::Key_Minus:
        zoom_by(middle, 1 / kKeyZoomFactor);
        break;
    case Qt::Key_Left:
        pan_by(axis_.width() * kKeyPanShare);
        break;
    case Qt::Key_Right:
        pan_by(-axis_.width() * kKeyPanShare);
        break;
    case Qt::Key_Home:
    case Qt::Key_0:
        fit_all();
        break;
    case Qt::Key_Up:
        lane_scroll_->triggerAction(QAbstractSlider::SliderSingleStepSub);
        break;
    case Qt::Key_Down:
        lane_scroll_->triggerAction(QAbstractSlider::SliderSingleStepAdd);
        break;
    case Qt::Key_PageUp:
        lane_scroll_->triggerAction(QAbstractSlider::SliderPageStepSub);
        break;
    case Qt::Key_PageDown:
        lane_scroll_->triggerAction(QAbstractSlider::SliderPageStepAdd);
        break;
    default:
        QWidget::keyPressEvent(event);
    }
}

bool TimelineView::event(QEvent* event) {
    if (event->type() == QEvent::ToolTip) {
        const auto* help = static_cast<QHelpEvent*>(event);
        const QString text = tooltip_at(help->pos());
        if (text.isEmpty()) {
            QToolTip::hideText();
            event->ignore();
        } else {
            QToolTip::showText(help->globalPos(), text, this);
        }
        return true;
    }
    return QWidget::event(event);
}

// ---- tooltips ------------------------------------------------------------

QString TimelineView::time_text(std::int64_t ns) const {
    const std::int64_t origin = store_ != nullptr ? store_->start_ns() : 0;
    return q(format_duration(ns - origin));
}

QString TimelineView::request_summary(const profiler::RequestRecord& request) const {
    QString text = tr("Request %1: %2 prompt tokens").arg(request.id).arg(request.prompt_tokens);
    if (request.cached_tokens > 0) {
        text += tr(" (%1 from the prefix cache)").arg(request.cached_tokens);
    }
    text += tr(", %1 generated").arg(request.generated);
    if (request.ttft_ms() >= 0) {
        text += tr("\nTTFT %1 ms").arg(request.ttft_ms(), 0, 'f', 2);
    }
    if (request.preemptions > 0) {
        text += tr("\npreempted %n time(s)", nullptr, request.preemptions);
    }
    if (!request.outcome.empty()) {
        text += "\n" + q(request.outcome);
        if (!request.reason.empty()) {
            text += " (" + q(request.reason) + ")";
        }
    }
    return text;
}

QString TimelineView::tooltip_at(QPoint pos) const {
    if (pos.y() < kRulerHeight) {
        return tr("Wheel: zoom around the pointer. Drag: pan. Double-click: fit the run.\n"
                  "+/-: zoom, arrows: pan, Shift+wheel or Up/Down: scroll requests.\n"
                  "Click: move the cursor there.");
    }
    if (store_ == nullptr) {
        return {};
    }
    const std::vector<Row> all = rows();
    const Row* row = row_at(pos.y(), all);
    if (row == nullptr) {
        return {};
    }
    if (pos.x() < kLabelWidth) {
        return row->kind == RowKind::lane ? request_summary(store_->requests()[row->index])
                                          : row_label(*row);
    }
    const double x = pos.x() - kLabelWidth;
    return row->kind == RowKind::counter ? counter_tooltip(*row, x) : span_tooltip(*row, x);
}

QString TimelineView::span_tooltip(const Row& row, double x) const {
    const FoldOptions options{kMinSpanPx, open_end_ns()};
    std::vector<FoldedRect> plan;
    switch (row.kind) {
    case RowKind::steps:
        plan = fold_spans(store_->steps(), axis_, options);
        break;
    case RowKind::cpu_ops:
        plan = fold_spans(store_->cpu_ops().spans, axis_, options);
        break;
    case RowKind::gpu:
        plan = fold_spans(store_->gpu_tracks()[row.index].spans, axis_, options);
        break;
    case RowKind::lane:
        plan = fold_spans(store_->requests()[row.index].lanes, axis_, options);
        break;
    case RowKind::counter:
        return {};
    }
    const FoldedRect* hit = rect_at(plan, x);
    if (hit == nullptr) {
        return {};
    }
    if (hit->folded()) {
        return tr("%1 events (zoom in)").arg(hit->count);
    }
    const auto end_or_open = [this](std::int64_t end_ns) {
        return end_ns < 0 ? open_end_ns() : end_ns;
    };
    switch (row.kind) {
    case RowKind::steps: {
        const profiler::StepSpan& step = store_->steps()[hit->first];
        QString text = tr("Step #%1: %2, %3\n%4 prefill + %5 decode tokens, %6 sequences")
                           .arg(step.step)
                           .arg(q(profiler::step_phase_name(step.phase())))
                           .arg(q(format_duration(end_or_open(step.end_ns) - step.begin_ns)))
                           .arg(step.prefill_tokens)
                           .arg(step.decode_tokens)
                           .arg(step.sequences);
        if (step.drafted > 0) {
            text += tr("\nverified %1 draft tokens, kept %2, rolled back %3")
                        .arg(step.drafted)
                        .arg(step.accepted)
                        .arg(step.drafted - step.accepted);
        }
        return text + tr("\nat %1").arg(time_text(step.begin_ns));
    }
    case RowKind::cpu_ops:
    case RowKind::gpu: {
        const profiler::Span& span = row.kind == RowKind::cpu_ops
                                         ? store_->cpu_ops().spans[hit->first]
                                         : store_->gpu_tracks()[row.index].spans[hit->first];
        QString text = q(store_->names().at(static_cast<std::size_t>(span.label)));
        if (row.kind == RowKind::cpu_ops && span.detail >= 0) {
            text += tr(", layer %1").arg(span.detail);
        }
        return text +
               tr("\n%1\nat %2")
                   .arg(q(format_duration(span.end_ns - span.begin_ns)), time_text(span.begin_ns));
    }
    case RowKind::lane: {
        const profiler::RequestRecord& request = store_->requests()[row.index];
        const profiler::LaneSpan& lane = request.lanes[hit->first];
        return tr("%1 for %2 (from %3)\n")
                   .arg(q(profiler::lane_state_name(lane.state)),
                        q(format_duration(end_or_open(lane.end_ns) - lane.begin_ns)),
                        time_text(lane.begin_ns)) +
               request_summary(request);
    }
    case RowKind::counter:
        break;
    }
    return {};
}

QString TimelineView::counter_tooltip(const Row& row, double x) const {
    const CounterRow& counter = kCounterRows[row.index];
    const profiler::CounterTrack& track = store_->counter(counter.counter);
    const std::int64_t t = axis_.ns_of(x);
    if (track.t_ns.empty() || t < track.t_ns.front() || t > open_end_ns()) {
        return {};
    }
    const double value = track.value_at(t);
    QString text;
    if (counter.counter == profiler::Counter::gpu_used_bytes) {
        const events::DeviceMemory& device = store_->device_memory();
        text =
            tr("%1 of %2 used; KV pool %3 (%4%), weights %5")
                .arg(QLocale().formattedDataSize(static_cast<qint64>(value)),
                     QLocale().formattedDataSize(device.device_total_bytes),
                     QLocale().formattedDataSize(device.kv_pool_bytes))
                .arg(100.0 * static_cast<double>(device.kv_pool_bytes) /
                         static_cast<double>(std::max<std::int64_t>(1, device.device_total_bytes)),
                     0, 'f', 1)
                .arg(QLocale().formattedDataSize(device.weights_bytes));
    } else if (counter.counter == profiler::Counter::kv_bytes_used) {
        text = QLocale().formattedDataSize(static_cast<qint64>(value));
    } else if (counter.counter == profiler::Counter::attached_stored ||
               counter.counter == profiler::Counter::attached_removed) {
        text = tr("%1 blocks a second").arg(value, 0, 'f', 0);
    } else if (counter.counter == profiler::Counter::attached_resident) {
        text = QString::number(value, 'f', 0);
        if (store_->attached().capacity_blocks() > 0) {
            text += tr(" of %1").arg(store_->attached().capacity_blocks());
        }
    } else {
        text = QString::number(value, 'f', 0);
        if (store_->total_blocks() > 0) {
            text += tr(" of %1").arg(store_->total_blocks());
        }
    }
    return tr("%1: %2\nat %3").arg(tr(counter.label), text, time_text(t));
}

QColor TimelineView::phase_color(profiler::StepPhase phase) {
    switch (phase) {
    case profiler::StepPhase::prefill:
        return QColor(0xe8, 0x8a, 0x2e);
    case profiler::StepPhase::decode:
        return QColor(0x3b, 0x7d, 0xd8);
    case profiler::StepPhase::mixed:
        return QColor(0x9b, 0x6f, 0xd0);
    case profiler::StepPhase::idle:
        break;
    }
    return QColor(0xbd, 0xbd, 0xbd);
}

QColor TimelineView::verify_color() {
    return QColor(0x1f, 0xa8, 0x8a); // a step that verified speculative drafts
}

QColor TimelineView::lane_color(profiler::LaneState state) {
    switch (state) {
    case profiler::LaneState::waiting:
        return QColor(0xc4, 0xc4, 0xc4);
    case profiler::LaneState::prefill:
        return phase_color(profiler::StepPhase::prefill);
    case profiler::LaneState::decode:
        return phase_color(profiler::StepPhase::decode);
    case profiler::LaneState::preempted:
        return QColor(0xd6, 0x3c, 0x3c);
    }
    return QColor(0xc4, 0xc4, 0xc4);
}

QColor TimelineView::name_color(std::string_view name) {
    // FNV-1a: stable across runs and machines, unlike std::hash.
    std::uint32_t hash = 2166136261u;
    for (const char c : name) {
        hash = (hash ^ static_cast<unsigned char>(c)) * 16777619u;
    }
    // Light, moderately saturated: dark text stays readable on every hue.
    // Rounded to 8-bit RGB, the colour painted pixels have.
    return QColor(QColor::fromHsl(static_cast<int>(hash % 360),
                                  150 + static_cast<int>(hash >> 16) % 60,
                                  170 + static_cast<int>(hash >> 24) % 20)
                      .rgb());
}

} // namespace kvscope::ui
