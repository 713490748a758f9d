#include "engine/cpu/matmul.h"

#include "engine/cpu/kernel_set.h"
#include "engine/cpu/matmul_kernels.h"
#include "engine/cpu/packed_rows.h"
#include "engine/gguf/dequantize.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string_view>
#include <vector>

namespace kvscope::cpu {
namespace detail {
namespace {

void scalar_dequantize_row(const WeightMatrix& w, std::int64_t row, float* out) {
    if (w.packed) {
        unpack_row(w, row, out);
        return;
    }
    gguf::dequantize_values(w.type, w.data + static_cast<std::size_t>(row) * w.row_bytes, out,
                            w.cols);
}

void scalar_dot_tokens(const float* row, const float* x, std::int64_t stride, std::int64_t cols,
                       int n, float* out) {
    for (int k = 0; k < n; ++k) {
        const float* xk = x + k * stride;
        float sum = 0.0f;
        for (std::int64_t i = 0; i < cols; ++i) {
            sum += row[i] * xk[i];
        }
        out[k] = sum;
    }
}

} // namespace

bool scalar_has_fused(const WeightMatrix&) {
    return false;
}

const MatmulKernels& scalar_kernels() {
    static const MatmulKernels kernels{scalar_dequantize_row,
                                       scalar_dot_tokens,
                                       nullptr,
                                       nullptr,
                                       nullptr,
                                       nullptr,
                                       scalar_has_fused,
                                       nullptr};
    return kernels;
}

} // namespace detail

namespace {

// The matmul kernels of the set in use (kernel_set.h).
const detail::MatmulKernels& kernels() {
    static const detail::MatmulKernels& chosen = []() -> const detail::MatmulKernels& {
        switch (kernel_set()) {
#if defined(__x86_64__) // the vector sets are built only there
        case KernelSet::avx512:
            return *detail::avx512_kernels();
        case KernelSet::avx2:
            return *detail::avx2_kernels();
#endif
        default:
            return detail::scalar_kernels();
        }
    }();
    return chosen;
}

// Tokens per tile: a tile of activations (64 x 576 floats = 147 KiB for
// SmolLM2) stays in L2 while every weight row is streamed past it once.
constexpr std::int64_t kTokenTile = 64;
// Sixteen- and eight-token groups are numbered from the first token: a
// tile must start at a multiple of both.
static_assert(kTokenTile % 16 == 0);

} // namespace

WeightMatrix prepare_for_matmul(const WeightMatrix& w, std::vector<std::byte>& storage) {
    const gguf::TensorTypeTraits* traits =
        gguf::tensor_type_traits(static_cast<std::uint32_t>(w.type));
    if (&kernels() == &detail::scalar_kernels() || !packed_layout(w.type) || w.packed ||
        traits == nullptr || w.cols % traits->block_elements != 0) {
        return w;
    }
    return pack_rows(w, storage);
}

void dequantize_row(const WeightMatrix& w, std::int64_t row, float* out) {
    kernels().dequantize_row(w, row, out);
}

namespace {

// Rows [row_begin, row_end) of `w` times the tile's tokens, into y_tile
// (tile_tokens, w.rows). Fused integer kernels where they take `w` (one,
// sixteen, eight, or up to four tokens at a time), else each row expanded
// to fp32.
void multiply_rows(const detail::MatmulKernels& k, const WeightMatrix& w, std::int64_t row_begin,
                   std::int64_t row_end, const detail::QuantizedActivations& quantized,
                   const detail::PairedActivations& paired, const float* scales8,
                   const float* sums8, const float* x_tile, std::int64_t tile,
                   std::int64_t tile_tokens, float* y_tile, std::vector<float>& row) {
    const std::int64_t cols = w.cols;
    const bool fused = k.has_fused(w);
    if (fused && tile_tokens == 1 && k.fused_rows_1 != nullptr) {
        // Decode: the whole range in one kernel call.
        k.fused_rows_1(w, row_begin, row_end, quantized, tile, y_tile);
        return;
    }
    // The tile's whole groups of sixteen tokens first, two rows at a time
    // (each pair of token values loaded once for both); tiles start at
    // multiples of 16 tokens.
    std::int64_t sixteens = 0;
    if (fused && paired.pairs != nullptr) {
        sixteens = tile_tokens / 16 * 16;
        for (std::int64_t r = row_begin; r < row_end; r += 2) {
            const int rows = static_cast<int>(std::min<std::int64_t>(2, row_end - r));
            for (std::int64_t t = 0; t < sixteens; t += 16) {
                float out[2][16];
                k.fused_rows_16_tokens(w, r, rows, paired, (tile + t) / 16, out[0]);
                for (int i = 0; i < rows; ++i) {
                    for (int j = 0; j < 16; ++j) {
                        y_tile[(t + j) * w.rows + r + i] = out[i][j];
                    }
                }
            }
        }
        if (sixteens == tile_tokens) {
            return;
        }
    }
    float results[4];
    for (std::int64_t r = row_begin; r < row_end; ++r) {
        if (!fused) {
            row.resize(static_cast<std::size_t>(cols));
            k.dequantize_row(w, r, row.data());
        }
        std::int64_t t = sixteens;
        if (fused && k.fused_row_8_tokens != nullptr) {
            // Tiles start at multiples of 8 tokens, so groups align.
            for (; t + 8 <= tile_tokens; t += 8) {
                const std::size_t at = static_cast<std::size_t>((tile + t) / 8 * (cols / 32) * 8);
                float eight[8];
                k.fused_row_8_tokens(w, r, quantized, tile + t, scales8 + at, sums8 + at, eight);
                for (int j = 0; j < 8; ++j) {
                    y_tile[(t + j) * w.rows + r] = eight[j];
                }
            }
        }
        for (; t < tile_tokens; t += 4) {
            const int n = static_cast<int>(std::min<std::int64_t>(4, tile_tokens - t));
            if (fused) {
                k.fused_row_tokens(w, r, quantized, tile + t, n, results);
            } else {
                k.dot_tokens(row.data(), x_tile + t * cols, cols, cols, n, results);
            }
            for (int j = 0; j < n; ++j) {
                y_tile[(t + j) * w.rows + r] = results[j];
            }
        }
    }
}

// `count` values of a vector's storage from its first 64-byte boundary on:
// the AVX-512 kernels load a block's 64 bytes at once, and a load across two
// cache lines costs two (a large vector's storage starts 16 bytes past one).
template <typename T>
T* aligned_storage(std::vector<T>& storage, std::size_t count) {
    storage.resize(count + 64 / sizeof(T));
    void* start = storage.data();
    std::size_t space = storage.size() * sizeof(T);
    return static_cast<T*>(std::align(64, count * sizeof(T), start, space));
}

// The first `groups` x 16 tokens of `quantized` transposed for the
// sixteen-token kernel (matmul_kernels.h: PairedActivations). Within a
// block, `quantized` holds the even-indexed values, then the odd ones, so
// values 2p and 2p + 1 are at p and 16 + p.
detail::PairedActivations pair_activations(const detail::QuantizedActivations& quantized,
                                           std::int64_t groups, std::int64_t blocks,
                                           std::vector<std::int32_t>& values,
                                           std::vector<float>& scales, std::vector<float>& sums) {
    std::int32_t* pairs = aligned_storage(values, static_cast<std::size_t>(groups * blocks * 256));
    scales.resize(static_cast<std::size_t>(groups * blocks * 16));
    sums.resize(scales.size());
    for (std::int64_t g = 0; g < groups; ++g) {
        for (std::int64_t b = 0; b < blocks; ++b) {
            const std::int64_t at = g * blocks + b;
            for (std::int64_t t = 0; t < 16; ++t) {
                const std::int64_t token_block = (g * 16 + t) * blocks + b;
                const std::int16_t* block = quantized.values + token_block * 32;
                for (std::int64_t p = 0; p < 16; ++p) {
                    const auto low = static_cast<std::uint16_t>(block[p]);
                    const auto high = static_cast<std::uint16_t>(block[16 + p]);
                    pairs[(at * 16 + p) * 16 + t] = static_cast<std::int32_t>(
                        static_cast<std::uint32_t>(low) | (static_cast<std::uint32_t>(high) << 16));
                }
                scales[static_cast<std::size_t>(at * 16 + t)] = quantized.scales[token_block];
                sums[static_cast<std::size_t>(at * 16 + t)] = quantized.block_sums[token_block];
            }
        }
    }
    return {pairs, scales.data(), sums.data()};
}

} // namespace

void matmul(const WeightMatrix& w, const float* x, std::int64_t tokens, float* y,
            ThreadPool& pool) {
    const MatmulOutput output{&w, y};
    matmul_shared_input(std::span(&output, 1), x, tokens, pool);
}

void matmul_shared_input(std::span<const MatmulOutput> outputs, const float* x, std::int64_t tokens,
                         ThreadPool& pool) {
    const detail::MatmulKernels& k = kernels();
    const std::int64_t cols = outputs.front().weights->cols;
    std::int64_t total_rows = 0;
    bool any_fused = false;
    for (const MatmulOutput& out : outputs) {
        if (out.weights->cols != cols) {
            throw std::invalid_argument("matmul_shared_input: matrices of different widths");
        }
        total_rows += out.weights->rows;
        any_fused = any_fused || k.has_fused(*out.weights);
    }
    thread_local std::vector<std::int16_t> quantized_values;
    thread_local std::vector<float> quantized_scales;
    thread_local std::vector<float> quantized_sums;
    thread_local std::vector<float> group_scales;
    thread_local std::vector<float> group_sums;
    thread_local std::vector<std::int32_t> paired_values;
    thread_local std::vector<float> paired_scales;
    thread_local std::vector<float> paired_sums;
    detail::QuantizedActivations quantized;
    detail::PairedActivations paired;
    if (any_fused) {
        const std::int64_t blocks = cols / 32;
        std::int16_t* values =
            aligned_storage(quantized_values, static_cast<std::size_t>(tokens * cols));
        quantized_scales.resize(static_cast<std::size_t>(tokens * blocks));
        quantized_sums.resize(quantized_scales.size());
        quantized = {values, quantized_scales.data(), quantized_sums.data()};
        k.quantize_activations(x, tokens, cols, quantized);
        // Scales and sums of each group of eight tokens, side by side per
        // block, for the eight-token kernel.
        const std::int64_t groups = tokens / 8;
        group_scales.resize(static_cast<std::size_t>(groups * blocks * 8));
        group_sums.resize(group_scales.size());
        for (std::int64_t g = 0; g < groups; ++g) {
            for (std::int64_t b = 0; b < blocks; ++b) {
                for (std::int64_t j = 0; j < 8; ++j) {
                    const std::size_t from = static_cast<std::size_t>((g * 8 + j) * blocks + b);
                    const std::size_t to = static_cast<std::size_t>((g * blocks + b) * 8 + j);
                    group_scales[to] = quantized.scales[from];
                    group_sums[to] = quantized.block_sums[from];
                }
            }
        }
        if (k.fused_rows_16_tokens != nullptr && tokens >= 16) {
            paired = pair_activations(quantized, tokens / 16, blocks, paired_values, paired_scales,
                                      paired_sums);
        }
    }
    // Plain pointers for the workers: naming a thread_local inside the loop
    // body would give each worker thread its own, empty, copy.
    const float* scales8 = group_scales.data();
    const float* sums8 = group_sums.data();
    for (std::int64_t tile = 0; tile < tokens; tile += kTokenTile) {
        const std::int64_t tile_tokens = std::min(kTokenTile, tokens - tile);
        const float* x_tile = x + tile * cols;
        pool.parallel_for(total_rows, 16, [&](std::int64_t begin, std::int64_t end) {
            thread_local std::vector<float> row;
            // Walk the share matrix by matrix: [global, stop) lies in one.
            std::size_t m = 0;
            std::int64_t first_row = 0;
            for (std::int64_t global = begin; global < end;) {
                while (global >= first_row + outputs[m].weights->rows) {
                    first_row += outputs[m].weights->rows;
                    ++m;
                }
                const WeightMatrix& w = *outputs[m].weights;
                const std::int64_t stop = std::min(end, first_row + w.rows);
                multiply_rows(k, w, global - first_row, stop - first_row, quantized, paired,
                              scales8, sums8, x_tile, tile, tile_tokens,
                              outputs[m].y + tile * w.rows, row);
                global = stop;
            }
        });
    }
}

} // namespace kvscope::cpu
