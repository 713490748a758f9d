#include "profiler/recording/recording_reader.h"

#include "profiler/recording/event_rows.h"
#include "profiler/recording/sqlite_util.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <sqlite3.h>
#include <unistd.h>

namespace kvscope::profiler {
namespace {

RecordingError too_large(const std::string& path_name, std::int64_t events,
                         std::int64_t max_events) {
    const auto gib = [](std::int64_t count) {
        char text[32];
        std::snprintf(text, sizeof text, "%.1f",
                      static_cast<double>(count) * kReplayBytesPerEvent / (1 << 30));
        return std::string(text);
    };
    return RecordingError(path_name + " holds " + std::to_string(events) +
                          " events or more, more than a replay holds here (" +
                          std::to_string(max_events) + ", " + gib(max_events) + " GiB at about " +
                          std::to_string(kReplayBytesPerEvent) +
                          " B each): `kvscope stats` and `kvscope export` read it as a stream");
}

void read_events(sqlite3* db, const std::string& path_name, RunStore& store,
                 const LoadProgress& progress, std::int64_t max_events) {
    // Row ids count the events of a kvscope recording: a file too large is
    // refused before anything is read.
    const std::int64_t total = EventRows::estimated_count(db);
    if (total > max_events) {
        throw too_large(path_name, total, max_events);
    }
    EventRows rows(db, path_name);
    events::EngineEvent event;
    while (rows.next(event)) {
        if (rows.rows_read() > max_events) { // ids that understate the rows
            throw too_large(path_name, rows.rows_read(), max_events);
        }
        store.append(event);
        if (rows.rows_read() % 65536 == 0 && progress &&
            !progress(0.95 * static_cast<double>(rows.rows_read()) /
                      static_cast<double>(std::max<std::int64_t>(total, 1)))) {
            throw RecordingCancelled();
        }
    }
}

// Kernels of one stream run one after another; a track per device and stream.
void read_kernels(sqlite3* db, RunStore& store) {
    if (!table_exists(db, "CUPTI_ACTIVITY_KIND_KERNEL")) {
        return;
    }
    Statement rows(db, R"sql(
        SELECT k.start, k."end", k.deviceId, k.streamId, s.value
        FROM CUPTI_ACTIVITY_KIND_KERNEL AS k JOIN StringIds AS s ON s.id = k.shortName
        ORDER BY k.deviceId, k.streamId, k.start)sql");
    SpanTrack track;
    std::int64_t device = -1;
    std::int64_t stream = -1;
    while (rows.next()) {
        if (rows.int64(2) != device || rows.int64(3) != stream) {
            if (!track.spans.empty()) {
                store.add_gpu_track(std::move(track));
            }
            device = rows.int64(2);
            stream = rows.int64(3);
            track = SpanTrack{"GPU " + std::to_string(device) + " stream " + std::to_string(stream),
                              {}};
        }
        Span span{rows.int64(0), rows.int64(1), store.intern(rows.text(4)),
                  static_cast<std::int32_t>(stream)};
        // A kernel may start before its predecessor's end: by a few ns in
        // CUPTI's reports, by microseconds where it was launched to overlap
        // it (the CUDA backend's decode kernels, which wait for it). Clip so
        // the track stays non-overlapping: the kernel's own time starts
        // where the one before it ended, as kvscope stats counts it.
        if (!track.spans.empty()) {
            span.begin_ns = std::max(span.begin_ns, track.spans.back().end_ns);
            span.end_ns = std::max(span.end_ns, span.begin_ns);
        }
        track.spans.push_back(span);
    }
    if (!track.spans.empty()) {
        store.add_gpu_track(std::move(track));
    }
}

// NVTX push/pop ranges nest: a track per thread and depth keeps each track
// free of overlaps.
void read_nvtx(sqlite3* db, RunStore& store) {
    if (!table_exists(db, "NVTX_EVENTS")) {
        return;
    }
    Statement rows(db, R"sql(
        SELECT r.start, r."end", coalesce(r.text, ''), r.globalTid FROM NVTX_EVENTS AS r
        WHERE r.eventType IN (59, 60) AND r."end" IS NOT NULL
        ORDER BY r.globalTid, r.start, r."end" DESC)sql");
    std::int64_t thread = -1;
    std::vector<SpanTrack> depths;
    std::vector<std::int64_t> open_ends; // end of the range open at each depth
    const auto flush = [&] {
        for (SpanTrack& track : depths) {
            if (!track.spans.empty()) {
                store.add_gpu_track(std::move(track));
            }
        }
        depths.clear();
        open_ends.clear();
    };
    int thread_number = 0;
    while (rows.next()) {
        if (rows.int64(3) != thread) {
            flush();
            thread = rows.int64(3);
            ++thread_number;
        }
        const std::int64_t begin = rows.int64(0);
        const std::int64_t end = rows.int64(1);
        while (!open_ends.empty() && open_ends.back() <= begin) {
            open_ends.pop_back();
        }
        const std::size_t depth = open_ends.size();
        open_ends.push_back(end);
        if (depths.size() <= depth) {
            depths.push_back(
                {"NVTX thread " + std::to_string(thread_number) + " depth " + std::to_string(depth),
                 {}});
        }
        std::vector<Span>& spans = depths[depth].spans;
        if (!spans.empty() && spans.back().end_ns > begin) {
            continue; // overlaps without nesting (cross-thread pops): not drawable here
        }
        spans.push_back({begin, end, store.intern(rows.text(2)), static_cast<std::int32_t>(depth)});
    }
    flush();
}

} // namespace

std::int64_t replay_event_budget() {
    const long pages = ::sysconf(_SC_PHYS_PAGES);
    const long page = ::sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0) {
        return std::int64_t{1} << 26; // 64 Mi events, 10 GiB, when the system will not say
    }
    return static_cast<std::int64_t>(pages) * page / 2 / kReplayBytesPerEvent;
}

void load_recording(const std::filesystem::path& path, RunStore& store,
                    const LoadProgress& progress, std::int64_t max_events) {
    const ReadOnlyRecording recording(path);
    // A replay scrubs the whole run, not the last moments a live window keeps.
    store.attached().keep_whole();
    read_events(recording.db(), path.string(), store, progress, max_events);
    read_kernels(recording.db(), store);
    read_nvtx(recording.db(), store);
    if (progress) {
        progress(1.0);
    }
}

std::map<std::string, std::string> recording_metadata(const std::filesystem::path& path) {
    const ReadOnlyRecording recording(path);
    std::map<std::string, std::string> metadata;
    Statement rows(recording.db(), "SELECT key, value FROM KVSCOPE_META");
    while (rows.next()) {
        metadata[rows.text(0)] = rows.is_null(1) ? std::string() : rows.text(1);
    }
    return metadata;
}

} // namespace kvscope::profiler
