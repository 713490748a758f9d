// The timeline widget on a synthetic run: clicks ask for the cursor at the
// time under the pointer, the wheel zooms around it, dragging pans, steps are
// painted in their phase's colour where the axis puts them, and tooltips say
// what is under the pointer (or how many events a folded block holds).
#include "app/ui/views/timeline_view.h"
#include "engine/events/typed_events.h"
#include "profiler/store/run_store.h"
#include "tests/support/engine_events.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include <QImage>
#include <QSignalSpy>
#include <QTest>
#include <QWheelEvent>

using kvscope::events::EngineEvent;
using kvscope::events::EventKind;
using kvscope::profiler::LaneState;
using kvscope::profiler::RunStore;
using kvscope::profiler::StepPhase;
using kvscope::ui::TimelineView;

namespace {

constexpr std::int64_t kStart = 1'000'000'000; // 1 s of uptime
constexpr std::int64_t kStepNs = 100'000;
constexpr std::int64_t kStepPeriodNs = 110'000;
constexpr int kSteps = 10;
constexpr int kOpsPerStep = 5;
constexpr int kTinyOps = 2'000;
constexpr double kTrackWidth = 1000;

std::int64_t step_begin(int step) {
    return kStart + 10'000 + step * kStepPeriodNs;
}

EngineEvent engine_event(std::int64_t t, EventKind kind, std::int64_t request = -1,
                         std::int64_t a = 0, std::int64_t b = 0, std::int64_t c = 0,
                         std::int64_t d = 0, std::string text = {}) {
    return kvscope::test::engine_event(t, kind, request, -1, a, b, c, d, std::move(text));
}

// Ten 100 us steps (a prefill, then decodes) with five ops each and a GPU
// kernel each, two requests, a memory sample after every step, then a burst
// of 2000 tiny ops that fold into one block when the whole run is in view.
std::unique_ptr<RunStore> synthetic_run() {
    std::vector<EngineEvent> events;
    events.push_back(engine_event(kStart, EventKind::run_config, -1, 64, 16, 0, 0, "{}"));
    events.push_back(engine_event(kStart, EventKind::request_arrived, 1, 96));
    events.push_back(engine_event(kStart + 5'000, EventKind::request_arrived, 2, 8));
    static const char* const kOps[] = {"attn_norm", "qkv", "attention", "ffn", "logits"};
    for (int step = 0; step < kSteps; ++step) {
        const std::int64_t begin = step_begin(step);
        const std::int64_t end = begin + kStepNs;
        const bool prefill = step == 0;
        events.push_back(engine_event(begin, EventKind::step_begin, -1, step, prefill ? 104 : 2, 2,
                                      prefill ? 1 : 2));
        if (prefill) {
            events.push_back(engine_event(begin, EventKind::request_admitted, 1, 0, 96));
            events.push_back(engine_event(begin, EventKind::request_admitted, 2, 0, 8));
        }
        for (int op = 0; op < kOpsPerStep; ++op) {
            const std::int64_t op_begin = begin + op * (kStepNs / kOpsPerStep);
            events.push_back(engine_event(op_begin, EventKind::op_slice, -1,
                                          op_begin + kStepNs / kOpsPerStep - 1'000, op, step, 0,
                                          kOps[op]));
        }
        events.push_back(
            engine_event(end, EventKind::step_end, -1, step, prefill ? 104 : 0, prefill ? 0 : 2));
        if (prefill) {
            events.push_back(engine_event(end, EventKind::first_token, 1));
            events.push_back(engine_event(end, EventKind::first_token, 2));
        }
        events.push_back(
            engine_event(end, EventKind::memory_sample, -1, 8 + step, 2, 54 - step, 64));
        events.push_back(
            engine_event(end, EventKind::kv_bytes, -1, (8 + step) * 1024, 0, 0, 1024, "f16"));
    }
    const std::int64_t last_end = step_begin(kSteps - 1) + kStepNs;
    events.push_back(
        engine_event(last_end, EventKind::request_finished, 1, kSteps, 0, 0, 0, "length"));
    const std::int64_t burst = last_end + 50'000;
    for (int i = 0; i < kTinyOps; ++i) {
        const std::int64_t t = burst + i * 100;
        events.push_back(engine_event(t, EventKind::op_slice, -1, t + 50, -1, kSteps, 0, "sample"));
    }
    std::stable_sort(events.begin(), events.end(), [](const EngineEvent& x, const EngineEvent& y) {
        return x.time_ns < y.time_ns;
    });
    auto store = std::make_unique<RunStore>();
    for (const EngineEvent& e : events) {
        store->append(e);
    }
    // One GPU stream with a 40 us kernel in every step.
    kvscope::profiler::SpanTrack kernels;
    kernels.name = "GPU stream 7";
    for (int step = 0; step < kSteps; ++step) {
        kernels.spans.push_back({step_begin(step) + 5'000, step_begin(step) + 45'000,
                                 store->intern("paged_attention"), 7});
    }
    store->add_gpu_track(std::move(kernels));
    return store;
}

void send_wheel(QWidget* widget, QPoint pos, int delta, Qt::KeyboardModifiers modifiers = {}) {
    QWheelEvent wheel(pos, widget->mapToGlobal(pos), QPoint(), QPoint(0, delta), Qt::NoButton,
                      modifiers, Qt::NoScrollPhase, false);
    QApplication::sendEvent(widget, &wheel);
}

} // namespace

class TestTimelineView : public QObject {
    Q_OBJECT

private slots:
    void init();
    void cleanup();
    void click_requests_cursor_at_time_under_pointer();
    void wheel_zooms_around_pointer();
    void keys_zoom_and_pan();
    void drag_pans_without_moving_cursor();
    void double_click_fits_run();
    void steps_and_lanes_painted_in_phase_colours();
    void cursor_line_drawn_at_cursor_time();
    void tooltips_name_what_is_under_pointer();
    void follow_live_keeps_right_edge_at_store_end();
    void many_requests_get_thin_scrolling_lanes();
    void lanes_only_for_requests_alive_in_view();
    void empty_and_null_store_paint();
    void gpu_memory_row_only_for_gpu_runs();
    void kv_group_rows_only_for_a_hybrid_cache();

private:
    std::unique_ptr<RunStore> store_;
    std::unique_ptr<TimelineView> view_;
};

void TestTimelineView::init() {
    store_ = synthetic_run();
    view_ = std::make_unique<TimelineView>();
    view_->resize(static_cast<int>(kTrackWidth) + 140, 520);
    view_->set_store(store_.get());
    view_->show();
    QVERIFY(QTest::qWaitForWindowExposed(view_.get()));
    QCOMPARE(view_->track_area().width(), static_cast<int>(kTrackWidth));
    QCOMPARE(view_->axis().width(), kTrackWidth);
}

void TestTimelineView::cleanup() {
    view_.reset();
    store_.reset();
}

void TestTimelineView::click_requests_cursor_at_time_under_pointer() {
    QCOMPARE(view_->axis().begin_ns(), store_->start_ns());
    QCOMPARE(view_->axis().end_ns(), store_->end_ns());
    QSignalSpy requested(view_.get(), &TimelineView::cursor_requested);
    const QRect steps = view_->row_rect("Steps");
    QVERIFY(!steps.isEmpty());
    const QPoint pos(view_->track_area().left() + 300, steps.center().y());
    QTest::mouseClick(view_.get(), Qt::LeftButton, {}, pos);
    QCOMPARE(requested.count(), 1);
    QCOMPARE(requested.at(0).at(0).toLongLong(), qint64(view_->axis().ns_of(300)));

    // The label column is not the time axis.
    QTest::mouseClick(view_.get(), Qt::LeftButton, {}, QPoint(50, steps.center().y()));
    QCOMPARE(requested.count(), 1);
}

void TestTimelineView::wheel_zooms_around_pointer() {
    const int x = 250;
    const QPoint pos(view_->track_area().left() + x, view_->row_rect("CPU ops").center().y());
    const std::int64_t anchor = view_->axis().ns_of(x);
    const std::int64_t visible = view_->axis().visible_ns();
    send_wheel(view_.get(), pos, 120);
    QVERIFY2(view_->axis().visible_ns() < visible * 0.9, "one notch zooms in by ~19%");
    QVERIFY(std::abs(view_->axis().ns_of(x) - anchor) <= 1);
    const std::int64_t zoomed = view_->axis().visible_ns();
    send_wheel(view_.get(), pos, 3 * 120);
    const std::int64_t zoomed_more = view_->axis().visible_ns();
    QVERIFY(zoomed_more < zoomed);
    QVERIFY(std::abs(view_->axis().ns_of(x) - anchor) <= 1);
    // Backwards zooms out again, around the same time: four notches double.
    send_wheel(view_.get(), pos, -4 * 120);
    QVERIFY(std::abs(view_->axis().visible_ns() - 2 * zoomed_more) <= 2);
    QVERIFY(std::abs(view_->axis().ns_of(x) - anchor) <= 1);
}

void TestTimelineView::keys_zoom_and_pan() {
    const std::int64_t visible = view_->axis().visible_ns();
    QTest::keyClick(view_.get(), Qt::Key_Plus);
    QCOMPARE(view_->axis().visible_ns(), std::llround(visible / 1.25));
    const std::int64_t begin = view_->axis().begin_ns();
    QTest::keyClick(view_.get(), Qt::Key_Right);
    QVERIFY(view_->axis().begin_ns() > begin);
    QTest::keyClick(view_.get(), Qt::Key_Left);
    QCOMPARE(view_->axis().begin_ns(), begin);
    QTest::keyClick(view_.get(), Qt::Key_Minus);
    QVERIFY(std::abs(view_->axis().visible_ns() - visible) <= 1);
}

void TestTimelineView::drag_pans_without_moving_cursor() {
    view_->set_visible_range(step_begin(3), step_begin(6));
    QSignalSpy requested(view_.get(), &TimelineView::cursor_requested);
    const std::int64_t begin = view_->axis().begin_ns();
    const double ns_per_px = view_->axis().ns_per_px();
    const int y = view_->row_rect("Steps").center().y();
    const int left = view_->track_area().left();
    QTest::mousePress(view_.get(), Qt::LeftButton, {}, QPoint(left + 500, y));
    QTest::mouseMove(view_.get(), QPoint(left + 550, y));
    QTest::mouseMove(view_.get(), QPoint(left + 600, y));
    QTest::mouseRelease(view_.get(), Qt::LeftButton, {}, QPoint(left + 600, y));
    // Dragged 100 px right: the view shows 100 px earlier.
    QVERIFY2(std::abs(static_cast<double>(begin - view_->axis().begin_ns()) - 100 * ns_per_px) <= 2,
             qPrintable(QString("%1 -> %2").arg(begin).arg(view_->axis().begin_ns())));
    QCOMPARE(requested.count(), 0);
}

void TestTimelineView::double_click_fits_run() {
    view_->set_visible_range(step_begin(3), step_begin(4));
    QTest::mouseDClick(
        view_.get(), Qt::LeftButton, {},
        QPoint(view_->track_area().center().x(), view_->row_rect("Steps").center().y()));
    QCOMPARE(view_->axis().begin_ns(), store_->start_ns());
    QCOMPARE(view_->axis().end_ns(), store_->end_ns());
}

void TestTimelineView::steps_and_lanes_painted_in_phase_colours() {
    const QImage image = view_->grab().toImage();
    const int left = view_->track_area().left();
    const int steps_y = view_->row_rect("Steps").top() + 2;
    const auto x_at = [&](std::int64_t t) {
        return left + static_cast<int>(std::floor(view_->axis().x_of(t)));
    };
    const QColor decode = TimelineView::phase_color(StepPhase::decode);
    const QColor prefill = TimelineView::phase_color(StepPhase::prefill);
    QVERIFY(decode != prefill);
    for (int step = 1; step < kSteps; ++step) {
        const int x = x_at(step_begin(step) + kStepNs / 2);
        QCOMPARE(image.pixelColor(x, steps_y), decode);
    }
    QCOMPARE(image.pixelColor(x_at(step_begin(0) + kStepNs / 2), steps_y), prefill);
    // Between two steps: no step colour.
    QVERIFY(image.pixelColor(x_at(step_begin(5) - 5'000), steps_y) != decode);

    // GPU kernels in their name's colour, nothing between them.
    const int gpu_y = view_->row_rect("GPU stream 7").top() + 2;
    const QColor kernel = TimelineView::name_color("paged_attention");
    QCOMPARE(image.pixelColor(x_at(step_begin(3) + 30'000), gpu_y), kernel);
    QVERIFY(image.pixelColor(x_at(step_begin(3) + 70'000), gpu_y) != kernel);
    // The same name gets the same colour every time; another name another.
    QCOMPARE(TimelineView::name_color("paged_attention"), kernel);
    QVERIFY(TimelineView::name_color("attention") != kernel);

    // Request 1's lane: waiting before its prefill, decoding after its first token.
    const QRect lane = view_->row_rect("Request 1");
    QVERIFY(!lane.isEmpty());
    // The first row of the fill: lane text starts lower down.
    const int lane_y = lane.top() + 1;
    QCOMPARE(image.pixelColor(x_at(step_begin(4)), lane_y),
             TimelineView::lane_color(LaneState::decode));
    QCOMPARE(image.pixelColor(x_at(step_begin(0) + kStepNs * 9 / 10), lane_y),
             TimelineView::lane_color(LaneState::prefill));
    QCOMPARE(image.pixelColor(x_at(kStart + 5'000), lane_y),
             TimelineView::lane_color(LaneState::waiting));
    // After it finished, nothing.
    QVERIFY(image.pixelColor(x_at(store_->end_ns() - 10'000), lane_y) !=
            TimelineView::lane_color(LaneState::decode));
    // Request 2 never finished: its decode lane runs to the end of the run.
    const QRect lane2 = view_->row_rect("Request 2");
    QCOMPARE(image.pixelColor(x_at(store_->end_ns() - 10'000), lane2.top() + 1),
             TimelineView::lane_color(LaneState::decode));
}

void TestTimelineView::cursor_line_drawn_at_cursor_time() {
    const std::int64_t t = step_begin(7) + kStepNs / 2;
    const int x = view_->track_area().left() + static_cast<int>(view_->axis().x_of(t));
    const int y = view_->row_rect("Steps").top() + 2;
    QCOMPARE(view_->grab().toImage().pixelColor(x, y),
             TimelineView::phase_color(StepPhase::decode));
    view_->set_cursor_ns(t);
    QCOMPARE(*view_->cursor_ns(), qint64(t));
    const QColor line = view_->grab().toImage().pixelColor(x, y);
    QVERIFY(line != TimelineView::phase_color(StepPhase::decode));
    QVERIFY(line.red() > 150 && line.green() < 80);
    view_->clear_cursor();
    QCOMPARE(view_->grab().toImage().pixelColor(x, y),
             TimelineView::phase_color(StepPhase::decode));
}

void TestTimelineView::tooltips_name_what_is_under_pointer() {
    const int left = view_->track_area().left();
    const auto at = [&](const char* row, std::int64_t t) {
        return QPoint(left + static_cast<int>(view_->axis().x_of(t)),
                      view_->row_rect(row).center().y());
    };
    const QString step = view_->tooltip_at(at("Steps", step_begin(5) + kStepNs / 2));
    QVERIFY2(step.contains("Step #5") && step.contains("decode") && step.contains("100 us"),
             qPrintable(step));
    const QString op = view_->tooltip_at(at("CPU ops", step_begin(2) + 50'000));
    QVERIFY2(op.contains("attention") && op.contains("layer 2") && op.contains("19.0 us"),
             qPrintable(op));
    const QString kernel = view_->tooltip_at(at("GPU stream 7", step_begin(3) + 20'000));
    QVERIFY2(kernel.startsWith("paged_attention") && kernel.contains("40.0 us"),
             qPrintable(kernel));
    const QString lane = view_->tooltip_at(at("Request 1", step_begin(4)));
    QVERIFY2(lane.startsWith("decode") && lane.contains("Request 1") && lane.contains("96 prompt"),
             qPrintable(lane));
    // Just after step 3's memory sample (a pixel is 1.35 us here).
    const QString counter = view_->tooltip_at(at("Used blocks", step_begin(3) + kStepNs + 5'000));
    QVERIFY2(counter.contains("Used blocks: 11 of 64"), qPrintable(counter));

    // The 2000 tiny ops fold into one block at this zoom.
    const std::int64_t burst = step_begin(kSteps - 1) + kStepNs + 50'000;
    const QString folded = view_->tooltip_at(at("CPU ops", burst + kTinyOps * 50));
    QCOMPARE(folded, QString("%1 events (zoom in)").arg(kTinyOps));
    // Zoomed in, they come apart.
    view_->set_visible_range(burst, burst + 1'000);
    const QString single = view_->tooltip_at(at("CPU ops", burst + 10));
    QVERIFY2(single.startsWith("sample"), qPrintable(single));

    QVERIFY(view_->tooltip_at(QPoint(left + 10, 5)).contains("Wheel: zoom"));
    QVERIFY(view_->tooltip_at(at("Steps", store_->end_ns() - 100)).isEmpty());
}

void TestTimelineView::follow_live_keeps_right_edge_at_store_end() {
    QSignalSpy follow(view_.get(), &TimelineView::follow_live_changed);
    view_->set_visible_range(step_begin(1), step_begin(3));
    view_->set_follow_live(true);
    QCOMPARE(follow.count(), 1);
    QCOMPARE(view_->axis().end_ns(), store_->end_ns());
    const std::int64_t length = view_->axis().visible_ns();

    // The run grows by a step: the view moves with it, same length.
    const std::int64_t t = store_->end_ns() + 20'000;
    store_->append(engine_event(t, EventKind::step_begin, -1, kSteps, 2, 2, 2));
    store_->append(engine_event(t + kStepNs, EventKind::step_end, -1, kSteps, 0, 2));
    view_->refresh();
    QCOMPARE(view_->axis().end_ns(), t + kStepNs);
    QCOMPARE(view_->axis().visible_ns(), length);

    // Dragging means the user wants to look elsewhere: following stops.
    const int y = view_->row_rect("Steps").center().y();
    const int left = view_->track_area().left();
    QTest::mousePress(view_.get(), Qt::LeftButton, {}, QPoint(left + 500, y));
    QTest::mouseMove(view_.get(), QPoint(left + 700, y));
    QTest::mouseRelease(view_.get(), Qt::LeftButton, {}, QPoint(left + 700, y));
    QVERIFY(!view_->follow_live());
    QCOMPARE(follow.count(), 2);
    const std::int64_t end = view_->axis().end_ns();
    store_->append(engine_event(t + 3 * kStepNs, EventKind::step_begin, -1, kSteps + 1, 2, 2, 2));
    view_->refresh();
    QCOMPARE(view_->axis().end_ns(), end);
}

void TestTimelineView::many_requests_get_thin_scrolling_lanes() {
    auto store = std::make_unique<RunStore>();
    for (int r = 0; r < 500; ++r) {
        store->append(engine_event(kStart + r * 1'000, EventKind::request_arrived, r, 10));
    }
    // All still waiting a while later.
    store->append(engine_event(kStart + 600'000, EventKind::memory_sample, -1, 0, 0, 64, 64));
    view_->set_store(store.get());
    const QRect first = view_->row_rect("Request 0");
    QCOMPARE(first.height(), 4);
    QVERIFY(view_->row_rect("Request 499").isEmpty());
    // Counters stay at the bottom, whatever the lanes do.
    QCOMPARE(view_->row_rect("KV bytes").bottom(), view_->height() - 1);
    for (int i = 0; i < 20; ++i) {
        QTest::keyClick(view_.get(), Qt::Key_PageDown);
    }
    QVERIFY(!view_->row_rect("Request 499").isEmpty());
    QVERIFY(view_->row_rect("Request 0").isEmpty());
    send_wheel(view_.get(), first.center(), 120 * 200, Qt::ShiftModifier);
    QVERIFY(!view_->row_rect("Request 0").isEmpty());
    view_->set_store(nullptr);
}

void TestTimelineView::lanes_only_for_requests_alive_in_view() {
    QVERIFY(!view_->row_rect("Request 1").isEmpty());
    QVERIFY(!view_->row_rect("Request 2").isEmpty());
    // After request 1 finished only request 2 is still decoding.
    const std::int64_t last_end = step_begin(kSteps - 1) + kStepNs;
    view_->set_visible_range(last_end + 10'000, store_->end_ns());
    QVERIFY(view_->row_rect("Request 1").isEmpty());
    const QRect lane = view_->row_rect("Request 2");
    QVERIFY(!lane.isEmpty());
    QCOMPARE(lane.top(), view_->row_rect("GPU stream 7").bottom() + 1);
    // Before request 2 arrived only request 1 was there.
    view_->set_visible_range(kStart, kStart + 4'000);
    QVERIFY(!view_->row_rect("Request 1").isEmpty());
    QVERIFY(view_->row_rect("Request 2").isEmpty());
}

void TestTimelineView::empty_and_null_store_paint() {
    RunStore empty;
    view_->set_store(&empty);
    QVERIFY(!view_->grab().isNull());
    QVERIFY(view_->tooltip_at(view_->track_area().center()).isEmpty());
    view_->set_store(nullptr);
    QVERIFY(!view_->grab().isNull());
    QVERIFY(view_->tooltip_at(view_->track_area().center()).isEmpty());
    QSignalSpy requested(view_.get(), &TimelineView::cursor_requested);
    QTest::mouseClick(view_.get(), Qt::LeftButton, {}, view_->track_area().center());
    QCOMPARE(requested.count(), 1);
}

// A run on the CPU has no device: no empty GPU row. A GPU run's samples show
// the device in use, with the KV pool's share in the tooltip.
void TestTimelineView::gpu_memory_row_only_for_gpu_runs() {
    QVERIFY(view_->row_rect("GPU memory").isNull());
    QVERIFY(!view_->row_rect("KV bytes").isNull());
    const std::int64_t gib = std::int64_t{1} << 30;
    for (int i = 0; i < 3; ++i) {
        kvscope::events::DeviceMemory sample;
        sample.device_total_bytes = 80 * gib;
        sample.weights_bytes = gib / 4;
        sample.kv_pool_bytes = 20 * gib;
        sample.device_used_bytes = 22 * gib + i * gib;
        sample.device = "cuda";
        EngineEvent event = kvscope::events::to_event(sample);
        event.time_ns = store_->start_ns() + 10'000 + i * 100'000;
        store_->append(event);
    }
    view_->update();
    const QRect row = view_->row_rect("GPU memory");
    QVERIFY(!row.isNull());
    const QString tip = view_->tooltip_at(
        QPoint(view_->track_area().left() +
                   static_cast<int>(view_->axis().x_of(store_->start_ns() + 150'000)),
               row.center().y()));
    QVERIFY2(tip.contains("KV pool 20.00 GiB (25.0%)") && tip.contains("of 80.00 GiB"),
             qPrintable(tip));
}

// A hybrid cache's groups get two rows: the global groups' blocks and the
// window groups' (summed over the five of Gemma 3); a plain run has neither.
void TestTimelineView::kv_group_rows_only_for_a_hybrid_cache() {
    QVERIFY(view_->row_rect("Global groups").isNull());
    QVERIFY(view_->row_rect("Window groups").isNull());
    for (int step = 0; step < 3; ++step) {
        for (int group = 0; group < 6; ++group) {
            EngineEvent event = kvscope::events::to_event(
                kvscope::events::GroupBlocks{.group = group,
                                             .window = group == 0 ? 0 : 512,
                                             .used_blocks = group == 0 ? 100 + 10 * step : 33,
                                             .cached_blocks = 0});
            event.time_ns = store_->start_ns() + 10'000 + step * 100'000 + group;
            store_->append(event);
        }
    }
    // The step's next event (a memory sample of the next step) closes its groups.
    store_->append(
        engine_event(store_->start_ns() + 400'000, EventKind::memory_sample, -1, 0, 0, 64, 64));
    view_->update();
    const QRect window_row = view_->row_rect("Window groups");
    QVERIFY(!view_->row_rect("Global groups").isNull());
    QVERIFY(!window_row.isNull());
    QVERIFY(!view_->row_rect("KV bytes").isNull());
    const QString tip = view_->tooltip_at(
        QPoint(view_->track_area().left() +
                   static_cast<int>(view_->axis().x_of(store_->start_ns() + 250'000)),
               window_row.center().y()));
    QVERIFY2(tip.startsWith("Window groups: 165"), qPrintable(tip));
    const kvscope::profiler::CounterTrack& global =
        store_->counter(kvscope::profiler::Counter::global_group_blocks);
    QCOMPARE(global.values.back(), 120.0);
}

QTEST_MAIN(TestTimelineView)
#include "tst_timeline_view.moc"
