#include "profiler/gate/time_by_name.h"

#include "engine/events/engine_event.h"
#include "engine/util/saturating.h"
#include "profiler/recording/sqlite_util.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

namespace kvscope::profiler {

std::vector<NamedDurations> time_by_name(sqlite3* db, const char* sql) {
    std::map<std::string, std::vector<std::int64_t>> by_name;
    Statement rows(db, sql);
    while (rows.next()) {
        by_name[rows.text(0)].push_back(rows.int64(1));
    }
    return summarise_durations(std::move(by_name));
}

std::vector<NamedDurations>
summarise_durations(std::map<std::string, std::vector<std::int64_t>> by_name) {
    std::vector<NamedDurations> out;
    std::int64_t grand_total = 0;
    for (auto& [name, durations] : by_name) {
        std::sort(durations.begin(), durations.end());
        NamedDurations d;
        d.name = name;
        d.instances = static_cast<std::int64_t>(durations.size());
        // Saturating: a damaged recording's durations may be anything.
        d.total_ns =
            std::accumulate(durations.begin(), durations.end(), std::int64_t{0}, saturating_add);
        d.mean_ns = static_cast<double>(d.total_ns) / static_cast<double>(d.instances);
        const std::size_t n = durations.size();
        d.median_ns = n % 2 == 1 ? static_cast<double>(durations[n / 2])
                                 : 0.5 * (static_cast<double>(durations[n / 2 - 1]) +
                                          static_cast<double>(durations[n / 2]));
        d.min_ns = durations.front();
        d.max_ns = durations.back();
        double squares = 0;
        for (const std::int64_t x : durations) {
            squares += (static_cast<double>(x) - d.mean_ns) * (static_cast<double>(x) - d.mean_ns);
        }
        d.stddev_ns = n > 1 ? std::sqrt(squares / static_cast<double>(n - 1)) : 0;
        grand_total = saturating_add(grand_total, d.total_ns);
        out.push_back(std::move(d));
    }
    for (NamedDurations& d : out) {
        d.percent = grand_total > 0
                        ? 100.0 * static_cast<double>(d.total_ns) / static_cast<double>(grand_total)
                        : 0;
    }
    std::sort(out.begin(), out.end(), [](const NamedDurations& a, const NamedDurations& b) {
        return a.total_ns != b.total_ns ? a.total_ns > b.total_ns : a.name < b.name;
    });
    return out;
}

TimeSummaries summarise_time_by_name(sqlite3* db) {
    TimeSummaries s;
    const std::string ops = "SELECT text, a - t_ns FROM KVSCOPE_EVENTS WHERE kind = " +
                            std::to_string(static_cast<int>(events::EventKind::op_slice));
    s.cpu_ops = time_by_name(db, ops.c_str());
    if (table_exists(db, "CUPTI_ACTIVITY_KIND_KERNEL")) {
        // A kernel's time starts where it or the kernel before it on its
        // stream ended, whichever is later: a kernel launched to overlap the
        // one before (programmatic dependent launch) starts early and waits
        // for it, and that wait is the earlier kernel's time, not its own.
        // Without overlap this is end - start; the totals add up to the time
        // each stream was busy, never more.
        s.gpu_kernels = time_by_name(db, R"sql(
            SELECT name, max(0, "end" - max(start, coalesce(before, start))) FROM (
                SELECT n.value AS name, k.start, k."end",
                       max(k."end") OVER (PARTITION BY k.deviceId, k.streamId
                                          ORDER BY k.start, k."end"
                                          ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
                           AS before
                FROM CUPTI_ACTIVITY_KIND_KERNEL AS k JOIN StringIds AS n ON n.id = k.shortName))sql");
        s.gpu_memory_ops = time_by_name(db, R"sql(
            SELECT '[CUDA memcpy ' || coalesce(e.label, '?') || ']', m."end" - m.start
            FROM CUPTI_ACTIVITY_KIND_MEMCPY AS m
            LEFT JOIN ENUM_CUDA_MEMCPY_OPER AS e ON e.id = m.copyKind
            UNION ALL
            SELECT '[CUDA memset]', "end" - start FROM CUPTI_ACTIVITY_KIND_MEMSET)sql");
        s.nvtx_ranges = time_by_name(db, R"sql(
            SELECT coalesce(d.text || ':', '') || r.text, r."end" - r.start
            FROM NVTX_EVENTS AS r
            LEFT JOIN NVTX_EVENTS AS d ON d.eventType = 75 AND d.domainId = r.domainId
            WHERE r.eventType IN (59, 60) AND r."end" IS NOT NULL)sql");
    }
    Statement dropped(db, "SELECT value FROM KVSCOPE_META WHERE key = 'cupti_dropped_records'");
    if (dropped.next()) {
        s.dropped_gpu_records = dropped.int64(0);
    }
    return s;
}

} // namespace kvscope::profiler
