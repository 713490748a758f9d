#include "profiler/recording_events.h"

#include "profiler/sqlite_util.h"

#include <algorithm>
#include <memory>
#include <sqlite3.h>

namespace kvscope::profiler {
namespace {

struct Database {
    sqlite3* db = nullptr;
    ~Database() { sqlite3_close(db); }
};

void open_read_only(const std::filesystem::path& path, Database& database) {
    if (const std::string problem = recording_problem(path); !problem.empty()) {
        throw RecordingError(problem);
    }
    if (sqlite3_open_v2(path.c_str(), &database.db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
        throw RecordingError(path.string() + ": cannot be opened");
    }
}

// Far above any real cache (a 16-token block of a tiny model is still
// kilobytes), low enough that a damaged id cannot make the map allocate
// gigabytes.
constexpr std::int64_t kMaxBlockId = (1 << 24) - 1;

void read_events(sqlite3* db, const std::string& path_name, RunStore& store,
                 const LoadProgress& progress) {
    // Ids are assigned in order from 1, so the largest is the count without
    // a scan of the table (progress only needs an estimate anyway).
    Statement count(db, "SELECT coalesce(max(id), 0) FROM KVSCOPE_EVENTS");
    const std::int64_t total = count.next() ? count.int64(0) : 0;
    Statement rows(db, "SELECT t_ns, kind, request, block, a, b, c, d, text FROM KVSCOPE_EVENTS "
                       "ORDER BY id");
    std::int64_t read = 0;
    events::EngineEvent event;
    while (rows.next()) {
        const std::int64_t kind = rows.int64(1);
        if (kind < 0 || kind >= events::kEventKindCount) {
            continue; // written by a newer kvscope: not ours to guess at
        }
        event.time_ns = rows.int64(0);
        event.kind = static_cast<events::EventKind>(kind);
        event.request = rows.is_null(2) ? -1 : rows.int64(2);
        const std::int64_t block = rows.is_null(3) ? -1 : rows.int64(3);
        if (block < -1 || block > kMaxBlockId) {
            throw RecordingError(path_name + ": event " + std::to_string(read + 1) +
                                 " names block " + std::to_string(block) +
                                 ", not a block id; the file is damaged");
        }
        event.block = static_cast<std::int32_t>(block);
        event.a = rows.int64(4);
        event.b = rows.int64(5);
        event.c = rows.int64(6);
        event.d = rows.int64(7);
        event.text = rows.is_null(8) ? std::string() : rows.text(8);
        store.append(event);
        if (++read % 65536 == 0 && progress &&
            !progress(0.95 * static_cast<double>(read) /
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
        // CUPTI may report a kernel that starts a few ns before its
        // predecessor's end; clip so the track stays non-overlapping.
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

void load_recording(const std::filesystem::path& path, RunStore& store,
                    const LoadProgress& progress) {
    Database database;
    open_read_only(path, database);
    read_events(database.db, path.string(), store, progress);
    read_kernels(database.db, store);
    read_nvtx(database.db, store);
    if (progress) {
        progress(1.0);
    }
}

std::map<std::string, std::string> recording_metadata(const std::filesystem::path& path) {
    Database database;
    open_read_only(path, database);
    std::map<std::string, std::string> metadata;
    Statement rows(database.db, "SELECT key, value FROM KVSCOPE_META");
    while (rows.next()) {
        metadata[rows.text(0)] = rows.is_null(1) ? std::string() : rows.text(1);
    }
    return metadata;
}

} // namespace kvscope::profiler
