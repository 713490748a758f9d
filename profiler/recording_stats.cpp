#include "profiler/recording_stats.h"

#include "engine/events/engine_event.h"
#include "profiler/recording.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <sqlite3.h>

namespace kvscope::profiler {
namespace {

using events::EventKind;

struct RequestTimes {
    std::int64_t arrived = -1;
    std::int64_t first_token = -1;
    std::int64_t finished = -1;
    std::int64_t generated = 0;
    bool looked_up = false;
};

double at(const std::vector<double>& sorted, double q) {
    const auto index = static_cast<std::size_t>(q * static_cast<double>(sorted.size() - 1) + 0.5);
    return sorted[std::min(index, sorted.size() - 1)];
}

} // namespace

Distribution Distribution::of(std::vector<double> samples) {
    Distribution d;
    d.count = static_cast<std::int64_t>(samples.size());
    if (samples.empty()) {
        return d;
    }
    std::sort(samples.begin(), samples.end());
    d.mean =
        std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(samples.size());
    d.p50 = at(samples, 0.5);
    d.p90 = at(samples, 0.9);
    d.p99 = at(samples, 0.99);
    d.max = samples.back();
    return d;
}

RecordingStats compute_stats(const std::filesystem::path& path) {
    if (const std::string problem = recording_problem(path); !problem.empty()) {
        throw RecordingError(problem);
    }
    sqlite3* db = nullptr;
    sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
    RecordingStats s;
    s.path = path.string();
    sqlite3_stmt* meta = nullptr;
    if (sqlite3_prepare_v2(db, "SELECT value FROM KVSCOPE_META WHERE key = 'run_config'", -1, &meta,
                           nullptr) == SQLITE_OK &&
        sqlite3_step(meta) == SQLITE_ROW) {
        s.run_config = reinterpret_cast<const char*>(sqlite3_column_text(meta, 0));
    }
    sqlite3_finalize(meta);

    sqlite3_stmt* q = nullptr;
    if (sqlite3_prepare_v2(
            db, "SELECT t_ns, kind, request, a, b, c, d, text FROM KVSCOPE_EVENTS ORDER BY id", -1,
            &q, nullptr) != SQLITE_OK) {
        const std::string why = sqlite3_errmsg(db);
        sqlite3_close(db);
        throw RecordingError(path.string() + ": " + why);
    }
    std::map<std::int64_t, RequestTimes> requests;
    std::map<std::int64_t, std::int64_t> step_begin; // step index -> t_ns
    std::int64_t first_t = -1;
    std::int64_t last_t = -1;
    double used_sum = 0;
    double cached_sum = 0;
    std::int64_t samples = 0;
    while (sqlite3_step(q) == SQLITE_ROW) {
        const std::int64_t t = sqlite3_column_int64(q, 0);
        const auto kind = static_cast<EventKind>(sqlite3_column_int(q, 1));
        const bool has_request = sqlite3_column_type(q, 2) != SQLITE_NULL;
        const std::int64_t request = has_request ? sqlite3_column_int64(q, 2) : -1;
        const std::int64_t a = sqlite3_column_int64(q, 3);
        const std::int64_t b = sqlite3_column_int64(q, 4);
        const std::int64_t c = sqlite3_column_int64(q, 5);
        const std::int64_t d = sqlite3_column_int64(q, 6);
        ++s.events;
        first_t = first_t < 0 ? t : first_t;
        last_t = t;
        switch (kind) {
        case EventKind::step_begin:
            step_begin[a] = t;
            break;
        case EventKind::step_end:
            if (const auto it = step_begin.find(a); it != step_begin.end()) {
                s.step_ms_samples.push_back(static_cast<double>(t - it->second) * 1e-6);
            }
            ++s.steps;
            s.prefill_tokens += b;
            s.decode_tokens += c;
            break;
        case EventKind::request_arrived:
            requests[request].arrived = t;
            ++s.requests;
            break;
        case EventKind::prefix_lookup: {
            RequestTimes& r = requests[request];
            if (!r.looked_up) { // first admission only: re-admissions are not new hits
                r.looked_up = true;
                s.prefix_hit_tokens += a;
                s.prompt_tokens += b;
            }
            break;
        }
        case EventKind::first_token:
            requests[request].first_token = t;
            break;
        case EventKind::request_finished:
            requests[request].finished = t;
            requests[request].generated = a;
            s.generated_tokens += a;
            ++s.finished;
            break;
        case EventKind::request_aborted:
            ++s.aborted;
            break;
        case EventKind::request_rejected:
            ++s.rejected;
            break;
        case EventKind::request_preempted:
            ++s.preemptions;
            break;
        case EventKind::tokens_evicted:
            s.evicted_tokens += a;
            break;
        case EventKind::memory_sample:
            s.peak_used_blocks = std::max(s.peak_used_blocks, a);
            s.total_blocks = d;
            used_sum += static_cast<double>(a);
            cached_sum += static_cast<double>(b);
            ++samples;
            (void)c;
            break;
        case EventKind::kv_bytes:
            s.kv_bytes_used_peak = std::max(s.kv_bytes_used_peak, a);
            s.kv_bytes_per_block = d;
            if (s.kv_formats.empty() && sqlite3_column_type(q, 7) != SQLITE_NULL) {
                s.kv_formats = reinterpret_cast<const char*>(sqlite3_column_text(q, 7));
            }
            break;
        default:
            break;
        }
    }
    sqlite3_finalize(q);
    try {
        s.times = summarise_time_by_name(db);
    } catch (...) {
        sqlite3_close(db);
        throw;
    }
    sqlite3_close(db);

    for (const auto& [id, r] : requests) {
        if (r.arrived >= 0 && r.first_token >= 0) {
            s.ttft_ms_samples.push_back(static_cast<double>(r.first_token - r.arrived) * 1e-6);
        }
        if (r.first_token >= 0 && r.finished >= 0 && r.generated > 1) {
            s.tpot_ms_samples.push_back(static_cast<double>(r.finished - r.first_token) * 1e-6 /
                                        static_cast<double>(r.generated - 1));
        }
    }
    s.step_ms = Distribution::of(s.step_ms_samples);
    s.ttft_ms = Distribution::of(s.ttft_ms_samples);
    s.tpot_ms = Distribution::of(s.tpot_ms_samples);
    s.duration_s = first_t >= 0 ? static_cast<double>(last_t - first_t) * 1e-9 : 0;
    s.prefix_hit_rate = s.prompt_tokens > 0 ? static_cast<double>(s.prefix_hit_tokens) /
                                                  static_cast<double>(s.prompt_tokens)
                                            : 0;
    if (samples > 0) {
        s.mean_used_blocks = used_sum / static_cast<double>(samples);
        s.mean_cached_blocks = cached_sum / static_cast<double>(samples);
    }
    return s;
}

} // namespace kvscope::profiler
