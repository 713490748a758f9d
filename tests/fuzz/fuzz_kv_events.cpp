// vLLM's and SGLang's KV-event messages (msgpack over ZeroMQ), decoded and
// applied the two ways `kvscope attach` does: live, batch by batch, and as
// the typed rows a recording keeps, read back. The decoder's contract: never
// throws, whatever the bytes; and both paths must end in the same blocks.
//
// The first byte picks how the rest is read (0xC1, which msgpack never
// uses, separates parts): 0 one payload; 1 payloads, one batch each, in
// order; 2 the frames of one message ([topic,] sequence, payload).
#include "engine/events/engine_event.h"
#include "profiler/attach/attached_events.h"
#include "profiler/attach/event_source.h"
#include "profiler/attach/kv_event_decoder.h"

#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <vector>

using namespace kvscope;

namespace {

std::vector<std::string_view> split_parts(std::string_view text) {
    std::vector<std::string_view> parts;
    std::size_t begin = 0;
    for (std::size_t i = 0; i <= text.size(); ++i) {
        if (i == text.size() || static_cast<unsigned char>(text[i]) == 0xC1) {
            parts.push_back(text.substr(begin, i - begin));
            begin = i + 1;
        }
    }
    return parts;
}

void check(bool ok, const char* what) {
    if (!ok) {
        std::fprintf(stderr, "fuzz_kv_events: %s\n", what);
        std::abort();
    }
}

void same_blocks(const attach::ResidentBlocks& live, const attach::ResidentBlocks& replayed) {
    check(live.counts() == replayed.counts(), "live and replayed counts differ");
    check(live.tiers().size() == replayed.tiers().size(), "live and replayed tiers differ");
    for (const auto& [key, tier] : live.tiers()) {
        const attach::ResidentBlocks::Tier* other = replayed.tier(key);
        check(other != nullptr, "a live tier is missing from the replay");
        check(other->blocks.size() == tier.blocks.size(), "live and replayed blocks differ");
        for (const auto& [hash, block] : tier.blocks) {
            const attach::ResidentBlock* twin = replayed.find(key, hash);
            check(twin != nullptr && twin->token_ids == block.token_ids &&
                      twin->parent == block.parent,
                  "a block differs between live and replayed");
        }
        (void)live.trees(key);
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size == 0) {
        return 0;
    }
    const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
    std::vector<attach::DecodeResult> results;
    switch (data[0] % 3) {
    case 0:
        results.push_back(attach::decode_kv_event_payload(rest));
        break;
    case 1:
        for (const std::string_view payload : split_parts(rest)) {
            results.push_back(attach::decode_kv_event_payload(payload));
        }
        break;
    default: {
        const std::vector<std::string_view> frames = split_parts(rest);
        results.push_back(attach::decode_kv_event_message(frames));
    }
    }

    attach::AttachedState live;
    attach::AttachedState replayed;
    std::int64_t time_ns = 0;
    for (const attach::DecodeResult& result : results) {
        if (!result.batch) {
            continue;
        }
        attach::SourceBatch batch{*result.batch};
        live.apply(0, batch, ++time_ns);
        std::vector<events::EngineEvent> rows;
        attach::append_typed_events(0, batch, rows);
        for (events::EngineEvent& row : rows) {
            row.time_ns = time_ns;
            replayed.apply(row);
        }
    }
    const attach::AttachedState::Source* a = live.source(0);
    const attach::AttachedState::Source* b = replayed.source(0);
    check((a == nullptr) == (b == nullptr) || (a ? a->blocks.size() : b->blocks.size()) == 0,
          "one path made a source the other did not");
    if (a != nullptr && b != nullptr) {
        same_blocks(a->blocks, b->blocks);
    }
    return 0;
}
