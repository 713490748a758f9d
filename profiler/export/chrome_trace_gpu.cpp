#include "profiler/export/chrome_trace_gpu.h"

#include "engine/util/saturating.h"
#include "profiler/gpu/nsight_tables.h"
#include "profiler/recording/sqlite_util.h"

#include <limits>
#include <set>

namespace kvscope::profiler {
namespace {

constexpr std::int64_t kGpuPidBase = 100;        // pid of GPU n: 100 + n
constexpr std::int64_t kNvtxTrackBase = 2000000; // tid of host thread t: base + t
constexpr int kEnginePid = 1;                    // chrome_trace.cpp's process

} // namespace

std::int64_t earliest_gpu_time(sqlite3* db) {
    if (!table_exists(db, "CUPTI_ACTIVITY_KIND_KERNEL")) {
        return std::numeric_limits<std::int64_t>::max();
    }
    Statement q(db, R"sql(
        SELECT min(t) FROM (
            SELECT min(start) AS t FROM CUPTI_ACTIVITY_KIND_KERNEL
            UNION ALL SELECT min(start) FROM CUPTI_ACTIVITY_KIND_MEMCPY
            UNION ALL SELECT min(start) FROM CUPTI_ACTIVITY_KIND_MEMSET
            UNION ALL SELECT min(start) FROM CUDA_GPU_MEMORY_USAGE_EVENTS
            UNION ALL SELECT min(start) FROM NVTX_EVENTS WHERE eventType IN (34, 59, 60)))sql");
    if (q.next() && !q.is_null(0)) {
        return q.int64(0);
    }
    return std::numeric_limits<std::int64_t>::max();
}

void append_gpu_tracks(sqlite3* db, std::int64_t origin_ns, nlohmann::json& trace,
                       ChromeTraceSummary& summary) {
    if (!table_exists(db, "CUPTI_ACTIVITY_KIND_KERNEL")) {
        return; // a schema-1 recording
    }
    const auto us = [origin_ns](std::int64_t t) {
        return trace_us(origin_ns, t);
    };
    std::set<std::pair<std::int64_t, std::int64_t>> streams; // (device, stream)
    const auto slice = [&](const std::string& name, std::int64_t device, std::int64_t stream,
                           std::int64_t start, std::int64_t end, nlohmann::json args) {
        streams.emplace(device, stream);
        trace.push_back({{"name", name},
                         {"ph", "X"},
                         {"pid", saturating_add(kGpuPidBase, device)},
                         {"tid", stream},
                         {"ts", us(start)},
                         {"dur", trace_us(start, end)},
                         {"args", std::move(args)}});
    };
    Statement kernels(db, R"sql(
        SELECT k.start, k."end", k.deviceId, k.streamId, s.value, d.value, k.gridX, k.gridY,
               k.gridZ, k.blockX, k.blockY, k.blockZ, k.registersPerThread, k.correlationId
        FROM CUPTI_ACTIVITY_KIND_KERNEL AS k
        JOIN StringIds AS s ON s.id = k.shortName
        JOIN StringIds AS d ON d.id = k.demangledName ORDER BY k.start)sql");
    while (kernels.next()) {
        slice(kernels.text(4), kernels.int64(2), kernels.int64(3), kernels.int64(0),
              kernels.int64(1),
              {{"name", kernels.text(5)},
               {"grid", {kernels.int64(6), kernels.int64(7), kernels.int64(8)}},
               {"block", {kernels.int64(9), kernels.int64(10), kernels.int64(11)}},
               {"registers_per_thread", kernels.int64(12)},
               {"correlation", kernels.int64(13)}});
        ++summary.kernels;
    }
    Statement copies(db, R"sql(
        SELECT m.start, m."end", m.deviceId, m.streamId, coalesce(e.label, '?'), m.bytes
        FROM CUPTI_ACTIVITY_KIND_MEMCPY AS m
        LEFT JOIN ENUM_CUDA_MEMCPY_OPER AS e ON e.id = m.copyKind ORDER BY m.start)sql");
    while (copies.next()) {
        slice("[CUDA memcpy " + copies.text(4) + "]", copies.int64(2), copies.int64(3),
              copies.int64(0), copies.int64(1), {{"bytes", copies.int64(5)}});
        ++summary.kernels;
    }
    Statement memsets(db, R"sql(
        SELECT start, "end", deviceId, streamId, bytes, value FROM CUPTI_ACTIVITY_KIND_MEMSET
        ORDER BY start)sql");
    while (memsets.next()) {
        slice("[CUDA memset]", memsets.int64(2), memsets.int64(3), memsets.int64(0),
              memsets.int64(1), {{"bytes", memsets.int64(4)}, {"value", memsets.int64(5)}});
        ++summary.kernels;
    }
    for (const auto& [device, stream] : streams) {
        trace.push_back({{"name", "thread_name"},
                         {"ph", "M"},
                         {"pid", saturating_add(kGpuPidBase, device)},
                         {"tid", stream},
                         {"args", {{"name", "stream " + std::to_string(stream)}}}});
    }
    std::set<std::int64_t> devices;
    for (const auto& [device, stream] : streams) {
        devices.insert(device);
    }

    // Device memory in use over time, per GPU, from allocations and releases.
    Statement memory(db, R"sql(
        SELECT start, deviceId, bytes, memoryOperationType FROM CUDA_GPU_MEMORY_USAGE_EVENTS
        ORDER BY start)sql");
    std::map<std::int64_t, std::int64_t> in_use;
    while (memory.next()) {
        const std::int64_t device = memory.int64(1);
        const std::int64_t sign =
            memory.int64(3) == static_cast<int>(MemoryOperation::allocation) ? 1 : -1;
        in_use[device] += sign * memory.int64(2);
        devices.insert(device);
        trace.push_back(
            {{"name", "device memory (MiB)"},
             {"ph", "C"},
             {"pid", saturating_add(kGpuPidBase, device)},
             {"ts", us(memory.int64(0))},
             {"args", {{"allocated", static_cast<double>(in_use[device]) / 1048576.0}}}});
        ++summary.counters;
    }
    for (const std::int64_t device : devices) {
        trace.push_back({{"name", "process_name"},
                         {"ph", "M"},
                         {"pid", saturating_add(kGpuPidBase, device)},
                         {"args", {{"name", "GPU " + std::to_string(device)}}}});
    }

    // NVTX ranges beside the engine's tracks, one track per host thread.
    Statement ranges(db, R"sql(
        SELECT r.start, r."end", r.text, r.globalTid, coalesce(d.text, '') FROM NVTX_EVENTS AS r
        LEFT JOIN NVTX_EVENTS AS d ON d.eventType = 75 AND d.domainId = r.domainId
        WHERE r.eventType IN (59, 60) AND r."end" IS NOT NULL ORDER BY r.start)sql");
    std::set<std::int64_t> threads;
    while (ranges.next()) {
        const std::int64_t thread = ranges.int64(3) & 0xFFFFFF;
        threads.insert(thread);
        trace.push_back({{"name", ranges.text(2)},
                         {"cat", ranges.text(4)},
                         {"ph", "X"},
                         {"pid", kEnginePid},
                         {"tid", saturating_add(kNvtxTrackBase, thread)},
                         {"ts", us(ranges.int64(0))},
                         {"dur", trace_us(ranges.int64(0), ranges.int64(1))},
                         {"args", {{"domain", ranges.text(4)}}}});
        ++summary.nvtx_ranges;
    }
    for (const std::int64_t thread : threads) {
        trace.push_back({{"name", "thread_name"},
                         {"ph", "M"},
                         {"pid", kEnginePid},
                         {"tid", saturating_add(kNvtxTrackBase, thread)},
                         {"args", {{"name", "NVTX (thread " + std::to_string(thread) + ")"}}}});
    }
}

} // namespace kvscope::profiler
