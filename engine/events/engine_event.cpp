#include "engine/events/engine_event.h"

#include "engine/util/host_clock.h"

namespace kvscope::events {

std::string_view event_kind_name(EventKind kind) {
    switch (kind) {
    case EventKind::run_config:
        return "run_config";
    case EventKind::step_begin:
        return "step_begin";
    case EventKind::step_end:
        return "step_end";
    case EventKind::request_arrived:
        return "request_arrived";
    case EventKind::request_admitted:
        return "request_admitted";
    case EventKind::first_token:
        return "first_token";
    case EventKind::request_finished:
        return "request_finished";
    case EventKind::request_preempted:
        return "request_preempted";
    case EventKind::request_aborted:
        return "request_aborted";
    case EventKind::request_rejected:
        return "request_rejected";
    case EventKind::block_allocated:
        return "block_allocated";
    case EventKind::block_freed:
        return "block_freed";
    case EventKind::block_shared:
        return "block_shared";
    case EventKind::block_cached:
        return "block_cached";
    case EventKind::block_evicted:
        return "block_evicted";
    case EventKind::prefix_lookup:
        return "prefix_lookup";
    case EventKind::tokens_evicted:
        return "tokens_evicted";
    case EventKind::cache_fill:
        return "cache_fill";
    case EventKind::op_slice:
        return "op_slice";
    case EventKind::memory_sample:
        return "memory_sample";
    case EventKind::block_compacted:
        return "block_compacted";
    case EventKind::kv_bytes:
        return "kv_bytes";
    case EventKind::block_unshared:
        return "block_unshared";
    case EventKind::token_sampled:
        return "token_sampled";
    case EventKind::device_memory:
        return "device_memory";
    case EventKind::source_attached:
        return "source_attached";
    case EventKind::attached_block_stored:
        return "attached_block_stored";
    case EventKind::attached_block_removed:
        return "attached_block_removed";
    case EventKind::attached_cleared:
        return "attached_cleared";
    case EventKind::attached_status:
        return "attached_status";
    case EventKind::attached_block_moved:
        return "attached_block_moved";
    case EventKind::attached_metric:
        return "attached_metric";
    case EventKind::draft_verified:
        return "draft_verified";
    case EventKind::block_offloaded:
        return "block_offloaded";
    case EventKind::block_reloaded:
        return "block_reloaded";
    case EventKind::tier_dropped:
        return "tier_dropped";
    case EventKind::step_counters:
        return "step_counters";
    case EventKind::group_blocks:
        return "group_blocks";
    }
    return "unknown";
}

std::string encode_pieces(const std::vector<std::string>& pieces) {
    std::string text;
    for (const std::string& piece : pieces) {
        text += std::to_string(piece.size());
        text += ':';
        text += piece;
    }
    return text;
}

std::vector<std::string> decode_pieces(std::string_view text) {
    std::vector<std::string> pieces;
    std::size_t at = 0;
    while (at < text.size()) {
        std::size_t length = 0;
        std::size_t digits = 0;
        while (at < text.size() && text[at] >= '0' && text[at] <= '9' && digits < 9) {
            length = length * 10 + static_cast<std::size_t>(text[at] - '0');
            ++at;
            ++digits;
        }
        if (digits == 0 || at >= text.size() || text[at] != ':' || text.size() - at - 1 < length) {
            return {};
        }
        pieces.emplace_back(text.substr(at + 1, length));
        at += 1 + length;
    }
    return pieces;
}

void emit_now(EventSink* sink, EngineEvent event) {
    if (sink != nullptr) {
        event.time_ns = host_now_ns();
        sink->on_event(event);
    }
}

} // namespace kvscope::events
