#include "profiler/attach/trtllm_events.h"

#include <nlohmann/json.hpp>

namespace kvscope::attach {
namespace {

using nlohmann::json;

// The fields each data type has, beyond "type": anything else is counted.
bool known_field(std::string_view type, std::string_view name) {
    if (name == "type") {
        return true;
    }
    if (type == "created") {
        return name == "num_blocks_per_cache_level";
    }
    if (type == "stored") {
        return name == "parent_hash" || name == "blocks";
    }
    if (type == "stored_block") {
        return name == "block_hash" || name == "tokens" || name == "cache_level" ||
               name == "priority" || name == "lora_id";
    }
    if (type == "removed") {
        return name == "block_hashes";
    }
    if (type == "updated") {
        return name == "block_hash" || name == "cache_level" || name == "priority";
    }
    return false;
}

void count_unknown_fields(const json& object, std::string_view type, DecodeCounts& counts) {
    for (const auto& [name, value] : object.items()) {
        counts.unknown_fields += known_field(type, name) ? 0 : 1;
    }
}

// A hash: a JSON integer (signed or not: both fit 64 bits).
bool read_hash(const json& value, BlockHash& out) {
    if (value.is_number_unsigned()) {
        out = BlockHash::from_uint(value.get<std::uint64_t>());
        return true;
    }
    if (value.is_number_integer()) {
        out = BlockHash::from_int(value.get<std::int64_t>());
        return true;
    }
    return false;
}

bool read_int(const json& object, const char* key, std::int64_t& out) {
    const auto it = object.find(key);
    if (it == object.end() || !it->is_number_integer()) {
        return false;
    }
    out = it->get<std::int64_t>();
    return true;
}

// One "stored" event: its blocks, split where the cache level changes (each
// part continues the last block of the one before).
bool read_stored(const json& data, KvEventBatch& batch, DecodeCounts& counts, std::string& why) {
    std::optional<BlockHash> parent;
    if (const auto it = data.find("parent_hash"); it != data.end() && !it->is_null()) {
        BlockHash hash;
        if (!read_hash(*it, hash)) {
            why = "stored: parent_hash is not an integer";
            return false;
        }
        parent = hash;
    }
    const auto blocks = data.find("blocks");
    if (blocks == data.end() || !blocks->is_array()) {
        why = "stored: no blocks array";
        return false;
    }
    std::vector<StoredBlocks> parts;
    for (const json& block : *blocks) {
        if (!block.is_object()) {
            why = "stored: a block is not an object";
            return false;
        }
        count_unknown_fields(block, "stored_block", counts);
        BlockHash hash;
        const auto hash_it = block.find("block_hash");
        if (hash_it == block.end() || !read_hash(*hash_it, hash)) {
            why = "stored: a block has no integer block_hash";
            return false;
        }
        std::int64_t level = 0;
        if (block.contains("cache_level") && !read_int(block, "cache_level", level)) {
            why = "stored: cache_level is not an integer";
            return false;
        }
        std::vector<std::int64_t> tokens;
        if (const auto it = block.find("tokens"); it != block.end()) {
            if (!it->is_array()) {
                why = "stored: tokens is not an array";
                return false;
            }
            for (const json& token : *it) {
                std::int64_t id = 0;
                if (token.is_object() ? !read_int(token, "token_id", id)
                                      : !token.is_number_integer()) {
                    why = "stored: a token has no integer token_id";
                    return false;
                }
                tokens.push_back(token.is_object() ? id : token.get<std::int64_t>());
            }
        }
        const std::string medium = trtllm_medium(level);
        if (parts.empty() || parts.back().medium != medium) {
            StoredBlocks part;
            part.medium = medium;
            part.parent = parts.empty() ? parent : std::optional(parts.back().hashes.back());
            part.block_size = static_cast<std::int64_t>(tokens.size());
            parts.push_back(std::move(part));
        }
        StoredBlocks& part = parts.back();
        part.hashes.push_back(hash);
        part.token_ids.insert(part.token_ids.end(), tokens.begin(), tokens.end());
    }
    for (StoredBlocks& part : parts) {
        batch.events.emplace_back(std::move(part));
    }
    return true;
}

bool read_event(const json& event, TrtllmDecodeResult& result, double ts, std::string& why) {
    if (!event.is_object()) {
        why = "an event is not an object";
        return false;
    }
    KvEventBatch batch;
    batch.ts = ts;
    std::int64_t id = 0;
    if (!read_int(event, "event_id", id) || id < 0) {
        why = "an event has no event_id";
        return false;
    }
    batch.sequence = static_cast<std::uint64_t>(id);
    std::int64_t rank = 0;
    if (read_int(event, "attention_dp_rank", rank)) {
        batch.rank = rank;
    }
    for (const auto& [name, value] : event.items()) {
        const bool known = name == "event_id" || name == "data" || name == "window_size" ||
                           name == "attention_dp_rank";
        result.counts.unknown_fields += known ? 0 : 1;
    }
    const auto data = event.find("data");
    if (data == event.end() || !data->is_object() || !data->contains("type") ||
        !(*data)["type"].is_string()) {
        why = "an event has no data with a type";
        return false;
    }
    const std::string type = (*data)["type"].get<std::string>();
    if (type == "created") {
        count_unknown_fields(*data, type, result.counts);
        const auto levels = data->find("num_blocks_per_cache_level");
        if (levels == data->end() || !levels->is_array()) {
            why = "created: no num_blocks_per_cache_level";
            return false;
        }
        std::vector<std::int64_t> blocks;
        for (const json& level : *levels) {
            if (!level.is_number_integer()) {
                why = "created: a level's block count is not an integer";
                return false;
            }
            blocks.push_back(level.get<std::int64_t>());
        }
        result.blocks_per_cache_level = std::move(blocks);
        // A cache (re)created: nothing is resident in it yet.
        batch.events.emplace_back(AllCleared{});
    } else if (type == "stored") {
        count_unknown_fields(*data, type, result.counts);
        if (!read_stored(*data, batch, result.counts, why)) {
            return false;
        }
    } else if (type == "removed") {
        count_unknown_fields(*data, type, result.counts);
        const auto hashes = data->find("block_hashes");
        if (hashes == data->end() || !hashes->is_array()) {
            why = "removed: no block_hashes array";
            return false;
        }
        RemovedBlocks removed;
        removed.medium.clear(); // whichever tier holds them
        for (const json& value : *hashes) {
            BlockHash hash;
            if (!read_hash(value, hash)) {
                why = "removed: a hash is not an integer";
                return false;
            }
            removed.hashes.push_back(hash);
        }
        batch.events.emplace_back(std::move(removed));
    } else if (type == "updated") {
        count_unknown_fields(*data, type, result.counts);
        BlockHash hash;
        const auto hash_it = data->find("block_hash");
        if (hash_it == data->end() || !read_hash(*hash_it, hash)) {
            why = "updated: no integer block_hash";
            return false;
        }
        // Only a change of cache level moves anything; a priority change
        // (or an unchanged level) leaves the block where it is.
        const auto level = data->find("cache_level");
        if (level != data->end() && level->is_object()) {
            std::int64_t before = 0;
            std::int64_t after = 0;
            if (!read_int(*level, "old_value", before) || !read_int(*level, "new_value", after)) {
                why = "updated: cache_level without integer old_value and new_value";
                return false;
            }
            if (before != after) {
                batch.events.emplace_back(
                    MovedBlocks{{hash}, trtllm_medium(before), trtllm_medium(after)});
            }
        }
    } else {
        ++result.counts.unknown_event_types;
    }
    result.counts.events += static_cast<std::int64_t>(batch.events.size());
    result.batches.push_back(std::move(batch));
    return true;
}

} // namespace

std::string trtllm_medium(std::int64_t cache_level) {
    if (cache_level == 0) {
        return "GPU";
    }
    if (cache_level == 1) {
        return "CPU";
    }
    return "LEVEL" + std::to_string(cache_level);
}

TrtllmDecodeResult decode_trtllm_events(std::string_view json_text, double received_ts) {
    TrtllmDecodeResult result;
    ++result.counts.messages;
    const json parsed = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
    if (parsed.is_discarded()) {
        result.error = "not JSON";
        ++result.counts.rejected_messages;
        return result;
    }
    // One event, or a list of them (what the serializer gives for each).
    const json events = parsed.is_array() ? parsed : json::array({parsed});
    for (const json& event : events) {
        if (event.is_null() || (event.is_object() && event.empty())) {
            continue; // the serializer's "no event"
        }
        std::string why;
        if (!read_event(event, result, received_ts, why)) {
            ++result.counts.malformed_events;
            if (result.error.empty()) {
                result.error = why;
            }
        }
    }
    return result;
}

} // namespace kvscope::attach
