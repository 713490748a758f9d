// RoPE and the KV write in one pass for 16-bit caches (f16 or bf16 K and V),
// reading the fused QKV layer's output: Q rotated into the attention's input,
// K rotated and stored with V straight into their slots of the paged pool, a
// thread per value pair (two pairs for the halves pairing) with 4-byte stores. The angles come
// from a table of the CPU's (math::rope_cos_sin) computed once on the host, so
// the rotation and the stored bytes are the CPU backend's exactly. Other
// formats take launch_rope, then launch_kv_append.
#pragma once

#include "kernels/math/rope_math.h"
#include "kernels/paged_kv_view.cuh"

#include <cstdint>
#include <cuda_runtime_api.h>
#include <vector>

namespace kvscope::kernels {

// cos and sin of every (position, pair) below `positions`; past it the
// kernel computes the angle itself.
struct RopeTableView {
    const math::RopeCosSin* angles = nullptr; // (positions, head_dim / 2)
    int positions = 0;
    int head_dim = 0;
    float theta_base = 10000.0f;
    const float* divisors = nullptr; // (head_dim / 2) on the device (Llama 3's), or null
};

// The table's contents, built on the host: `positions` rows of head_dim / 2;
// divisors (host memory, head_dim / 2) as math::rope_cos_sin takes them, or
// null.
std::vector<math::RopeCosSin> rope_table(int positions, int head_dim, float theta_base,
                                         const float* divisors);

// Whether launch_rope_kv_write can write this cache (both planes 16-bit; a
// head_dim it can pair): halves is math::rope_pair_dims' choice.
bool rope_kv_write_fits(const PagedKvView& cache, bool halves = false);

// Qwen 3's and Gemma 3's RMSNorms over each Q and K head before RoPE: the
// weights (head_dim each, on the device), or none.
struct QkNorms {
    const float* q_weight = nullptr;
    const float* k_weight = nullptr;
    float eps = 0.0f;
};
// The most Q and K heads a token may have for the kernel to norm them.
inline constexpr int kMaxNormedHeads = 256;

// qkv: (tokens, (heads + 2 kv_heads) * head_dim), each token's Q heads, then
// K heads, then V heads, as the fused QKV linear layer writes them; q:
// (tokens, heads, head_dim), the rotated Q (the attention's input);
// positions, slot_mapping: (tokens). With `norms`, each Q and K head is
// normed first, in the kernel, as launch_rms_norm_heads would norm it in
// place (the same bits, one kernel instead of three; qkv is left as it
// was); heads + kv_heads at most kMaxNormedHeads then.
void launch_rope_kv_write(const PagedKvView& cache, const float* qkv, float* q,
                          const std::int32_t* positions, const std::int32_t* slot_mapping,
                          const RopeTableView& table, int tokens, int heads, bool halves,
                          cudaStream_t stream, const QkNorms& norms = {});

} // namespace kvscope::kernels
