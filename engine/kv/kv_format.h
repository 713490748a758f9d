// The formats K and V can be stored in (the enum itself is in
// kernels/math/kv_format_kind.h, below the kernels that switch on it): their
// names, and what each costs in bytes. Pure description: the codecs that read
// and write them live with each backend.
#pragma once

#include "kernels/math/kv_format_kind.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvscope::kv {

// The names the command line takes (llama.cpp's where it has one).
std::string_view kv_format_name(KvFormat format);
std::optional<KvFormat> parse_kv_format(std::string_view name);
const std::vector<KvFormat>& all_kv_formats();
std::string kv_format_names(); // "f32, f16, ..." for help and errors

// KIVI formats quantise a block only once it is full: the open block of a
// sequence stays in full precision (the residual), then the whole block is
// encoded at once, because its keys are grouped per channel across tokens.
bool quantises_whole_blocks(KvFormat format);
int kivi_bits(KvFormat format); // 4 or 2; 0 for other formats

// Why heads of `head_dim` values cannot be stored in `format`; empty if they can.
std::string kv_format_problem(KvFormat format, int head_dim);

// Bytes one token's head vector takes in a per-token format (every format but
// KIVI's keys also has a fixed per-token row); KIVI keys: 0.
std::int64_t kv_row_bytes(KvFormat format, int head_dim, bool is_key);

// Bytes one head's slice of one block takes: block_size tokens of head_dim
// values, with every scale the format needs.
std::int64_t kv_head_block_bytes(KvFormat format, int block_size, int head_dim, bool is_key);

// The storage formats of one cache: K and V are chosen separately.
struct KvCacheFormat {
    KvFormat key = KvFormat::f16;
    KvFormat value = KvFormat::f16;

    std::string describe() const; // "f16" or "K q8_0, V q4_0"
};

// Bytes the cache holds per token over all layers and KV heads, K and V
// together: exact, a fraction where a format's scales are per block.
double kv_bytes_per_token(const KvCacheFormat& format, int layers, int kv_heads, int head_dim,
                          int block_size);

} // namespace kvscope::kv
