#include "profiler/attach/kv_event_decoder.h"

#include "profiler/attach/kv_event_fields.h"

#include <cstdint>
#include <exception>
#include <msgpack.hpp>
#include <string>

namespace kvscope::attach {
namespace {

using Type = msgpack::type::object_type;
constexpr std::uint64_t kReplayEnd = ~std::uint64_t{0};

std::string_view as_view(const msgpack::object_str& str) {
    return {str.ptr, str.size};
}

DecodeResult rejected(DecodeResult result, std::string why) {
    result.batch.reset();
    result.error = std::move(why);
    ++result.counts.rejected_messages;
    return result;
}

bool read_ts(const msgpack::object& object, double& out) {
    switch (object.type) {
    case Type::FLOAT32:
    case Type::FLOAT64:
        out = object.via.f64;
        return true;
    case Type::POSITIVE_INTEGER:
        out = static_cast<double>(object.via.u64);
        return true;
    case Type::NEGATIVE_INTEGER:
        out = static_cast<double>(object.via.i64);
        return true;
    default:
        return false;
    }
}

// The batch's three parts, from either layout (nullptr: absent).
struct BatchParts {
    const msgpack::object* ts = nullptr;
    const msgpack::object* events = nullptr;
    const msgpack::object* rank = nullptr;
};

bool batch_parts(const msgpack::object& root, BatchParts& parts, DecodeCounts& counts,
                 std::string& why) {
    if (root.type == Type::ARRAY) {
        const msgpack::object_array& array = root.via.array;
        if (array.size < 2) {
            why = "the batch has " + std::to_string(array.size) +
                  " elements, expected [ts, events, data_parallel_rank]";
            return false;
        }
        parts.ts = &array.ptr[0];
        parts.events = &array.ptr[1];
        parts.rank = array.size > 2 ? &array.ptr[2] : nullptr;
        counts.unknown_fields += array.size > 3 ? array.size - 3 : 0;
        return true;
    }
    if (root.type == Type::MAP) {
        for (std::uint32_t i = 0; i < root.via.map.size; ++i) {
            const msgpack::object_kv& kv = root.via.map.ptr[i];
            if (kv.key.type != Type::STR) {
                why = "a batch field name is " + std::string(detail::type_name(kv.key));
                return false;
            }
            const std::string_view name = as_view(kv.key.via.str);
            if (name == "ts") {
                parts.ts = &kv.val;
            } else if (name == "events") {
                parts.events = &kv.val;
            } else if (name == "data_parallel_rank" || name == "attn_dp_rank") {
                parts.rank = &kv.val;
            } else {
                ++counts.unknown_fields;
            }
        }
        if (parts.ts == nullptr || parts.events == nullptr) {
            why = std::string("the batch has no ") + (parts.ts == nullptr ? "ts" : "events");
            return false;
        }
        return true;
    }
    why = "the payload is " + std::string(detail::type_name(root)) +
          ", expected a batch [ts, events, data_parallel_rank]";
    return false;
}

// Decodes the msgpack object into result.batch; false when the batch itself
// is wrong (its events being wrong is counted, not fatal).
bool decode_batch(const msgpack::object& root, DecodeResult& result) {
    BatchParts parts;
    std::string why;
    if (!batch_parts(root, parts, result.counts, why)) {
        result.error = why;
        return false;
    }
    KvEventBatch batch;
    if (!read_ts(*parts.ts, batch.ts)) {
        result.error = "the batch's ts is " + std::string(detail::type_name(*parts.ts)) +
                       ", expected a number";
        return false;
    }
    if (parts.rank != nullptr && parts.rank->type != Type::NIL) {
        std::int64_t rank = 0;
        if (!detail::read_int(*parts.rank, rank)) {
            result.error = "the batch's data_parallel_rank is " +
                           std::string(detail::type_name(*parts.rank)) +
                           ", expected an integer or nil";
            return false;
        }
        batch.rank = rank;
    }
    if (parts.events->type != Type::ARRAY) {
        result.error = "the batch's events are " + std::string(detail::type_name(*parts.events)) +
                       ", expected an array";
        return false;
    }
    const msgpack::object_array& events = parts.events->via.array;
    batch.events.reserve(events.size);
    for (std::uint32_t i = 0; i < events.size; ++i) {
        std::optional<KvEvent> event;
        std::string event_why;
        switch (detail::decode_event(events.ptr[i], event, result.counts, event_why)) {
        case detail::EventOutcome::kept:
            batch.events.push_back(std::move(*event));
            ++result.counts.events;
            break;
        case detail::EventOutcome::unknown_type:
            ++result.counts.unknown_event_types;
            break;
        case detail::EventOutcome::malformed:
            ++result.counts.malformed_events;
            if (result.error.empty()) {
                result.error = "event " + std::to_string(i) + " dropped: " + event_why;
            }
            break;
        }
    }
    result.batch = std::move(batch);
    return true;
}

} // namespace

DecodeCounts& DecodeCounts::operator+=(const DecodeCounts& other) {
    messages += other.messages;
    events += other.events;
    unknown_event_types += other.unknown_event_types;
    unknown_fields += other.unknown_fields;
    malformed_events += other.malformed_events;
    rejected_messages += other.rejected_messages;
    return *this;
}

DecodeResult decode_kv_event_payload(std::string_view payload) {
    DecodeResult result;
    result.counts.messages = 1;
    if (payload.empty()) {
        return rejected(std::move(result), "the payload is empty");
    }
    // No count read from the payload may exceed the bytes left to back it
    // (every element takes at least one byte), so garbage claiming a
    // four-billion-element array fails at once instead of allocating for it.
    const std::size_t size = payload.size();
    const msgpack::unpack_limit limit(size, size / 2 + 1, size, size, size, 64);
    try {
        std::size_t offset = 0;
        const msgpack::object_handle handle =
            msgpack::unpack(payload.data(), size, offset, nullptr, nullptr, limit);
        if (offset != size) {
            return rejected(std::move(result), "the payload has " + std::to_string(size - offset) +
                                                   " bytes after its batch");
        }
        if (!decode_batch(handle.get(), result)) {
            std::string why = std::move(result.error);
            return rejected(std::move(result), std::move(why));
        }
    } catch (const msgpack::insufficient_bytes&) {
        return rejected(std::move(result), "the payload is not valid msgpack: it ends early");
    } catch (const std::exception& e) {
        return rejected(std::move(result),
                        std::string("the payload is not valid msgpack: ") + e.what());
    }
    return result;
}

DecodeResult decode_kv_event_message(std::span<const std::string_view> frames) {
    if (frames.size() != 2 && frames.size() != 3) {
        DecodeResult result;
        result.counts.messages = 1;
        return rejected(std::move(result),
                        "the message has " + std::to_string(frames.size()) +
                            " frames, expected [topic, sequence, payload] or [sequence, payload]");
    }
    const bool has_topic = frames.size() == 3;
    const std::string_view sequence_frame = frames[has_topic ? 1 : 0];
    const std::string_view payload = frames[has_topic ? 2 : 1];
    if (sequence_frame.size() != 8) {
        DecodeResult result;
        result.counts.messages = 1;
        return rejected(std::move(result), "the sequence frame has " +
                                               std::to_string(sequence_frame.size()) +
                                               " bytes, expected 8 (big-endian)");
    }
    std::uint64_t sequence = 0;
    for (const char byte : sequence_frame) {
        sequence = (sequence << 8) | static_cast<std::uint8_t>(byte);
    }
    if (sequence == kReplayEnd && payload.empty()) {
        DecodeResult result;
        result.counts.messages = 1;
        result.replay_end = true;
        return result;
    }
    DecodeResult result = decode_kv_event_payload(payload);
    if (result.batch) {
        result.batch->sequence = sequence;
        if (has_topic) {
            result.batch->topic = std::string(frames[0]);
        }
    }
    return result;
}

} // namespace kvscope::attach
