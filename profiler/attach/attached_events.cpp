#include "profiler/attach/attached_events.h"

#include "engine/util/hex_digit.h"
#include "engine/util/json_text.h"
#include "profiler/attach/kv_event_source.h"
#include "profiler/attach/metrics_poller.h"
#include "profiler/attach/trtllm_event_source.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>
#include <span>
#include <type_traits>
#include <variant>

namespace kvscope::attach {
namespace {

using nlohmann::json;

std::int64_t to_us(double seconds) {
    // A publisher's clock is its own business: keep anything finite, in range.
    if (!std::isfinite(seconds) || std::fabs(seconds) > 9.0e12) {
        return 0;
    }
    return static_cast<std::int64_t>(std::llround(seconds * 1e6));
}

template <class Row>
Row row_of(std::int64_t source, const KvEventBatch& batch) {
    Row row;
    row.source = source;
    row.rank = batch.rank.value_or(0);
    row.published_us = to_us(batch.ts);
    return row;
}

// Reads an optional integer member; false when present but not an integer.
bool get_optional(const json& j, const char* key, std::optional<std::int64_t>& out) {
    const auto it = j.find(key);
    if (it == j.end() || it->is_null()) {
        out.reset();
        return true;
    }
    if (!it->is_number_integer()) {
        return false;
    }
    out = it->get<std::int64_t>();
    return true;
}

// The detail's medium; false when present but not a string.
bool get_medium(const json& j, std::string& out) {
    const auto it = j.find("medium");
    if (it == j.end()) {
        out = kDefaultMedium;
        return true;
    }
    if (!it->is_string()) {
        return false;
    }
    out = it->get<std::string>();
    return true;
}

std::optional<json> parse_object(const std::string& text) {
    json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) {
        return std::nullopt;
    }
    return j;
}

std::optional<BlockHash> hash_member(const json& j, const char* key) {
    const auto it = j.find(key);
    if (it == j.end() || !it->is_string()) {
        return std::nullopt;
    }
    return parse_block_hash(it->get_ref<const std::string&>());
}

// The rows' detail JSON, put together from parts whose JSON form is plain:
// hashes in hex, integers (std::to_chars), and the strings a publisher sent
// (media), quoted and escaped by nlohmann. Building nlohmann's DOM for every
// row (a map node per key, a value per token id) cost more than the rest of
// the attach thread together at 100,000 events a second. Keys come in
// nlohmann's order (its objects are sorted maps), so the bytes are what
// nlohmann writes (tst_attached_events compares them); reading the rows back
// is nlohmann's.
class DetailWriter {
public:
    explicit DetailWriter(std::string& out)
        : out_(out) {
        out_ = '{';
    }
    void key(std::string_view name) {
        out_ += first_ ? "\"" : ",\"";
        first_ = false;
        out_ += name;
        out_ += "\":";
    }
    void json_value(std::string_view name, std::string_view value) {
        key(name);
        out_ += value;
    }
    void hash(std::string_view name, const BlockHash& value) {
        key(name);
        out_ += '"';
        value.append_hex(out_);
        out_ += '"';
    }
    void integer(std::int64_t value) {
        char digits[24];
        out_.append(digits, std::to_chars(digits, digits + sizeof digits, value).ptr);
    }
    void optional_int(std::string_view name, const std::optional<std::int64_t>& value) {
        if (value) {
            key(name);
            integer(*value);
        }
    }
    void integers(std::string_view name, std::span<const std::int64_t> values) {
        key(name);
        out_ += '[';
        for (std::size_t i = 0; i < values.size(); ++i) {
            if (i != 0) {
                out_ += ',';
            }
            integer(values[i]);
        }
        out_ += ']';
    }
    void close() { out_ += '}'; }

private:
    std::string& out_;
    bool first_ = true;
};

// A publisher's string as JSON (its bytes may not be UTF-8: replaced, never
// thrown).
std::string json_string(const std::string& text) {
    return json_text(json(text));
}

std::string stored_detail(const StoredBlocks& e, std::string_view medium, std::size_t begin,
                          std::size_t end, const BlockHash& hash,
                          const std::optional<BlockHash>& parent) {
    std::string out;
    out.reserve(96 + (end - begin) * 7);
    DetailWriter w(out);
    w.optional_int("group", e.group_idx);
    w.hash("hash", hash);
    w.optional_int("lora_id", e.lora_id);
    w.json_value("medium", medium);
    if (parent) {
        w.hash("parent", *parent);
    }
    w.integers("tokens", std::span(e.token_ids).subspan(begin, end - begin));
    w.close();
    return out;
}

std::string removed_detail(const RemovedBlocks& e, std::string_view medium, const BlockHash& hash) {
    std::string out;
    DetailWriter w(out);
    w.optional_int("group", e.group_idx);
    w.hash("hash", hash);
    w.json_value("medium", medium);
    w.close();
    return out;
}

std::string moved_detail(const MovedBlocks& e, const BlockHash& hash) {
    std::string out;
    DetailWriter w(out);
    w.json_value("from", json_string(e.from_medium));
    w.hash("hash", hash);
    w.json_value("to", json_string(e.to_medium));
    w.close();
    return out;
}

} // namespace

std::optional<BlockHash> parse_block_hash(std::string_view text) {
    const bool integer = text.starts_with("0x");
    if (integer) {
        text.remove_prefix(2);
        if (text.size() != 16) {
            return std::nullopt;
        }
    }
    if (text.size() % 2 != 0 || text.size() > 2 * BlockHash::kMaxBytes) {
        return std::nullopt;
    }
    // Straight into the hash's array: this runs for every row read back.
    BlockHash hash;
    hash.size = static_cast<std::uint8_t>(text.size() / 2);
    for (std::size_t i = 0; i < text.size(); i += 2) {
        const int high = hex_digit(text[i]);
        const int low = hex_digit(text[i + 1]);
        if (high < 0 || low < 0) {
            return std::nullopt;
        }
        hash.data[i / 2] = static_cast<std::uint8_t>(high * 16 + low);
    }
    hash.form = integer ? BlockHash::Form::integer : BlockHash::Form::bytes;
    return hash;
}

void append_typed_events(std::int64_t source, const SourceBatch& source_batch,
                         std::vector<events::EngineEvent>& out) {
    const KvEventBatch& batch = source_batch.batch;
    if (source_batch.after_loss) {
        auto cleared = row_of<events::AttachedCleared>(source, batch);
        cleared.cause = events::ClearCause::events_lost;
        out.push_back(events::to_event(cleared));
    }
    if (source_batch.restarted) {
        auto cleared = row_of<events::AttachedCleared>(source, batch);
        cleared.cause = events::ClearCause::publisher_restarted;
        out.push_back(events::to_event(cleared));
    }
    for (const KvEvent& event : batch.events) {
        std::visit(
            [&](const auto& e) {
                using E = std::decay_t<decltype(e)>;
                if constexpr (std::is_same_v<E, StoredBlocks>) {
                    // Block i covers tokens [i * block_size, (i + 1) * block_size)
                    // and continues block i - 1 (the first, the event's parent).
                    const auto block_size =
                        static_cast<std::size_t>(std::max<std::int64_t>(e.block_size, 0));
                    std::optional<BlockHash> parent = e.parent;
                    const std::string medium = json_string(e.medium);
                    for (std::size_t i = 0; i < e.hashes.size(); ++i) {
                        const std::size_t begin = std::min(i * block_size, e.token_ids.size());
                        const std::size_t end = std::min(begin + block_size, e.token_ids.size());
                        auto row = row_of<events::AttachedBlockStored>(source, batch);
                        row.block_size = e.block_size;
                        row.detail = stored_detail(e, medium, begin, end, e.hashes[i], parent);
                        out.push_back(events::to_event(row));
                        parent = e.hashes[i];
                    }
                } else if constexpr (std::is_same_v<E, RemovedBlocks>) {
                    const std::string medium = json_string(e.medium);
                    for (const BlockHash& hash : e.hashes) {
                        auto row = row_of<events::AttachedBlockRemoved>(source, batch);
                        row.detail = removed_detail(e, medium, hash);
                        out.push_back(events::to_event(row));
                    }
                } else if constexpr (std::is_same_v<E, MovedBlocks>) {
                    for (const BlockHash& hash : e.hashes) {
                        auto row = row_of<events::AttachedBlockMoved>(source, batch);
                        row.detail = moved_detail(e, hash);
                        out.push_back(events::to_event(row));
                    }
                } else {
                    static_assert(std::is_same_v<E, AllCleared>);
                    auto row = row_of<events::AttachedCleared>(source, batch);
                    row.cause = events::ClearCause::all_blocks_cleared;
                    out.push_back(events::to_event(row));
                }
            },
            event);
    }
}

std::optional<StoredBlocks> stored_block_of(const events::AttachedBlockStored& row) {
    const std::optional<json> j = parse_object(row.detail);
    if (!j) {
        return std::nullopt;
    }
    StoredBlocks block;
    const std::optional<BlockHash> hash = hash_member(*j, "hash");
    if (!hash) {
        return std::nullopt;
    }
    block.hashes.push_back(*hash);
    if (j->contains("parent")) {
        block.parent = hash_member(*j, "parent");
        if (!block.parent) {
            return std::nullopt;
        }
    }
    if (const auto tokens = j->find("tokens"); tokens != j->end()) {
        if (!tokens->is_array()) {
            return std::nullopt;
        }
        block.token_ids.reserve(tokens->size());
        for (const json& token : *tokens) {
            if (!token.is_number_integer()) {
                return std::nullopt;
            }
            block.token_ids.push_back(token.get<std::int64_t>());
        }
    }
    block.block_size = row.block_size;
    if (!get_medium(*j, block.medium) || !get_optional(*j, "lora_id", block.lora_id) ||
        !get_optional(*j, "group", block.group_idx)) {
        return std::nullopt;
    }
    return block;
}

std::optional<RemovedBlocks> removed_block_of(const events::AttachedBlockRemoved& row) {
    const std::optional<json> j = parse_object(row.detail);
    if (!j) {
        return std::nullopt;
    }
    const std::optional<BlockHash> hash = hash_member(*j, "hash");
    if (!hash) {
        return std::nullopt;
    }
    RemovedBlocks removed;
    removed.hashes.push_back(*hash);
    if (!get_medium(*j, removed.medium) || !get_optional(*j, "group", removed.group_idx)) {
        return std::nullopt;
    }
    return removed;
}

std::optional<MovedBlocks> moved_block_of(const events::AttachedBlockMoved& row) {
    const std::optional<json> j = parse_object(row.detail);
    if (!j) {
        return std::nullopt;
    }
    const std::optional<BlockHash> hash = hash_member(*j, "hash");
    const auto from = j->find("from");
    const auto to = j->find("to");
    if (!hash || from == j->end() || to == j->end() || !from->is_string() || !to->is_string()) {
        return std::nullopt;
    }
    return MovedBlocks{{*hash}, from->get<std::string>(), to->get<std::string>()};
}

std::string endpoints_json(const KvEventSourceOptions& options, const std::string& metrics_url) {
    json j{{"endpoint", options.endpoint},
           {"replay", options.replay_endpoint},
           {"topic", options.topic}};
    if (!metrics_url.empty()) {
        j["metrics"] = metrics_url;
    }
    return json_text(j);
}

std::string trtllm_endpoint_json(const TrtllmSourceOptions& options,
                                 const std::string& metrics_url) {
    json j{{"endpoint", options.url}, {"replay", ""}, {"topic", ""}, {"transport", "trtllm-http"}};
    if (!metrics_url.empty()) {
        j["metrics"] = metrics_url;
    }
    return json_text(j);
}

std::string counts_json(const SourceCounts& counts, const std::string& last_error,
                        const MetricsEndpointStatus* metrics) {
    json j{{"messages", counts.messages},
           {"events", counts.events},
           {"gaps", counts.gaps},
           {"replayed", counts.replayed},
           {"lost", counts.lost},
           {"restarts", counts.restarts},
           {"clears", counts.clears},
           {"decode_errors", counts.decode_errors},
           {"unknown_event_types", counts.decode.unknown_event_types},
           {"unknown_fields", counts.decode.unknown_fields},
           {"malformed_events", counts.decode.malformed_events}};
    if (!last_error.empty()) {
        j["last_error"] = last_error;
    }
    if (metrics != nullptr) {
        json m{{"polls", metrics->polls},
               {"failures", metrics->failures},
               {"bad_lines", metrics->bad_lines},
               {"dropped", metrics->dropped},
               {"failing", metrics->failing}};
        if (!metrics->last_error.empty()) {
            m["last_error"] = metrics->last_error;
        }
        j["metrics"] = m;
    }
    // A publisher's bytes may not be UTF-8; replace rather than throw.
    return json_text(j);
}

std::int64_t AttachedState::Source::capacity_blocks() const {
    if (info.num_blocks > 0) {
        return info.num_blocks;
    }
    return summarize_metrics(metrics).num_gpu_blocks.value_or(0);
}

const AttachedState::Source* AttachedState::source(std::int64_t id) const {
    const auto it = sources_.find(id);
    return it == sources_.end() ? nullptr : &it->second;
}

AttachedState::Source& AttachedState::at(std::int64_t id) {
    Source& s = sources_[id];
    s.info.source = id;
    s.status.source = id;
    return s;
}

void AttachedState::apply(std::int64_t source, const SourceBatch& source_batch,
                          std::int64_t time_ns) {
    const KvEventBatch& batch = source_batch.batch;
    Source& s = at(source);
    // Stamped as its rows would stamp it: a batch that makes none (a
    // priority-only update, a store of no block) leaves no trace in replay.
    const bool makes_rows =
        source_batch.after_loss || source_batch.restarted ||
        std::any_of(batch.events.begin(), batch.events.end(), [](const KvEvent& event) {
            return std::visit(
                [](const auto& e) {
                    if constexpr (requires { e.hashes; }) {
                        return !e.hashes.empty();
                    } else {
                        return true; // AllCleared
                    }
                },
                event);
        });
    if (makes_rows) {
        s.last_event_ns = time_ns;
    }
    if (source_batch.after_loss) {
        s.blocks.clear();
        ++s.loss_clears;
    }
    if (source_batch.restarted) {
        s.blocks.clear();
    }
    // The rows carry the rank and the publisher's time in whole microseconds;
    // replay reads them back so, and so does this.
    const std::int64_t rank = batch.rank.value_or(0);
    const double published = static_cast<double>(to_us(batch.ts)) / 1e6;
    for (const KvEvent& event : batch.events) {
        s.blocks.apply(event, rank, published);
    }
}

std::size_t AttachedState::resident_blocks() const {
    std::size_t blocks = 0;
    for (const auto& [id, source] : sources_) {
        blocks += source.blocks.size();
    }
    return blocks;
}

bool is_attached_kind(events::EventKind kind) {
    using events::EventKind;
    switch (kind) {
    case EventKind::source_attached:
    case EventKind::attached_block_stored:
    case EventKind::attached_block_removed:
    case EventKind::attached_block_moved:
    case EventKind::attached_cleared:
    case EventKind::attached_status:
    case EventKind::attached_metric:
        return true;
    default:
        return false;
    }
}

bool AttachedState::apply(const events::EngineEvent& event) {
    using events::EventKind;
    switch (event.kind) {
    case EventKind::source_attached: {
        const auto row = events::as<events::SourceAttached>(event);
        Source& s = at(row.source);
        s.info = row;
        s.last_event_ns = event.time_ns;
        return true;
    }
    case EventKind::attached_block_stored: {
        const auto row = events::as<events::AttachedBlockStored>(event);
        Source& s = at(row.source);
        s.last_event_ns = event.time_ns;
        if (const std::optional<StoredBlocks> block = stored_block_of(row)) {
            s.blocks.apply(*block, row.rank, static_cast<double>(row.published_us) / 1e6);
        } else {
            ++s.bad_rows;
        }
        return true;
    }
    case EventKind::attached_block_removed: {
        const auto row = events::as<events::AttachedBlockRemoved>(event);
        Source& s = at(row.source);
        s.last_event_ns = event.time_ns;
        if (const std::optional<RemovedBlocks> block = removed_block_of(row)) {
            s.blocks.apply(*block, row.rank, static_cast<double>(row.published_us) / 1e6);
        } else {
            ++s.bad_rows;
        }
        return true;
    }
    case EventKind::attached_block_moved: {
        const auto row = events::as<events::AttachedBlockMoved>(event);
        Source& s = at(row.source);
        s.last_event_ns = event.time_ns;
        if (const std::optional<MovedBlocks> moved = moved_block_of(row)) {
            s.blocks.apply(*moved, row.rank, static_cast<double>(row.published_us) / 1e6);
        } else {
            ++s.bad_rows;
        }
        return true;
    }
    case EventKind::attached_cleared: {
        const auto row = events::as<events::AttachedCleared>(event);
        Source& s = at(row.source);
        s.last_event_ns = event.time_ns;
        if (row.cause == events::ClearCause::events_lost) {
            s.blocks.clear();
            ++s.loss_clears;
        } else if (row.cause == events::ClearCause::publisher_restarted) {
            s.blocks.clear();
        } else {
            s.blocks.apply(AllCleared{}, row.rank, static_cast<double>(row.published_us) / 1e6);
        }
        return true;
    }
    case EventKind::attached_status: {
        const auto row = events::as<events::AttachedStatus>(event);
        Source& s = at(row.source);
        s.status = row;
        s.last_event_ns = event.time_ns;
        return true;
    }
    case EventKind::attached_metric: {
        const auto row = events::as<events::AttachedMetric>(event);
        Source& s = at(row.source);
        s.last_event_ns = event.time_ns;
        if (const std::optional<MetricSample> sample = metric_of(row)) {
            add_metric(s.metrics, *sample, event.time_ns);
        } else {
            ++s.bad_rows;
        }
        return true;
    }
    default:
        return false;
    }
}

} // namespace kvscope::attach
