#include "profiler/recording/recording_views.h"

#include "engine/events/typed_events.h"
#include "profiler/recording/sqlite_util.h"

#include <algorithm>
#include <initializer_list>
#include <stdexcept>
#include <vector>

namespace kvscope::profiler {
namespace {

using events::EventKind;

std::string id(EventKind kind) {
    return std::to_string(static_cast<int>(kind));
}

// The KVSCOPE_EVENTS column a kind's field travels in, as SQL (`e.a`).
std::string col(EventKind kind, std::string_view field) {
    return "e." + std::string(events::column_name(events::column_of(kind, field)));
}

std::string kind_list(const std::vector<EventKind>& kinds) {
    std::string list;
    for (const EventKind kind : kinds) {
        list += (list.empty() ? "" : ", ") + id(kind);
    }
    return list;
}

// One row per event of `kinds`: id, t_ns, kind (by name), then every field
// of those kinds by name; a field a row's kind lacks is NULL.
std::string events_view(const std::string& name, const std::vector<EventKind>& kinds) {
    std::vector<std::string> fields;
    for (const EventKind kind : kinds) {
        for (const events::FieldColumn& f : events::field_columns(kind)) {
            if (std::find(fields.begin(), fields.end(), f.name) == fields.end()) {
                fields.emplace_back(f.name);
            }
        }
    }
    std::string sql = "CREATE VIEW IF NOT EXISTS " + name +
                      " AS\nSELECT e.id AS id, e.t_ns AS t_ns, k.name AS kind";
    for (const std::string& field : fields) {
        std::string when;
        for (const EventKind kind : kinds) {
            for (const events::FieldColumn& f : events::field_columns(kind)) {
                if (f.name == field) {
                    when += " WHEN " + id(kind) + " THEN " + col(kind, field);
                }
            }
        }
        sql += ",\n    CASE e.kind" + when + " END AS " + field;
    }
    sql += "\nFROM KVSCOPE_EVENTS AS e JOIN ENUM_KVSCOPE_EVENT_KIND AS k ON k.id = e.kind\n"
           "WHERE e.kind IN (" +
           kind_list(kinds) + ");\n";
    return sql;
}

std::string steps_view() {
    const EventKind begin = EventKind::step_begin;
    const EventKind end = EventKind::step_end;
    const auto when = [](EventKind kind, const std::string& value) {
        return "max(CASE WHEN e.kind = " + id(kind) + " THEN " + value + " END)";
    };
    std::string phase = "CASE " + when(begin, col(begin, "phase"));
    for (const auto p :
         {events::StepPhase::prefill, events::StepPhase::decode, events::StepPhase::mixed}) {
        phase += " WHEN " + std::to_string(static_cast<int>(p)) + " THEN '" +
                 std::string(events::step_phase_name(p)) + "'";
    }
    phase += " ELSE NULL END";
    // A step's two events share its index, in the same column.
    if (events::column_of(begin, "step") != events::column_of(end, "step")) {
        throw std::logic_error("step_begin and step_end carry the step in different columns");
    }
    return "CREATE VIEW IF NOT EXISTS KVSCOPE_STEPS AS\nSELECT " + col(begin, "step") +
           " AS step,\n    " + when(begin, "e.t_ns") + " AS begin_ns,\n    " + when(end, "e.t_ns") +
           " AS end_ns,\n    (" + when(end, "e.t_ns") + " - " + when(begin, "e.t_ns") +
           ") / 1e6 AS duration_ms,\n    " + phase + " AS phase,\n    " +
           when(begin, col(begin, "scheduled_tokens")) + " AS scheduled_tokens,\n    " +
           when(begin, col(begin, "sequences")) + " AS sequences,\n    " +
           when(end, col(end, "prefill_tokens")) + " AS prefill_tokens,\n    " +
           when(end, col(end, "decode_tokens")) +
           " AS decode_tokens\nFROM KVSCOPE_EVENTS AS e\nWHERE e.kind IN (" +
           kind_list({begin, end}) + ")\nGROUP BY " + col(begin, "step") + ";\n";
}

std::string requests_view() {
    const EventKind arrived = EventKind::request_arrived;
    const EventKind admitted = EventKind::request_admitted;
    const EventKind finished = EventKind::request_finished;
    const EventKind aborted = EventKind::request_aborted;
    const EventKind rejected = EventKind::request_rejected;
    const EventKind sampled = EventKind::token_sampled;
    const std::string ended = kind_list({finished, aborted, rejected});
    const auto first = [](EventKind kind, const std::string& value) {
        return "min(CASE WHEN e.kind = " + id(kind) + " THEN " + value + " END)";
    };
    const auto last = [](EventKind kind, const std::string& value) {
        return "max(CASE WHEN e.kind = " + id(kind) + " THEN " + value + " END)";
    };
    // Admitted after its last preemption: running; else back in the queue.
    const auto last_id = [](EventKind kind) {
        return "max(CASE WHEN e.kind = " + id(kind) + " THEN e.id END)";
    };
    const auto count = [](EventKind kind) {
        return "count(CASE WHEN e.kind = " + id(kind) + " THEN 1 END)";
    };
    // The first admission's counts: a preempted request is admitted again,
    // and re-admissions are not new prefix hits (min() picks the row whose
    // other columns SQLite returns).
    const std::string first_admission =
        "SELECT e.request AS request, min(e.id) AS first_id, " + col(admitted, "cached_tokens") +
        " AS cached_tokens, " + col(admitted, "computed_tokens") + " AS computed_tokens, " +
        col(admitted, "blocks_hit") + " AS blocks_hit, " + col(admitted, "blocks_missed") +
        " AS blocks_missed FROM KVSCOPE_EVENTS AS e WHERE e.kind = " + id(admitted) +
        " GROUP BY e.request";
    const std::string end_ns = "max(CASE WHEN e.kind IN (" + ended + ") THEN e.t_ns END)";
    return "CREATE VIEW IF NOT EXISTS KVSCOPE_REQUESTS AS\nSELECT e.request AS request,\n    "
           "CASE WHEN " +
           count(finished) + " > 0 THEN 'finished' WHEN " + count(aborted) +
           " > 0 THEN 'aborted' WHEN " + count(rejected) + " > 0 THEN 'rejected' WHEN " +
           last_id(admitted) + " > coalesce(" + last_id(EventKind::request_preempted) +
           ", 0) THEN 'running' ELSE 'waiting' END AS state,\n    " + first(arrived, "e.t_ns") +
           " AS arrival_ns,\n    " + first(admitted, "e.t_ns") + " AS admitted_ns,\n    " +
           first(EventKind::first_token, "e.t_ns") + " AS first_token_ns,\n    " + end_ns +
           " AS end_ns,\n    (" + first(EventKind::first_token, "e.t_ns") + " - " +
           first(arrived, "e.t_ns") + ") / 1e6 AS ttft_ms,\n    " +
           last(arrived, col(arrived, "prompt_tokens")) +
           " AS prompt_tokens,\n    f.cached_tokens AS cached_tokens,\n    f.computed_tokens "
           "AS computed_tokens,\n    f.blocks_hit AS blocks_hit,\n    f.blocks_missed AS "
           "blocks_missed,\n    coalesce(" +
           last(finished, col(finished, "generated_tokens")) + ", " +
           last(sampled, col(sampled, "generated")) + ", 0) AS generated_tokens,\n    " +
           count(EventKind::request_preempted) +
           " AS preemptions,\n    coalesce(sum(CASE WHEN e.kind = " +
           id(EventKind::tokens_evicted) + " THEN " + col(EventKind::tokens_evicted, "tokens") +
           " END), 0) AS evicted_tokens,\n    " + "max(CASE WHEN e.kind IN (" +
           kind_list({finished, rejected}) + ") THEN " + col(finished, "reason") +
           " END) AS reason\nFROM KVSCOPE_EVENTS AS e LEFT JOIN (" + first_admission +
           ") AS f ON f.request = e.request\nWHERE e.request IS NOT NULL AND e.request >= 0\n"
           "GROUP BY e.request;\n";
}

// Each request's generated text: its token_sampled pieces joined in the
// order it sampled them. A window's ORDER BY fixes the order group_concat
// sees (a plain group_concat's is unspecified; its own ORDER BY needs SQLite
// 3.44). Its own view, so KVSCOPE_REQUESTS does not join every piece.
std::string outputs_view() {
    const EventKind sampled = EventKind::token_sampled;
    return "CREATE VIEW IF NOT EXISTS KVSCOPE_OUTPUTS AS\nSELECT request, count(*) AS tokens, "
           "max(output) AS output FROM (SELECT e.request AS request, group_concat(" +
           col(sampled, "piece") + ", '') OVER (PARTITION BY e.request ORDER BY " +
           col(sampled, "generated") +
           " ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) AS output\n"
           "FROM KVSCOPE_EVENTS AS e WHERE e.kind = " +
           id(sampled) + ")\nGROUP BY request;\n";
}

std::string op_slices_view() {
    const EventKind op = EventKind::op_slice;
    return "CREATE VIEW IF NOT EXISTS KVSCOPE_OP_SLICES AS\nSELECT e.id AS id, " + col(op, "op") +
           " AS op, " + col(op, "step") + " AS step, " + col(op, "layer") +
           " AS layer, e.t_ns AS begin_ns, " + col(op, "end_ns") + " AS end_ns, (" +
           col(op, "end_ns") + " - e.t_ns) / 1e3 AS duration_us, " + col(op, "cpu_ns") +
           " / 1e3 AS cpu_us\nFROM KVSCOPE_EVENTS AS e\n"
           "WHERE e.kind = " +
           id(op) + ";\n";
}

// Attached engines: the sources as given, and one row per stored, removed or
// cleared block with the detail JSON spread into columns (json_extract, so
// a reader needs nothing beyond sqlite3).
std::string sources_view() {
    const EventKind attached = EventKind::source_attached;
    const std::string endpoints = col(attached, "endpoints");
    return "CREATE VIEW IF NOT EXISTS KVSCOPE_SOURCES AS\nSELECT " + col(attached, "source") +
           " AS source, e.t_ns AS attached_ns,\n    json_extract(" + endpoints +
           ", '$.endpoint') AS endpoint,\n    json_extract(" + endpoints +
           ", '$.replay') AS replay_endpoint,\n    json_extract(" + endpoints +
           ", '$.topic') AS topic,\n    json_extract(" + endpoints +
           ", '$.metrics') AS metrics_url,\n    " + col(attached, "block_size") +
           " AS block_size, " + col(attached, "num_blocks") +
           " AS num_blocks\nFROM KVSCOPE_EVENTS AS e\nWHERE e.kind = " + id(attached) + ";\n";
}

std::string attached_blocks_view() {
    const EventKind stored = EventKind::attached_block_stored;
    const EventKind removed = EventKind::attached_block_removed;
    const EventKind cleared = EventKind::attached_cleared;
    const EventKind moved = EventKind::attached_block_moved;
    for (const char* shared : {"source", "rank", "published_us"}) {
        if (events::column_of(stored, shared) != events::column_of(removed, shared) ||
            events::column_of(stored, shared) != events::column_of(cleared, shared) ||
            events::column_of(stored, shared) != events::column_of(moved, shared)) {
            throw std::logic_error(std::string("attached rows carry ") + shared +
                                   " in different columns");
        }
    }
    const std::string detail = col(stored, "detail");
    if (detail != col(removed, "detail") || detail != col(moved, "detail")) {
        throw std::logic_error("attached rows carry their detail in different columns");
    }
    const auto from_detail = [&](const char* key) {
        return "CASE WHEN e.kind IN (" + kind_list({stored, removed}) + ") THEN json_extract(" +
               detail + ", '$." + key + "') END";
    };
    // A moved block's medium is where it went; moved_from where it was.
    const std::string medium = "CASE WHEN e.kind = " + id(moved) + " THEN json_extract(" + detail +
                               ", '$.to') ELSE " + from_detail("medium") + " END";
    const std::string hash = "CASE WHEN e.kind = " + id(moved) + " THEN json_extract(" + detail +
                             ", '$.hash') ELSE " + from_detail("hash") + " END";
    std::string cause = "CASE WHEN e.kind = " + id(cleared) + " THEN CASE " + col(cleared, "cause");
    for (const auto c :
         {events::ClearCause::all_blocks_cleared, events::ClearCause::publisher_restarted,
          events::ClearCause::events_lost}) {
        cause += " WHEN " + std::to_string(static_cast<int>(c)) + " THEN '" +
                 std::string(events::clear_cause_name(c)) + "'";
    }
    cause += " END END";
    return "CREATE VIEW IF NOT EXISTS KVSCOPE_ATTACHED_BLOCKS AS\nSELECT e.id AS id, e.t_ns AS "
           "t_ns, k.name AS kind,\n    " +
           col(stored, "source") + " AS source, " + col(stored, "rank") + " AS rank,\n    " +
           medium + " AS medium,\n    " + hash + " AS hash,\n    CASE WHEN e.kind = " + id(moved) +
           " THEN json_extract(" + detail + ", '$.from') END AS moved_from,\n    " +
           from_detail("parent") + " AS parent,\n    CASE WHEN e.kind = " + id(stored) + " THEN " +
           col(stored, "block_size") + " END AS block_size,\n    CASE WHEN e.kind = " + id(stored) +
           " THEN json_extract(" + detail + ", '$.tokens') END AS tokens,\n    " +
           from_detail("lora_id") + " AS lora_id,\n    " + from_detail("group") +
           " AS kv_group,\n    " + cause + " AS cause,\n    " + col(stored, "published_us") +
           " AS published_us\nFROM KVSCOPE_EVENTS AS e JOIN ENUM_KVSCOPE_EVENT_KIND AS k ON k.id "
           "= e.kind\nWHERE e.kind IN (" +
           kind_list({stored, removed, cleared, moved}) + ");\n";
}

// One row per polled metric sample, the sample's JSON spread into columns.
std::string attached_metrics_view() {
    const EventKind metric = EventKind::attached_metric;
    const std::string sample = col(metric, "sample");
    return "CREATE VIEW IF NOT EXISTS KVSCOPE_ATTACHED_METRICS AS\nSELECT e.id AS id, e.t_ns AS "
           "t_ns, " +
           col(metric, "source") + " AS source,\n    json_extract(" + sample +
           ", '$.name') AS name,\n    json_extract(" + sample +
           ", '$.value') AS value,\n    json_extract(" + sample +
           ", '$.labels') AS labels\nFROM KVSCOPE_EVENTS AS e\nWHERE e.kind = " + id(metric) +
           ";\n";
}

} // namespace

std::string recording_views_sql() {
    return steps_view() + requests_view() + outputs_view() +
           events_view("KVSCOPE_BLOCK_EVENTS",
                       {EventKind::block_allocated, EventKind::block_shared,
                        EventKind::block_unshared, EventKind::block_freed, EventKind::block_cached,
                        EventKind::block_evicted, EventKind::block_compacted,
                        EventKind::block_offloaded, EventKind::block_reloaded,
                        EventKind::tier_dropped}) +
           op_slices_view() +
           events_view("KVSCOPE_MEMORY", {EventKind::memory_sample, EventKind::kv_bytes,
                                          EventKind::cache_fill, EventKind::device_memory}) +
           events_view("KVSCOPE_KV_GROUPS", {EventKind::group_blocks}) + sources_view() +
           attached_blocks_view() +
           events_view("KVSCOPE_ATTACHED_STATUS", {EventKind::attached_status}) +
           attached_metrics_view();
}

void create_recording_views(sqlite3* db) {
    exec_sqlite(db, recording_views_sql().c_str(), "creating the recording's views");
}

} // namespace kvscope::profiler
