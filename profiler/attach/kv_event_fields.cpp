#include "profiler/attach/kv_event_fields.h"

#include "engine/util/json_text.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <span>
#include <string_view>

namespace kvscope::attach::detail {
namespace {

using Type = msgpack::type::object_type;

std::string_view as_view(const msgpack::object_str& str) {
    return {str.ptr, str.size};
}

bool read_hash(const msgpack::object& object, BlockHash& out) {
    switch (object.type) {
    case Type::POSITIVE_INTEGER:
        out = BlockHash::from_uint(object.via.u64);
        return true;
    case Type::NEGATIVE_INTEGER:
        out = BlockHash::from_int(object.via.i64);
        return true;
    case Type::BIN:
        return object.via.bin.size > 0 &&
               BlockHash::from_bytes(
                   std::span(reinterpret_cast<const std::uint8_t*>(object.via.bin.ptr),
                             object.via.bin.size),
                   out);
    default:
        return false;
    }
}

// An array whose every element `read_one` reads; `what` names an element for
// the message ("a hash (...)", "an integer").
template <class T, class ReadOne>
bool read_list(const msgpack::object& object, std::vector<T>& out, std::string& why,
               ReadOne read_one, const char* plural, const char* what) {
    if (object.type != Type::ARRAY) {
        why = std::string("is ") + type_name(object) + ", expected an array of " + plural;
        return false;
    }
    out.clear();
    out.reserve(object.via.array.size);
    for (std::uint32_t i = 0; i < object.via.array.size; ++i) {
        T value{};
        if (!read_one(object.via.array.ptr[i], value)) {
            why = "[" + std::to_string(i) + "] is " + type_name(object.via.array.ptr[i]) +
                  ", expected " + what;
            return false;
        }
        out.push_back(value);
    }
    return true;
}

bool read_hash_list(const msgpack::object& object, std::vector<BlockHash>& out, std::string& why) {
    return read_list(object, out, why, read_hash, "hashes", "a hash (an integer or 1 to 32 bytes)");
}

bool read_int_list(const msgpack::object& object, std::vector<std::int64_t>& out,
                   std::string& why) {
    return read_list(object, out, why, read_int, "integers", "an integer");
}

bool read_optional_int(const msgpack::object& object, std::optional<std::int64_t>& out,
                       std::string& why) {
    if (object.type == Type::NIL) {
        out.reset();
        return true;
    }
    std::int64_t value = 0;
    if (!read_int(object, value)) {
        why = std::string("is ") + type_name(object) + ", expected an integer or nil";
        return false;
    }
    out = value;
    return true;
}

bool read_medium(const msgpack::object& object, std::string& out, std::string& why) {
    if (object.type == Type::NIL) {
        out = kDefaultMedium;
        return true;
    }
    if (object.type != Type::STR) {
        why = std::string("is ") + type_name(object) + ", expected a string or nil";
        return false;
    }
    out = std::string(as_view(object.via.str));
    // A medium is a name, kept as text in recordings: bytes that are not
    // UTF-8 become U+FFFD here, as the rows' JSON writes them, so what is
    // shown live and what a recording replays name the same tier.
    if (std::any_of(out.begin(), out.end(), [](char c) { return (c & 0x80) != 0; })) {
        using nlohmann::json;
        out = json::parse(json_text(json(out))).get<std::string>();
    }
    return true;
}

// What setting one named field did.
enum class FieldOutcome : std::uint8_t { kept, known_not_kept, unknown, bad };

// Fields vLLM and SGLang send that the views have no use for (yet); skipped
// whatever their type, since SGLang's metadata sits where vLLM's lora_name does.
// locality, ownership, session_id and lookahead_token_ids: vLLM 0.33's map
// events; cache_salt and session_id: SGLang 0.5.23's (tst_attach_publishers
// drives both publishers and counts anything else as unknown).
bool known_not_kept(std::string_view name) {
    static constexpr std::array<std::string_view, 10> kNames = {"lora_name",
                                                                "extra_keys",
                                                                "kv_cache_spec_kind",
                                                                "kv_cache_spec_sliding_window",
                                                                "metadata",
                                                                "locality",
                                                                "ownership",
                                                                "session_id",
                                                                "lookahead_token_ids",
                                                                "cache_salt"};
    return std::find(kNames.begin(), kNames.end(), name) != kNames.end();
}

// BlockStored's positional order (see kv_event_decoder.h for where each
// field came from); index 0 is the tag.
constexpr std::array<std::string_view, 11> kStoredOrder = {"block_hashes",
                                                           "parent_block_hash",
                                                           "token_ids",
                                                           "block_size",
                                                           "lora_id",
                                                           "medium",
                                                           "lora_name",
                                                           "extra_keys",
                                                           "group_idx",
                                                           "kv_cache_spec_kind",
                                                           "kv_cache_spec_sliding_window"};
constexpr std::array<std::string_view, 3> kRemovedOrder = {"block_hashes", "medium", "group_idx"};

// Bits of the fields an event cannot do without.
enum Required : unsigned { kHashes = 1, kTokens = 2, kBlockSize = 4 };

FieldOutcome set_stored(StoredBlocks& event, std::string_view name, const msgpack::object& value,
                        unsigned& seen, std::string& why) {
    bool ok = true;
    if (name == "block_hashes") {
        ok = read_hash_list(value, event.hashes, why);
        seen |= kHashes;
    } else if (name == "parent_block_hash") {
        if (value.type == Type::NIL) {
            event.parent.reset();
        } else {
            BlockHash parent;
            ok = read_hash(value, parent);
            if (ok) {
                event.parent = parent;
            } else {
                why = std::string("is ") + type_name(value) + ", expected a hash or nil";
            }
        }
    } else if (name == "token_ids") {
        ok = read_int_list(value, event.token_ids, why);
        seen |= kTokens;
    } else if (name == "block_size") {
        ok = read_int(value, event.block_size) && event.block_size > 0;
        if (!ok) {
            why = std::string("is ") + type_name(value) + ", expected a positive integer";
        }
        seen |= kBlockSize;
    } else if (name == "lora_id") {
        ok = read_optional_int(value, event.lora_id, why);
    } else if (name == "medium") {
        ok = read_medium(value, event.medium, why);
    } else if (name == "group_idx") {
        ok = read_optional_int(value, event.group_idx, why);
    } else {
        return known_not_kept(name) ? FieldOutcome::known_not_kept : FieldOutcome::unknown;
    }
    return ok ? FieldOutcome::kept : FieldOutcome::bad;
}

FieldOutcome set_removed(RemovedBlocks& event, std::string_view name, const msgpack::object& value,
                         unsigned& seen, std::string& why) {
    bool ok = true;
    if (name == "block_hashes") {
        ok = read_hash_list(value, event.hashes, why);
        seen |= kHashes;
    } else if (name == "medium") {
        ok = read_medium(value, event.medium, why);
    } else if (name == "group_idx") {
        ok = read_optional_int(value, event.group_idx, why);
    } else {
        return known_not_kept(name) ? FieldOutcome::known_not_kept : FieldOutcome::unknown;
    }
    return ok ? FieldOutcome::kept : FieldOutcome::bad;
}

FieldOutcome set_cleared(AllCleared&, std::string_view name, const msgpack::object&, unsigned&,
                         std::string&) {
    return known_not_kept(name) ? FieldOutcome::known_not_kept : FieldOutcome::unknown;
}

// The fields of one event, from either layout: `fields` yields (name, value)
// pairs; a name of "" is a positional value past the known ones.
template <class Event, class Setter, class Fields>
EventOutcome fill(std::string_view type, Setter set, unsigned required, Fields&& for_each_field,
                  std::optional<KvEvent>& out, DecodeCounts& counts, std::string& why) {
    Event event;
    unsigned seen = 0;
    bool bad = false;
    for_each_field([&](std::string_view name, const msgpack::object& value) {
        if (bad) {
            return;
        }
        std::string field_why;
        switch (set(event, name, value, seen, field_why)) {
        case FieldOutcome::kept:
        case FieldOutcome::known_not_kept:
            break;
        case FieldOutcome::unknown:
            ++counts.unknown_fields;
            break;
        case FieldOutcome::bad:
            bad = true;
            why = std::string(type) + ": " + std::string(name) + " " + field_why;
            break;
        }
    });
    if (bad) {
        return EventOutcome::malformed;
    }
    if ((seen & required) != required) {
        why = std::string(type) + ": missing " +
              ((required & kHashes) && !(seen & kHashes)   ? "block_hashes"
               : (required & kTokens) && !(seen & kTokens) ? "token_ids"
                                                           : "block_size");
        return EventOutcome::malformed;
    }
    out = std::move(event);
    return EventOutcome::kept;
}

template <class Event, class Setter>
EventOutcome fill_positional(std::string_view type, Setter set, unsigned required,
                             std::span<const std::string_view> order,
                             const msgpack::object_array& array, std::optional<KvEvent>& out,
                             DecodeCounts& counts, std::string& why) {
    return fill<Event>(
        type, set, required,
        [&](auto&& visit) {
            for (std::uint32_t i = 1; i < array.size; ++i) {
                const std::size_t index = i - 1;
                visit(index < order.size() ? order[index] : std::string_view("(extra)"),
                      array.ptr[i]);
            }
        },
        out, counts, why);
}

template <class Event, class Setter>
EventOutcome fill_named(std::string_view type, Setter set, unsigned required,
                        const msgpack::object_map& map, std::optional<KvEvent>& out,
                        DecodeCounts& counts, std::string& why) {
    bool bad_key = false;
    const EventOutcome outcome = fill<Event>(
        type, set, required,
        [&](auto&& visit) {
            for (std::uint32_t i = 0; i < map.size; ++i) {
                const msgpack::object& key = map.ptr[i].key;
                if (key.type != Type::STR) {
                    bad_key = true;
                    return;
                }
                const std::string_view name = as_view(key.via.str);
                if (name != "type") {
                    visit(name, map.ptr[i].val);
                }
            }
        },
        out, counts, why);
    if (bad_key) {
        why = std::string(type) + ": a field name is not a string";
        out.reset();
        return EventOutcome::malformed;
    }
    return outcome;
}

} // namespace

const char* type_name(const msgpack::object& object) {
    switch (object.type) {
    case Type::NIL:
        return "nil";
    case Type::BOOLEAN:
        return "a boolean";
    case Type::POSITIVE_INTEGER:
    case Type::NEGATIVE_INTEGER:
        return "an integer";
    case Type::FLOAT32:
    case Type::FLOAT64:
        return "a float";
    case Type::STR:
        return "a string";
    case Type::BIN:
        return object.via.bin.size > BlockHash::kMaxBytes ? "bytes longer than 32" : "bytes";
    case Type::ARRAY:
        return "an array";
    case Type::MAP:
        return "a map";
    case Type::EXT:
        return "an extension value";
    }
    return "an unknown msgpack type";
}

bool read_int(const msgpack::object& object, std::int64_t& out) {
    if (object.type == Type::NEGATIVE_INTEGER) {
        out = object.via.i64;
        return true;
    }
    if (object.type == Type::POSITIVE_INTEGER &&
        object.via.u64 <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        out = static_cast<std::int64_t>(object.via.u64);
        return true;
    }
    return false;
}

EventOutcome decode_event(const msgpack::object& object, std::optional<KvEvent>& out,
                          DecodeCounts& counts, std::string& why) {
    out.reset();
    // The tag: element 0 of a positional event, "type" of a map.
    const msgpack::object* tag = nullptr;
    if (object.type == Type::ARRAY && object.via.array.size > 0) {
        tag = &object.via.array.ptr[0];
    } else if (object.type == Type::MAP) {
        for (std::uint32_t i = 0; i < object.via.map.size; ++i) {
            const msgpack::object& key = object.via.map.ptr[i].key;
            if (key.type == Type::STR && as_view(key.via.str) == "type") {
                tag = &object.via.map.ptr[i].val;
                break;
            }
        }
    } else {
        why = std::string("an event is ") + type_name(object) + ", expected a tagged array or map";
        return EventOutcome::malformed;
    }
    if (tag == nullptr || tag->type != Type::STR) {
        why = tag == nullptr ? std::string("an event has no type tag")
                             : std::string("an event's type tag is ") + type_name(*tag);
        return EventOutcome::malformed;
    }
    const std::string_view type = as_view(tag->via.str);
    const bool positional = object.type == Type::ARRAY;
    if (type == "BlockStored") {
        const unsigned required = kHashes | kTokens | kBlockSize;
        return positional ? fill_positional<StoredBlocks>(type, set_stored, required, kStoredOrder,
                                                          object.via.array, out, counts, why)
                          : fill_named<StoredBlocks>(type, set_stored, required, object.via.map,
                                                     out, counts, why);
    }
    if (type == "BlockRemoved") {
        return positional
                   ? fill_positional<RemovedBlocks>(type, set_removed, kHashes, kRemovedOrder,
                                                    object.via.array, out, counts, why)
                   : fill_named<RemovedBlocks>(type, set_removed, kHashes, object.via.map, out,
                                               counts, why);
    }
    if (type == "AllBlocksCleared") {
        return positional
                   ? fill_positional<AllCleared>(type, set_cleared, 0, {}, object.via.array, out,
                                                 counts, why)
                   : fill_named<AllCleared>(type, set_cleared, 0, object.via.map, out, counts, why);
    }
    return EventOutcome::unknown_type;
}

} // namespace kvscope::attach::detail
