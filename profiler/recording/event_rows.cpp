#include "profiler/recording/event_rows.h"

namespace kvscope::profiler {
namespace {

// Far above any real cache (a 16-token block of a tiny model is still
// kilobytes), low enough that a damaged id cannot make a reader allocate
// gigabytes.
constexpr std::int64_t kMaxBlockId = (1 << 24) - 1;
// Host clock nanoseconds (CLOCK_MONOTONIC, since boot, attached engines'
// rows too; the simulator's clock starts at a second) stay far below this,
// and sums and differences of two stay inside int64, which readers take
// without checking each one for overflow.
constexpr std::int64_t kMaxTimeNs = std::int64_t{1} << 62;
// Request ids count from 0 in a run (attached rows use -1); 2^53 leaves
// every reader's arithmetic on them exact, even in a double.
constexpr std::int64_t kMaxRequestId = std::int64_t{1} << 53;

} // namespace

EventRows::EventRows(sqlite3* db, std::string name)
    : rows_(db, "SELECT t_ns, kind, request, block, a, b, c, d, text FROM KVSCOPE_EVENTS "
                "ORDER BY id")
    , name_(std::move(name)) {}

std::int64_t EventRows::estimated_count(sqlite3* db) {
    Statement count(db, "SELECT coalesce(max(id), 0) FROM KVSCOPE_EVENTS");
    return count.next() ? count.int64(0) : 0;
}

bool EventRows::next(events::EngineEvent& event) {
    while (rows_.next()) {
        ++read_;
        const std::int64_t kind = rows_.int64(1);
        if (kind < 0 || kind >= events::kEventKindCount) {
            continue;
        }
        const std::int64_t block = rows_.is_null(3) ? -1 : rows_.int64(3);
        if (block < -1 || block > kMaxBlockId) {
            throw RecordingError(name_ + ": event " + std::to_string(read_) + " names block " +
                                 std::to_string(block) + ", not a block id; the file is damaged");
        }
        const std::int64_t time_ns = rows_.int64(0);
        if (time_ns < 0 || time_ns >= kMaxTimeNs) {
            throw RecordingError(name_ + ": event " + std::to_string(read_) + " has time " +
                                 std::to_string(time_ns) +
                                 " ns, not a clock reading; the file is damaged");
        }
        const std::int64_t request = rows_.is_null(2) ? -1 : rows_.int64(2);
        if (request < -1 || request >= kMaxRequestId) {
            throw RecordingError(name_ + ": event " + std::to_string(read_) + " names request " +
                                 std::to_string(request) +
                                 ", not a request id; the file is damaged");
        }
        event.time_ns = time_ns;
        event.kind = static_cast<events::EventKind>(kind);
        event.request = request;
        event.block = static_cast<std::int32_t>(block);
        event.a = rows_.int64(4);
        event.b = rows_.int64(5);
        event.c = rows_.int64(6);
        event.d = rows_.int64(7);
        event.text = rows_.is_null(8) ? std::string() : rows_.text(8);
        return true;
    }
    return false;
}

} // namespace kvscope::profiler
