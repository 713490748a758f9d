// The zoomable timeline of one run: steps coloured by phase, CPU ops, GPU
// tracks, a lane for each request alive in view, and the block counters, under a time ruler,
// with a cursor line for the replay scrubber. It reads a RunStore directly
// (never copies it) and paints every track from a folded drawing plan, so a
// repaint costs the same with a thousand events in view or a million.
//
// Wheel zooms around the pointer, drag pans, double-click fits the run, a
// click asks for the cursor there; +/- zoom, arrows pan, Home fits, and
// Shift+wheel, Up/Down or Page Up/Down scroll the request lanes.
#pragma once

#include "app/ui/views/counter_columns.h"
#include "app/ui/views/time_axis.h"
#include "profiler/store/run_store.h"

#include <array>
#include <optional>
#include <string_view>
#include <vector>

#include <QWidget>

class QPainter;
class QScrollBar;

namespace kvscope::ui {

class TimelineView : public QWidget {
    Q_OBJECT
public:
    explicit TimelineView(QWidget* parent = nullptr);

    // The run to show (not owned; null shows an empty timeline). Fits the
    // view to the whole run, and keeps fitting as it grows until the user
    // zooms or pans.
    void set_store(const profiler::RunStore* store);
    const profiler::RunStore* store() const { return store_; }
    // The store has grown (live, several times a second): re-reads its
    // extent, follows its end when asked, and repaints.
    void refresh();

    // The replay scrubber's time, drawn as a vertical line.
    void set_cursor_ns(qint64 ns);
    void clear_cursor();
    std::optional<qint64> cursor_ns() const { return cursor_ns_; }

    // Keeps the right edge at the store's latest time on every refresh().
    // Dragging the view turns it off (follow_live_changed says so); zooming
    // keeps it and zooms around the right edge.
    void set_follow_live(bool follow);
    bool follow_live() const { return follow_live_; }

    void fit_all();
    void set_visible_range(qint64 begin_ns, qint64 end_ns);
    const TimeAxis& axis() const { return axis_; }

    // Where the tracks are drawn: right of the label column, below the ruler.
    // The axis' x = 0 is this rectangle's left edge.
    QRect track_area() const;
    // The row called `name` ("Steps", "CPU ops", a GPU track's name,
    // "Request 7", "Used blocks", "Cached blocks", "KV bytes"), label column
    // included; empty when it is not on screen (a request scrolled away, or
    // not alive in the visible range).
    QRect row_rect(const QString& name) const;
    // What the tooltip at `pos` says; empty over nothing.
    QString tooltip_at(QPoint pos) const;

    static QColor phase_color(profiler::StepPhase phase);
    static QColor verify_color();
    static QColor lane_color(profiler::LaneState state);
    // A colour of its own for each op or kernel name, the same in every run.
    static QColor name_color(std::string_view name);

    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;

signals:
    // A click in the track area: the time under the pointer.
    void cursor_requested(qint64 ns);
    void follow_live_changed(bool follow);

protected:
    bool event(QEvent* event) override;
    void paintEvent(QPaintEvent* event) override;
    void resizeEvent(QResizeEvent* event) override;
    void mousePressEvent(QMouseEvent* event) override;
    void mouseMoveEvent(QMouseEvent* event) override;
    void mouseReleaseEvent(QMouseEvent* event) override;
    void mouseDoubleClickEvent(QMouseEvent* event) override;
    void wheelEvent(QWheelEvent* event) override;
    void keyPressEvent(QKeyEvent* event) override;

private:
    static constexpr int kLabelWidth = 140;
    static constexpr int kRulerHeight = 24;
    static constexpr int kStepsHeight = 24;
    static constexpr int kSpanRowHeight = 18;
    static constexpr int kCounterHeight = 40;
    static constexpr int kMinLaneHeight = 4;
    static constexpr int kMaxLaneHeight = 16;
    // Spans narrower than this fold with their close neighbours.
    static constexpr double kMinSpanPx = 3;

    struct CounterRow {
        profiler::Counter counter;
        const char* label;
    };
    static constexpr CounterRow kCounterRows[] = {
        {profiler::Counter::used_blocks, "Used blocks"},
        {profiler::Counter::cached_blocks, "Cached blocks"},
        {profiler::Counter::kv_bytes_used, "KV bytes"},
        // Shown only for a hybrid KV cache (shown_counter_rows()).
        {profiler::Counter::global_group_blocks, "Global groups"},
        {profiler::Counter::window_group_blocks, "Window groups"},
        // Shown only for runs on a GPU backend (shown_counter_rows()).
        {profiler::Counter::gpu_used_bytes, "GPU memory"},
        // Shown instead of the engine's rows for attached engines.
        {profiler::Counter::attached_resident, "Resident blocks"},
        {profiler::Counter::attached_stored, "Stored / s"},
        {profiler::Counter::attached_removed, "Removed / s"},
    };
    // Indices into kCounterRows of the rows this run has, top to bottom.
    std::vector<std::size_t> shown_counter_rows() const;
    std::size_t counter_rows() const { return shown_counter_rows().size(); }

    enum class RowKind { steps, cpu_ops, gpu, lane, counter };
    struct Row {
        RowKind kind;
        std::size_t index; // GPU track, request (in store_->requests()) or counter row
        QRect rect;        // full width, label column included
    };

    // The rows on screen, top to bottom.
    std::vector<Row> rows() const;
    const Row* row_at(int y, const std::vector<Row>& rows) const;
    QString row_label(const Row& row) const;
    int lanes_top() const;
    int lanes_bottom() const;
    // Indexes into store_->requests() of those alive in the visible range.
    std::vector<std::size_t> requests_in_view() const;
    int lane_height(std::size_t lanes) const;
    void update_lane_scrollbar();
    // After every change of the visible range or size: lanes, scroll bar, repaint.
    void view_changed();
    std::int64_t open_end_ns() const;

    // Every user zoom and pan goes through here: it ends "fit the run".
    void zoom_by(double x, double factor);
    void pan_by(double dx_px);

    QString span_tooltip(const Row& row, double x) const;
    QString counter_tooltip(const Row& row, double x) const;
    QString request_summary(const profiler::RequestRecord& request) const;
    QString time_text(std::int64_t ns) const;

    // Painting, in timeline_view_paint.cpp.
    void paint_ruler(QPainter& painter) const;
    void paint_grid(QPainter& painter) const;
    void paint_row(QPainter& painter, const Row& row) const;
    void paint_row_label(QPainter& painter, const Row& row) const;
    void paint_counter(QPainter& painter, const Row& row) const;
    void paint_cursor(QPainter& painter) const;

    const profiler::RunStore* store_ = nullptr;
    TimeAxis axis_;
    std::optional<qint64> cursor_ns_;
    bool follow_live_ = false;
    bool fitted_ = true; // showing the whole run: keep showing it as it grows
    QScrollBar* lane_scroll_ = nullptr;
    // Per counter row, kept up to date as the store grows (painting is const).
    mutable std::array<CounterSummary, std::size(kCounterRows)> counter_summaries_;

    bool pressed_ = false;
    bool dragging_ = false;
    QPoint press_pos_;
    int last_drag_x_ = 0;
};

} // namespace kvscope::ui
