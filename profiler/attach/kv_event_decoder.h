// Decodes the KV-event messages vLLM and SGLang publish over ZeroMQ, leniently
// (fields and event types added by later versions are skipped and counted)
// and exactly (a value of the wrong type is an error, never a guess). Never
// throws and never trusts a length it reads: whatever arrives, the caller
// gets a result with a message.
//
// Frames (vllm/distributed/kv_events.py, ZmqEventPublisher, every version):
//   [topic, sequence, payload]   vLLM's PUB socket (topic may be empty)
//   [sequence, payload]          no topic frame: SGLang publishers that send
//                                none, and replies on the replay socket
// sequence: 8 bytes, big-endian, counting from 0 per publisher; the replay
// socket ends its replies with sequence 0xFFFF...FF (-1) and an empty payload.
//
// Payload: one msgpack EventBatch, positional [ts, events, data_parallel_rank]
// (msgspec array_like, omit_defaults: the rank is left off when None, and
// publishers from before data parallelism send [ts, events]; SGLang calls it
// attn_dp_rank). Accepted as a map {"ts", "events", "data_parallel_rank"}
// too: vLLM's main branch (read for this decoder) declares EventBatch without
// array_like, while releases so far keep the outer batch positional.
//
// Events (a msgspec tagged union, tag "type" = the class name):
//   positional, vLLM up to 0.23 and SGLang up to 0.5.19 (array_like=True,
//   omit_defaults: trailing fields at their default are left off; SGLang
//   0.5.19 sends them all, nil included):
//     ["BlockStored", block_hashes, parent_block_hash, token_ids, block_size,
//      lora_id, medium, lora_name, extra_keys, group_idx, kv_cache_spec_kind,
//      kv_cache_spec_sliding_window]
//       grown field by field (vLLM pull requests): up to lora_id #16750 (the
//       first publisher), medium #19737, lora_name #27577, extra_keys
//       #33304, group_idx #37688, kv_cache_spec_* #40984. SGLang
//       stops at medium, then puts its own metadata map ({"cache_salt": ...})
//       where vLLM has lora_name.
//     ["BlockRemoved", block_hashes, medium, group_idx]
//     ["AllBlocksCleared"]
//   tagged maps, vLLM 0.24 and later (#42892 dropped array_like from the
//   events; omit_defaults leaves out fields at their default), and SGLang
//   from 0.5.20 on (sgl-project/sglang#37482):
//     {"type": "BlockStored", "block_hashes": [...], "parent_block_hash": ...,
//      "token_ids": [...], "block_size": 16, "lora_id": nil, "medium": "GPU", ...}
// Hashes: msgpack uint64 (above 2^63 as often as not), int64, or bin (raw
// hash bytes, up to 32). medium nil or absent: "GPU".
//
// Kept: the fields of StoredBlocks/RemovedBlocks. Known but not kept:
// lora_name, extra_keys, kv_cache_spec_kind, kv_cache_spec_sliding_window,
// vLLM 0.33's locality, ownership, session_id and lookahead_token_ids, and
// SGLang's metadata, cache_salt and session_id (all skipped whatever their
// type). Anything else: counted in
// unknown_fields. An event of the wrong shape is dropped (malformed_events)
// while the rest of its batch is kept; a message whose frames, msgpack or
// batch are wrong is rejected whole (rejected_messages).
#pragma once

#include "profiler/attach/kv_events.h"

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace kvscope::attach {

struct DecodeResult {
    // Set when the message decoded as a batch, even if some of its events
    // were dropped (then `error` says why the first one was).
    std::optional<KvEventBatch> batch;
    // The replay socket's end marker (sequence -1, empty payload): no batch
    // and no error.
    bool replay_end = false;
    DecodeCounts counts; // this message's share
    std::string error;   // the first problem met; empty when none
};

// One ZeroMQ message, its frames in order (two or three, see above).
DecodeResult decode_kv_event_message(std::span<const std::string_view> frames);

// Just the msgpack payload; sequence and topic are left empty for the caller.
DecodeResult decode_kv_event_payload(std::string_view payload);

} // namespace kvscope::attach
