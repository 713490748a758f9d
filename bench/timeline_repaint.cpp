// Timeline repaint: how long TimelineView takes to paint a run of a million
// events into a 1600x900 image, with everything in view and zoomed in to
// 10%, 1% and 0.01% of it (target: at most 16 ms, one frame at 60 Hz).
// Prints a Markdown table.
//
//   kvscope-bench-timeline [--steps N] [--runs N] [--png DIR]
//
// --png writes each zoom level's image to DIR, to see what was timed.
//
// The run is synthetic but shaped like a CPU recording: back-to-back steps
// of 15 op slices each, a request arriving every 10 steps and decoding for
// 150, a memory sample and a KV-bytes sample after every step.
#include "app/ui/views/span_folding.h"
#include "app/ui/views/timeline_view.h"
#include "profiler/store/run_store.h"
#include "tests/support/engine_events.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <QApplication>
#include <QImage>

namespace {

namespace events = kvscope::events;
namespace profiler = kvscope::profiler;
namespace ui = kvscope::ui;

constexpr int kOpsPerStep = 15;
constexpr int kArrivalEverySteps = 10;
constexpr int kWaitSteps = 2;
constexpr int kDecodeSteps = 150;
constexpr int kTotalBlocks = 4096;
constexpr std::int64_t kBytesPerBlock = 368'640; // a 16-token f16 block of SmolLM2-135M

events::EngineEvent make_event(std::int64_t t, events::EventKind kind, std::int64_t request = -1,
                               std::int64_t a = 0, std::int64_t b = 0, std::int64_t c = 0,
                               std::int64_t d = 0) {
    return kvscope::test::engine_event(t, kind, request, -1, a, b, c, d);
}

void build_run(profiler::RunStore& store, int steps) {
    static const char* const kOps[kOpsPerStep] = {
        "embed",    "attn_norm", "qkv",  "rope", "kv_write", "attention", "attn_out", "add",
        "ffn_norm", "gate_up",   "silu", "down", "add_ffn",  "out_norm",  "logits"};
    std::int64_t t = 1'000'000'000'000; // a host clock some 17 minutes after boot
    store.append(make_event(t, events::EventKind::run_config, -1, kTotalBlocks, 16));
    std::int64_t running = 0;
    for (int step = 0; step < steps; ++step) {
        const std::int64_t begin = t + 50'000;
        // A request arrives every 10 steps, is admitted 2 steps later (a
        // mixed step: its prefill with the others' decodes) and finishes
        // after 150 decode steps.
        if (step % kArrivalEverySteps == 0) {
            store.append(make_event(t + 20'000, events::EventKind::request_arrived,
                                    step / kArrivalEverySteps, 96));
        }
        const bool admits = step % kArrivalEverySteps == kWaitSteps;
        const std::int64_t admitted = (step - kWaitSteps) / kArrivalEverySteps;
        const std::int32_t prefill_tokens = admits ? 96 : 0;
        const std::int64_t decodes = running;
        store.append(make_event(begin, events::EventKind::step_begin, -1, step,
                                prefill_tokens + decodes, decodes + (admits ? 1 : 0),
                                admits ? (decodes > 0 ? 3 : 1) : 2));
        if (admits) {
            store.append(make_event(begin, events::EventKind::request_admitted, admitted, 0, 96));
        }
        // Ops of varied length, ~2 ms a step in all.
        std::int64_t op_begin = begin;
        for (int op = 0; op < kOpsPerStep; ++op) {
            const std::int64_t length = 40'000 + (op * 37'000 + step * 13'000) % 200'000;
            events::EngineEvent slice =
                make_event(op_begin, events::EventKind::op_slice, -1, op_begin + length, op, step);
            slice.text = kOps[op];
            store.append(slice);
            op_begin += length + 2'000;
        }
        const std::int64_t end = op_begin;
        store.append(
            make_event(end, events::EventKind::step_end, -1, step, prefill_tokens, decodes));
        if (admits) {
            store.append(make_event(end, events::EventKind::first_token, admitted));
            ++running;
        }
        const int finishing = step - kWaitSteps - kDecodeSteps;
        if (finishing >= 0 && finishing % kArrivalEverySteps == 0) {
            store.append(make_event(end, events::EventKind::request_finished,
                                    finishing / kArrivalEverySteps, kDecodeSteps));
            --running;
        }
        const std::int64_t used = std::min<std::int64_t>(kTotalBlocks, running * 12 + step % 7);
        const std::int64_t cached = (step / 3) % 400;
        store.append(make_event(end, events::EventKind::memory_sample, -1, used, cached,
                                kTotalBlocks - used - cached, kTotalBlocks));
        store.append(make_event(end, events::EventKind::kv_bytes, -1, used * kBytesPerBlock,
                                cached * kBytesPerBlock, 0, kBytesPerBlock));
        t = end;
    }
}

// Spans overlapping the view on every span track (steps, CPU ops, request lanes).
std::size_t spans_in_view(const profiler::RunStore& store, const ui::TimeAxis& axis) {
    const ui::FoldOptions options{3, store.end_ns()};
    std::size_t spans = ui::visible_spans(store.steps(), axis, options).size() +
                        ui::visible_spans(store.cpu_ops().spans, axis, options).size();
    for (const profiler::RequestRecord& request : store.requests()) {
        spans += ui::visible_spans(request.lanes, axis, options).size();
    }
    return spans;
}

double percentile(std::vector<double> values, double share) {
    std::sort(values.begin(), values.end());
    const auto index = static_cast<std::size_t>(share * static_cast<double>(values.size() - 1));
    return values[index];
}

const char* arg(int argc, char** argv, const char* name) {
    for (int i = 1; i + 1 < argc; ++i) {
        if (std::strcmp(argv[i], name) == 0) {
            return argv[i + 1];
        }
    }
    return nullptr;
}

int int_arg(int argc, char** argv, const char* name, int fallback) {
    const char* value = arg(argc, argv, name);
    return value != nullptr ? std::atoi(value) : fallback;
}

} // namespace

int main(int argc, char** argv) {
    if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) {
        qputenv("QT_QPA_PLATFORM", "offscreen");
    }
    QApplication app(argc, argv);
    const int steps = int_arg(argc, argv, "--steps", 52'000);
    const int runs = std::max(1, int_arg(argc, argv, "--runs", 30));
    const char* png_dir = arg(argc, argv, "--png");

    profiler::RunStore store;
    const auto build_start = std::chrono::steady_clock::now();
    build_run(store, steps);
    const double build_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - build_start).count();
    std::printf("run: %lld events (%zu steps, %zu CPU ops, %zu requests, %zu memory samples), "
                "%.1f s of host time; built in %.2f s\n\n",
                static_cast<long long>(store.event_count()), store.steps().size(),
                store.cpu_ops().spans.size(), store.requests().size(),
                store.counter(profiler::Counter::used_blocks).t_ns.size(),
                static_cast<double>(store.end_ns() - store.start_ns()) * 1e-9, build_s);

    ui::TimelineView view;
    view.resize(1600, 900);
    view.set_store(&store);
    view.show();
    QApplication::processEvents();
    QImage image(view.size(), QImage::Format_ARGB32_Premultiplied);

    struct Zoom {
        const char* name;
        double share;
    };
    const Zoom zooms[] = {{"everything", 1.0}, {"10%", 0.1}, {"1%", 0.01}, {"0.01%", 0.0001}};
    std::printf("| zoom | visible | spans in view | median ms | p90 ms | max ms |\n");
    std::printf("| --- | ---: | ---: | ---: | ---: | ---: |\n");
    const std::int64_t length = store.end_ns() - store.start_ns();
    // Zoomed views sit a third of the way in, where every track is busy.
    const std::int64_t centre = store.start_ns() + length / 3;
    for (const Zoom& zoom : zooms) {
        if (zoom.share >= 1) {
            view.fit_all();
        } else {
            const auto visible =
                static_cast<std::int64_t>(static_cast<double>(length) * zoom.share);
            view.set_visible_range(centre - visible / 2, centre + visible / 2);
        }
        view.render(&image); // warm-up: glyph caches, first allocations
        std::vector<double> ms;
        for (int run = 0; run < runs; ++run) {
            const auto start = std::chrono::steady_clock::now();
            view.render(&image);
            ms.push_back(
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                    .count());
        }
        std::printf("| %s | %s | %zu | %.2f | %.2f | %.2f |\n", zoom.name,
                    ui::format_duration(view.axis().visible_ns()).c_str(),
                    spans_in_view(store, view.axis()), percentile(ms, 0.5), percentile(ms, 0.9),
                    *std::max_element(ms.begin(), ms.end()));
        if (png_dir != nullptr) {
            const QString zoom_name = QString(zoom.name).replace('%', "pct");
            image.save(QString("%1/timeline-%2.png").arg(png_dir, zoom_name));
        }
    }
    std::printf("\n%d renders of a %dx%d view per zoom level (after one warm-up)\n", runs,
                view.width(), view.height());
    return 0;
}
