#include "profiler/chrome_trace.h"

#include "engine/events/engine_event.h"
#include "profiler/chrome_trace_gpu.h"
#include "profiler/recording.h"
#include "profiler/sqlite_util.h"

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
    if (const std::string problem = recording_problem(recording); !problem.empty()) {
        throw RecordingError(problem);
    }
    sqlite3* db = nullptr;
    sqlite3_open_v2(recording.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
    sqlite3_stmt* q = nullptr;
    sqlite3_prepare_v2(db,
                       "SELECT t_ns, kind, request, block, a, b, c, d, text FROM KVSCOPE_EVENTS "
                       "ORDER BY id",
                       -1, &q, nullptr);
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
        return static_cast<double>(t - origin) / 1000.0;
    };
    const auto slice = [&](const std::string& name, std::int64_t tid, std::int64_t begin,
                           std::int64_t end, nlohmann::json args) {
        trace.push_back({{"name", name},
                         {"ph", "X"},
                         {"pid", kPid},
                         {"tid", tid},
                         {"ts", us(begin)},
                         {"dur", static_cast<double>(end - begin) / 1000.0},
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
    while (sqlite3_step(q) == SQLITE_ROW) {
        const std::int64_t t = sqlite3_column_int64(q, 0);
        origin = origin < 0 ? t : origin;
        const auto kind = static_cast<EventKind>(sqlite3_column_int(q, 1));
        const std::int64_t request =
            sqlite3_column_type(q, 2) == SQLITE_NULL ? -1 : sqlite3_column_int64(q, 2);
        const std::int64_t a = sqlite3_column_int64(q, 4);
        const std::int64_t b = sqlite3_column_int64(q, 5);
        const std::int64_t c = sqlite3_column_int64(q, 6);
        const std::int64_t d = sqlite3_column_int64(q, 7);
        const char* text = reinterpret_cast<const char*>(sqlite3_column_text(q, 8));
        const std::int64_t tid = kRequestTrackBase + request;
        switch (kind) {
        case EventKind::step_begin:
            open_steps[a] = {t, {{"scheduled_tokens", b}, {"sequences", c}}};
            break;
        case EventKind::step_end:
            if (const auto it = open_steps.find(a); it != open_steps.end()) {
                nlohmann::json args = it->second.second;
                args["prefill_tokens"] = b;
                args["decode_tokens"] = c;
                const std::string phase = b > 0 && c > 0 ? "mixed" : b > 0 ? "prefill" : "decode";
                slice("step " + std::to_string(a) + " (" + phase + ")", kStepTrack,
                      it->second.first, t, std::move(args));
                open_steps.erase(it);
                ++summary.steps;
            }
            break;
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
            instant("admitted", tid, t,
                    {{"cached_tokens", a},
                     {"computed_tokens", b},
                     {"blocks_hit", c},
                     {"blocks_missed", d}});
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
            instant("preempted", tid, t, {{"preemptions", a}});
            break;
        }
        case EventKind::request_finished:
        case EventKind::request_aborted:
        case EventKind::request_rejected: {
            Lane& lane = lanes[request];
            if (lane.first_token >= 0) {
                slice("decode", tid, lane.first_token, t, {{"generated_tokens", a}});
            } else if (lane.admitted >= 0) {
                slice("prefill", tid, lane.admitted, t, nlohmann::json::object());
            } else if (lane.arrived >= 0) {
                slice("queued", tid, lane.arrived, t, nlohmann::json::object());
            }
            instant(std::string(events::event_kind_name(kind)), tid, t,
                    {{"reason", text ? text : ""}});
            lanes.erase(request);
            break;
        }
        case EventKind::tokens_evicted:
            instant("tokens evicted", tid, t, {{"tokens", a}, {"blocks_released", b}});
            break;
        case EventKind::op_slice:
            slice(text ? text : "op", kOpTrack, t, a, {{"layer", b}, {"step", c}});
            ++summary.ops;
            break;
        case EventKind::memory_sample:
            trace.push_back({{"name", "KV blocks"},
                             {"ph", "C"},
                             {"pid", kPid},
                             {"ts", us(t)},
                             {"args", {{"used", a}, {"cached", b}, {"free", c}}}});
            ++summary.counters;
            break;
        case EventKind::cache_fill:
            trace.push_back({{"name", "cache slots"},
                             {"ph", "C"},
                             {"pid", kPid},
                             {"ts", us(t)},
                             {"args", {{"filled", a}, {"empty", b - a}}}});
            ++summary.counters;
            break;
        default:
            break;
        }
    }
    sqlite3_finalize(q);
    try {
        append_gpu_tracks(db, origin, trace, summary);
    } catch (...) {
        sqlite3_close(db);
        throw;
    }
    sqlite3_close(db);
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
    out << nlohmann::json{{"traceEvents", trace}, {"displayTimeUnit", "ms"}}.dump() << "\n";
    return summary;
}

} // namespace kvscope::profiler
