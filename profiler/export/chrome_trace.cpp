#include "profiler/export/chrome_trace.h"

#include "engine/events/typed_events.h"
#include "engine/util/json_text.h"
#include "profiler/export/chrome_trace_gpu.h"
#include "profiler/recording/event_rows.h"
#include "profiler/recording/recording.h"
#include "profiler/recording/sqlite_util.h"

#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <sqlite3.h>

namespace kvscope::profiler {
namespace {

using events::EventKind;
constexpr int kPid = 1;
constexpr int kStepTrack = 1;
constexpr int kOpTrack = 2;
constexpr std::int64_t kRequestTrackBase = 1000;

struct Lane {
    std::int64_t arrived = -1;
    std::int64_t admitted = -1;
    std::int64_t first_token = -1;
};

} // namespace

ChromeTraceSummary export_chrome_trace(const std::filesystem::path& recording, std::ostream& out) {
    const ReadOnlyRecording file(recording);
    sqlite3* db = file.db();
    nlohmann::json trace = nlohmann::json::array();
    ChromeTraceSummary summary;
    // Time zero: the earliest record of any kind (GPU records can precede
    // the first engine event: the weights' upload).
    std::int64_t origin = -1;
    {
        Statement first(db, "SELECT min(t_ns) FROM KVSCOPE_EVENTS");
        const std::int64_t gpu = earliest_gpu_time(db);
        if (first.next() && !first.is_null(0)) {
            origin = std::min(first.int64(0), gpu);
        } else if (gpu != std::numeric_limits<std::int64_t>::max()) {
            origin = gpu;
        }
    }
    const auto us = [&origin](std::int64_t t) {
        return trace_us(origin, t);
    };
    const auto slice = [&](const std::string& name, std::int64_t tid, std::int64_t begin,
                           std::int64_t end, nlohmann::json args) {
        trace.push_back({{"name", name},
                         {"ph", "X"},
                         {"pid", kPid},
                         {"tid", tid},
                         {"ts", us(begin)},
                         {"dur", trace_us(begin, end)},
                         {"args", std::move(args)}});
    };
    const auto instant = [&](const std::string& name, std::int64_t tid, std::int64_t t,
                             nlohmann::json args) {
        trace.push_back({{"name", name},
                         {"ph", "i"},
                         {"s", "t"},
                         {"pid", kPid},
                         {"tid", tid},
                         {"ts", us(t)},
                         {"args", std::move(args)}});
    };
    std::map<std::int64_t, std::pair<std::int64_t, nlohmann::json>> open_steps;
    std::map<std::int64_t, Lane> lanes;
    EventRows rows(db, recording.string());
    events::EngineEvent event;
    while (rows.next(event)) {
        const std::int64_t t = event.time_ns;
        origin = origin < 0 ? t : origin;
        const std::int64_t request = event.request;
        const std::int64_t tid = kRequestTrackBase + request;
        switch (event.kind) {
        case EventKind::step_begin: {
            const auto begin = events::as<events::StepBegin>(event);
            open_steps[begin.step] = {
                t, {{"scheduled_tokens", begin.scheduled_tokens}, {"sequences", begin.sequences}}};
            break;
        }
        case EventKind::step_end: {
            const auto end = events::as<events::StepEnd>(event);
            if (const auto it = open_steps.find(end.step); it != open_steps.end()) {
                nlohmann::json args = it->second.second;
                args["prefill_tokens"] = end.prefill_tokens;
                args["decode_tokens"] = end.decode_tokens;
                const std::string phase = end.prefill_tokens > 0 && end.decode_tokens > 0 ? "mixed"
                                          : end.prefill_tokens > 0 ? "prefill"
                                                                   : "decode";
                slice("step " + std::to_string(end.step) + " (" + phase + ")", kStepTrack,
                      it->second.first, t, std::move(args));
                open_steps.erase(it);
                ++summary.steps;
            }
            break;
        }
        case EventKind::request_arrived:
            lanes[request].arrived = t;
            ++summary.requests;
            trace.push_back({{"name", "thread_name"},
                             {"ph", "M"},
                             {"pid", kPid},
                             {"tid", tid},
                             {"args", {{"name", "request " + std::to_string(request)}}}});
            break;
        case EventKind::request_admitted: {
            Lane& lane = lanes[request];
            if (lane.arrived >= 0) {
                slice("queued", tid, lane.arrived, t, nlohmann::json::object());
            }
            lane.admitted = t;
            lane.arrived = -1;
            const auto admitted = events::as<events::RequestAdmitted>(event);
            instant("admitted", tid, t,
                    {{"cached_tokens", admitted.cached_tokens},
                     {"computed_tokens", admitted.computed_tokens},
                     {"blocks_hit", admitted.blocks_hit},
                     {"blocks_missed", admitted.blocks_missed}});
            break;
        }
        case EventKind::first_token: {
            Lane& lane = lanes[request];
            if (lane.admitted >= 0) {
                slice("prefill", tid, lane.admitted, t, nlohmann::json::object());
            }
            lane.first_token = t;
            break;
        }
        case EventKind::request_preempted: {
            Lane& lane = lanes[request];
            const std::int64_t since = lane.first_token >= 0 ? lane.first_token : lane.admitted;
            if (since >= 0) {
                slice(lane.first_token >= 0 ? "decode" : "prefill", tid, since, t,
                      nlohmann::json::object());
            }
            lane = Lane{};
            lane.arrived = t; // queued again
            instant("preempted", tid, t,
                    {{"preemptions", events::as<events::RequestPreempted>(event).preemptions}});
            break;
        }
        case EventKind::request_finished:
        case EventKind::request_aborted:
        case EventKind::request_rejected: {
            Lane& lane = lanes[request];
            std::string reason;
            nlohmann::json decode_args = nlohmann::json::object();
            if (event.kind == EventKind::request_finished) {
                auto finished = events::as<events::RequestFinished>(event);
                reason = std::move(finished.reason);
                decode_args["generated_tokens"] = finished.generated_tokens;
            } else if (event.kind == EventKind::request_rejected) {
                reason = events::as<events::RequestRejected>(event).reason;
            }
            if (lane.first_token >= 0) {
                slice("decode", tid, lane.first_token, t, std::move(decode_args));
            } else if (lane.admitted >= 0) {
                slice("prefill", tid, lane.admitted, t, nlohmann::json::object());
            } else if (lane.arrived >= 0) {
                slice("queued", tid, lane.arrived, t, nlohmann::json::object());
            }
            instant(std::string(events::event_kind_name(event.kind)), tid, t, {{"reason", reason}});
            lanes.erase(request);
            break;
        }
        case EventKind::tokens_evicted: {
            const auto evicted = events::as<events::TokensEvicted>(event);
            instant("tokens evicted", tid, t,
                    {{"tokens", evicted.tokens}, {"blocks_released", evicted.blocks_released}});
            break;
        }
        case EventKind::op_slice: {
            const auto op = events::as<events::OpSlice>(event);
            slice(op.op.empty() ? "op" : op.op, kOpTrack, t, op.end_ns,
                  {{"layer", op.layer}, {"step", op.step}});
            ++summary.ops;
            break;
        }
        case EventKind::memory_sample: {
            const auto memory = events::as<events::MemorySample>(event);
            trace.push_back({{"name", "KV blocks"},
                             {"ph", "C"},
                             {"pid", kPid},
                             {"ts", us(t)},
                             {"args",
                              {{"used", memory.used_blocks},
                               {"cached", memory.cached_blocks},
                               {"free", memory.free_blocks}}}});
            ++summary.counters;
            break;
        }
        case EventKind::cache_fill: {
            const auto fill = events::as<events::CacheFill>(event);
            trace.push_back(
                {{"name", "cache slots"},
                 {"ph", "C"},
                 {"pid", kPid},
                 {"ts", us(t)},
                 {"args", {{"filled", fill.entries}, {"empty", fill.capacity - fill.entries}}}});
            ++summary.counters;
            break;
        }
        default:
            break;
        }
    }
    append_gpu_tracks(db, origin, trace, summary);
    trace.push_back({{"name", "process_name"},
                     {"ph", "M"},
                     {"pid", kPid},
                     {"args", {{"name", "kvscope engine"}}}});
    trace.push_back({{"name", "thread_name"},
                     {"ph", "M"},
                     {"pid", kPid},
                     {"tid", kStepTrack},
                     {"args", {{"name", "engine steps"}}}});
    trace.push_back({{"name", "thread_name"},
                     {"ph", "M"},
                     {"pid", kPid},
                     {"tid", kOpTrack},
                     {"args", {{"name", "CPU ops"}}}});
    out << json_text(nlohmann::json{{"traceEvents", trace}, {"displayTimeUnit", "ms"}}) << "\n";
    return summary;
}

} // namespace kvscope::profiler
