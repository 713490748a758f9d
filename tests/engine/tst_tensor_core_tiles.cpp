// What the CUDA tensor-core kernels (kernels/tile_attention.cu,
// kernels/tile_gemm.cu) plan and index on the host's side, checked here where
// no GPU is needed: how a step's tokens are cut into query tiles and its
// splits planned (engine/cuda/query_tiles.h), and the fragment layouts and
// slice order they find every element through (kernels/math/mma_fragments.h). The layouts are run
// lane by lane as a warp holds them: each covers its matrix exactly once,
// and a warp's scores and weighted values, composed the way the kernel
// composes them (queries as A, keys read along their dimensions as B, the
// scores' accumulators reused as the probabilities' A, values read down the
// entries as B), through an instruction written from the PTX ISA's own
// tables (not through the layouts under test), are Q K^T and P V; and a
// warp's share of a small matrix product, each lane reading 16 contiguous
// bytes of its rows per 32-wide slice, is x w^T.
#include "engine/cuda/query_tiles.h"
#include "kernels/math/mma_fragments.h"
#include "kernels/math/paged_slots.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <random>
#include <vector>

#include <QTest>

namespace {

using namespace kvscope;
namespace mma = math::mma;

// A warp's registers of one m16n8k16 instruction, values as floats.
struct Fragments {
    std::array<std::array<std::array<float, 2>, 4>, 32> a{}; // [lane][reg][half]
    std::array<std::array<std::array<float, 2>, 2>, 32> b{}; // [lane][reg][half]
    std::array<std::array<float, 4>, 32> c{};                // [lane][value]
};

// What the hardware does with them: d = a b + c, the fragments read as the
// PTX ISA's tables for mma.m16n8k16 (.f16/.bf16 inputs, .f32 accumulators)
// give them, written out here apart from mma_fragments.h. A's element i of
// a lane (0-7, two a register) sits at row groupID (+8 for i = 2, 3, 6, 7)
// and column threadID_in_group * 2 + (i & 1) (+8 for i >= 4); B's element i
// (0-3) at row threadID_in_group * 2 + (i & 1) (+8 for i >= 2), column
// groupID; C's element i (0-3) at row groupID (+8 for i >= 2), column
// threadID_in_group * 2 + (i & 1).
void emulate_mma(Fragments& f) {
    float a[16][16];
    float b[16][8];
    for (int lane = 0; lane < 32; ++lane) {
        const int group = lane >> 2;
        const int in_group = lane & 3;
        for (int i = 0; i < 8; ++i) {
            const int row = group + ((i == 2 || i == 3 || i == 6 || i == 7) ? 8 : 0);
            const int col = in_group * 2 + (i & 1) + (i >= 4 ? 8 : 0);
            a[row][col] = f.a[lane][i / 2][i % 2];
        }
        for (int i = 0; i < 4; ++i) {
            b[in_group * 2 + (i & 1) + (i >= 2 ? 8 : 0)][group] = f.b[lane][i / 2][i % 2];
        }
    }
    for (int lane = 0; lane < 32; ++lane) {
        for (int v = 0; v < 4; ++v) {
            const int row = (lane >> 2) + (v >= 2 ? 8 : 0);
            const int col = (lane & 3) * 2 + (v & 1);
            double sum = f.c[lane][v];
            for (int k = 0; k < 16; ++k) {
                sum += static_cast<double>(a[row][k]) * b[k][col];
            }
            f.c[lane][v] = static_cast<float>(sum);
        }
    }
}

std::vector<float> random_matrix(int rows, int cols, std::uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    std::vector<float> m(static_cast<std::size_t>(rows) * cols);
    for (float& x : m) {
        x = uniform(rng);
    }
    return m;
}

} // namespace

class TestTensorCoreTiles : public QObject {
    Q_OBJECT

private slots:
    void tiles_cut_at_sequences_and_at_the_tile_length();
    void splits_count_the_blocks_with_work();
    void splits_cut_each_context_once();
    void fragment_layouts_cover_each_matrix_once();
    void a_warp_composes_scores_and_weighted_values();
    void slices_pair_each_column_once();
    void a_warp_computes_a_slice_product();
};

void TestTensorCoreTiles::tiles_cut_at_sequences_and_at_the_tile_length() {
    // A prefill of 37 tokens, a decode, a chunk of 20, a decode, and
    // speculative verifications of 2 and 4 tokens, cut into tiles of 16:
    // runs shorter than kShortestTiledRun (4) stay per token.
    std::vector<std::int32_t> sequence_of;
    const int lengths[] = {37, 1, 20, 1, 2, 4};
    for (int s = 0; s < 6; ++s) {
        sequence_of.insert(sequence_of.end(), static_cast<std::size_t>(lengths[s]), s);
    }
    const cuda::QueryTiles tiles = cuda::plan_query_tiles(sequence_of, 16);
    QCOMPARE(tiles.bounds,
             (std::vector<std::int32_t>{0, 16, 16, 32, 32, 37, 38, 54, 54, 58, 61, 65}));
    QCOMPARE(tiles.untiled_tokens, (std::vector<std::int32_t>{37, 58, 59, 60}));
    QCOMPARE(tiles.count(), std::int64_t{6});
    // Every token once, in a tile of one sequence's tokens or alone.
    std::vector<int> seen(sequence_of.size(), 0);
    for (std::size_t i = 0; i < tiles.bounds.size(); i += 2) {
        QVERIFY(tiles.bounds[i + 1] - tiles.bounds[i] >= 1 &&
                tiles.bounds[i + 1] - tiles.bounds[i] <= 16);
        for (std::int32_t t = tiles.bounds[i]; t < tiles.bounds[i + 1]; ++t) {
            ++seen[static_cast<std::size_t>(t)];
            QCOMPARE(sequence_of[static_cast<std::size_t>(t)],
                     sequence_of[static_cast<std::size_t>(tiles.bounds[i])]);
        }
    }
    for (const std::int32_t t : tiles.untiled_tokens) {
        ++seen[static_cast<std::size_t>(t)];
    }
    QVERIFY(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
    QCOMPARE(cuda::plan_query_tiles(sequence_of, 64).bounds,
             (std::vector<std::int32_t>{0, 37, 38, 58, 61, 65}));
    // Decodes alone: no tiles, every token per token.
    const std::vector<std::int32_t> decodes{0, 1, 2, 3};
    QCOMPARE(cuda::plan_query_tiles(decodes, 16).count(), std::int64_t{0});
    QCOMPARE(cuda::plan_query_tiles(decodes, 16).untiled_tokens, decodes);
    QCOMPARE(cuda::plan_query_tiles({}, 16).count(), std::int64_t{0});
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, cuda::plan_query_tiles(sequence_of, 0));
}

void TestTensorCoreTiles::splits_count_the_blocks_with_work() {
    // One prefill chunk of 512 tokens from nothing, tiles of 16: 32 tiles
    // whose contexts grow from 16 to 512 entries.
    std::vector<std::int32_t> sequence_of(512, 0);
    std::vector<std::int32_t> cache_positions(512);
    for (std::int32_t t = 0; t < 512; ++t) {
        cache_positions[static_cast<std::size_t>(t)] = t;
    }
    const cuda::QueryTiles tiles = cuda::plan_query_tiles(sequence_of, 16);
    // 3 KV heads, 132 multiprocessors x 4 blocks = 528 blocks wanted. At
    // splits of 64 the tiles have sum(ceil(16 t / 64)) = 4 * (1 + ... + 8) =
    // 144 splits of work, 432 blocks: short of it; at 32 (the shortest
    // asked for) it is whatever 32 gives.
    QCOMPARE(cuda::tiled_split_length(tiles, cache_positions, 3, 132, 2048, 32, 4), 32);
    // Counting every tile at the longest context would have stopped at 64
    // (32 tiles x 8 splits x 3 = 768 blocks), though most tiles end early.
    // A GPU of 20 multiprocessors wanting 2 blocks each: 40. One KV head:
    // 32 blocks at 2048, 1024 and 512 entries, 48 at 256.
    QCOMPARE(cuda::tiled_split_length(tiles, cache_positions, 1, 20, 2048, 64, 2), 256);
    QCOMPARE(cuda::tiled_split_length(tiles, cache_positions, 3, 20, 2048, 64, 2), 2048);
    // A single token counts its own context: a decode over 4096 entries
    // beside the chunk gives 32 + 8 = 40 blocks at 512.
    cuda::QueryTiles mixed = tiles;
    mixed.untiled_tokens.push_back(512);
    cache_positions.push_back(4095);
    QCOMPARE(cuda::tiled_split_length(mixed, cache_positions, 1, 20, 2048, 64, 2), 512);
}

void TestTensorCoreTiles::splits_cut_each_context_once() {
    // The splits a query's entries are cut into (math::split_entries), as
    // the CPU's segments, the CUDA split kernels and the tile attention cut
    // them, and as many as the merges count (math::split_count): together
    // they hold the attended entries once each, every counted split some,
    // the one past none.
    for (const std::int32_t window : {0, 8, 37, 512}) {
        for (const std::int32_t length : {32, 64, 256, 2048}) {
            for (std::int32_t context = 1; context <= 1200; context += 7) {
                const std::int32_t first = math::attended_first(context, window);
                const std::int32_t splits = math::split_count(context, window, length);
                std::int32_t next = first;
                for (std::int32_t s = 0; s < splits; ++s) {
                    const math::EntryRange r = math::split_entries(context, window, s, length);
                    QCOMPARE(r.begin, next);
                    QVERIFY(r.end > r.begin && r.end - r.begin <= length);
                    next = r.end;
                }
                QCOMPARE(next, context);
                const math::EntryRange past = math::split_entries(context, window, splits, length);
                QCOMPARE(past.begin, past.end);
            }
        }
    }
}

void TestTensorCoreTiles::fragment_layouts_cover_each_matrix_once() {
    int a[16][16] = {};
    int b[16][8] = {};
    int c[16][8] = {};
    for (int lane = 0; lane < 32; ++lane) {
        for (int reg = 0; reg < 4; ++reg) {
            for (int half = 0; half < 2; ++half) {
                const mma::Element e = mma::a_element(lane, reg, half);
                QVERIFY(e.row >= 0 && e.row < 16 && e.col >= 0 && e.col < 16);
                ++a[e.row][e.col];
                if (half == 1) { // a register's two values are neighbours in a row
                    const mma::Element low = mma::a_element(lane, reg, 0);
                    QCOMPARE(e.row, low.row);
                    QCOMPARE(e.col, low.col + 1);
                    QCOMPARE(low.col % 2, 0);
                }
            }
        }
        for (int reg = 0; reg < 2; ++reg) {
            for (int half = 0; half < 2; ++half) {
                const mma::Element e = mma::b_element(lane, reg, half);
                QVERIFY(e.row >= 0 && e.row < 16 && e.col >= 0 && e.col < 8);
                ++b[e.row][e.col];
                if (half == 1) { // neighbours down a column: one 32-bit load of a key row
                    const mma::Element low = mma::b_element(lane, reg, 0);
                    QCOMPARE(e.col, low.col);
                    QCOMPARE(e.row, low.row + 1);
                    QCOMPARE(low.row % 2, 0);
                }
            }
        }
        for (int v = 0; v < 4; ++v) {
            const mma::Element e = mma::c_element(lane, v);
            QVERIFY(e.row >= 0 && e.row < 16 && e.col >= 0 && e.col < 8);
            ++c[e.row][e.col];
        }
    }
    for (int r = 0; r < 16; ++r) {
        for (int k = 0; k < 16; ++k) {
            QCOMPARE(a[r][k], 1);
        }
        for (int n = 0; n < 8; ++n) {
            QCOMPARE(b[r][n], 1);
            QCOMPARE(c[r][n], 1);
        }
    }
    // The accumulators of two side-by-side C tiles are the A fragment of
    // their 16 columns: same lane, the same (row, column).
    for (int lane = 0; lane < 32; ++lane) {
        for (int reg = 0; reg < 4; ++reg) {
            for (int half = 0; half < 2; ++half) {
                const mma::AccumulatorSource from = mma::a_from_accumulators(reg, half);
                const mma::Element c_at = mma::c_element(lane, from.value);
                const mma::Element a_at = mma::a_element(lane, reg, half);
                QCOMPARE(a_at.row, c_at.row);
                QCOMPARE(a_at.col, from.tile * 8 + c_at.col);
            }
        }
    }
}

void TestTensorCoreTiles::a_warp_composes_scores_and_weighted_values() {
    // One warp's 16 query rows against 64 entries, head_dim 32: the shapes
    // of the kernel's loop (two K steps of the scores, 8 score tiles; four K
    // steps of the output, 4 output tiles).
    constexpr int kRows = 16;
    constexpr int kEntries = 64;
    constexpr int kDim = 32;
    const std::vector<float> q = random_matrix(kRows, kDim, 1);
    const std::vector<float> k = random_matrix(kEntries, kDim, 2);
    const std::vector<float> v = random_matrix(kEntries, kDim, 3);

    // Scores: A = the queries, B(dimension, entry) = K[entry][dimension].
    std::array<std::array<std::array<float, 4>, 32>, kEntries / 8> score{};
    for (int j = 0; j < kEntries / 8; ++j) {
        for (int step = 0; step < kDim / 16; ++step) {
            Fragments f;
            for (int lane = 0; lane < 32; ++lane) {
                for (int reg = 0; reg < 4; ++reg) {
                    for (int half = 0; half < 2; ++half) {
                        const mma::Element e = mma::a_element(lane, reg, half);
                        f.a[lane][reg][half] = q[e.row * kDim + step * 16 + e.col];
                    }
                }
                for (int reg = 0; reg < 2; ++reg) {
                    for (int half = 0; half < 2; ++half) {
                        const mma::Element e = mma::b_element(lane, reg, half);
                        f.b[lane][reg][half] = k[(j * 8 + e.col) * kDim + step * 16 + e.row];
                    }
                }
                f.c[lane] = score[j][lane];
            }
            emulate_mma(f);
            for (int lane = 0; lane < 32; ++lane) {
                score[j][lane] = f.c[lane];
            }
        }
    }
    for (int j = 0; j < kEntries / 8; ++j) {
        for (int lane = 0; lane < 32; ++lane) {
            for (int value = 0; value < 4; ++value) {
                const mma::Element e = mma::c_element(lane, value);
                const int entry = j * 8 + e.col;
                double expected = 0.0;
                for (int d = 0; d < kDim; ++d) {
                    expected += static_cast<double>(q[e.row * kDim + d]) * k[entry * kDim + d];
                }
                QVERIFY(std::abs(score[j][lane][value] - expected) < 1e-4);
            }
        }
    }

    // Weighted values, the scores standing in for probabilities: A from the
    // score accumulators, B(entry, dimension) = V[entry][dimension].
    std::array<std::array<std::array<float, 4>, 32>, kDim / 8> out{};
    for (int n = 0; n < kDim / 8; ++n) {
        for (int step = 0; step < kEntries / 16; ++step) {
            Fragments f;
            for (int lane = 0; lane < 32; ++lane) {
                for (int reg = 0; reg < 4; ++reg) {
                    for (int half = 0; half < 2; ++half) {
                        const mma::AccumulatorSource from = mma::a_from_accumulators(reg, half);
                        f.a[lane][reg][half] = score[2 * step + from.tile][lane][from.value];
                    }
                }
                for (int reg = 0; reg < 2; ++reg) {
                    for (int half = 0; half < 2; ++half) {
                        const mma::Element e = mma::b_element(lane, reg, half);
                        f.b[lane][reg][half] = v[(step * 16 + e.row) * kDim + n * 8 + e.col];
                    }
                }
                f.c[lane] = out[n][lane];
            }
            emulate_mma(f);
            for (int lane = 0; lane < 32; ++lane) {
                out[n][lane] = f.c[lane];
            }
        }
    }
    for (int n = 0; n < kDim / 8; ++n) {
        for (int lane = 0; lane < 32; ++lane) {
            for (int value = 0; value < 4; ++value) {
                const mma::Element e = mma::c_element(lane, value);
                const int d = n * 8 + e.col;
                double expected = 0.0;
                for (int entry = 0; entry < kEntries; ++entry) {
                    double s = 0.0;
                    for (int i = 0; i < kDim; ++i) {
                        s += static_cast<double>(q[e.row * kDim + i]) * k[entry * kDim + i];
                    }
                    expected += s * v[entry * kDim + d];
                }
                QVERIFY2(std::abs(out[n][lane][value] - expected) < 1e-3,
                         qPrintable(QString("row %1, dimension %2: %3 against %4")
                                        .arg(e.row)
                                        .arg(d)
                                        .arg(out[n][lane][value])
                                        .arg(expected)));
            }
        }
    }
}

void TestTensorCoreTiles::slices_pair_each_column_once() {
    // Over a slice's two steps the 16 K positions cover its 32 columns once,
    // and every lane finds the columns of its A and B values in its own 8,
    // in the word slice_word names.
    std::vector<int> seen(32, 0);
    for (int step = 0; step < 2; ++step) {
        for (int k = 0; k < 16; ++k) {
            ++seen[static_cast<std::size_t>(mma::slice_column(step, k))];
        }
    }
    QVERIFY(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
    for (int lane = 0; lane < 32; ++lane) {
        const int first = 8 * (lane % 4);
        for (int step = 0; step < 2; ++step) {
            for (int reg = 0; reg < 4; ++reg) {
                for (int half = 0; half < 2; ++half) {
                    const int column = mma::slice_column(step, mma::a_element(lane, reg, half).col);
                    QCOMPARE(column, first + 2 * mma::slice_word(step, reg / 2) + half);
                }
            }
            for (int reg = 0; reg < 2; ++reg) {
                for (int half = 0; half < 2; ++half) {
                    const int column = mma::slice_column(step, mma::b_element(lane, reg, half).row);
                    QCOMPARE(column, first + 2 * mma::slice_word(step, reg) + half);
                }
            }
        }
    }
}

void TestTensorCoreTiles::a_warp_computes_a_slice_product() {
    // tile_gemm_kernel's registers for 16 tokens x 8 output rows over 64
    // input columns (two slices), built as it builds them: lane (g, t) holds
    // 8 values from column 8 t of each slice of input rows g and g + 8 and of
    // weight row g, and step s takes words slice_word(s, upper).
    constexpr int kTokens = 16;
    constexpr int kOut = 8;
    constexpr int kCols = 64;
    const std::vector<float> x = random_matrix(kTokens, kCols, 4);
    const std::vector<float> w = random_matrix(kOut, kCols, 5);
    std::array<std::array<float, 4>, 32> acc{};
    for (int slice = 0; slice < kCols / 32; ++slice) {
        for (int step = 0; step < 2; ++step) {
            Fragments f;
            for (int lane = 0; lane < 32; ++lane) {
                const int first = slice * 32 + 8 * (lane % 4);
                for (int reg = 0; reg < 4; ++reg) {
                    const int row = mma::a_element(lane, reg, 0).row;
                    const int word = mma::slice_word(step, reg / 2);
                    for (int half = 0; half < 2; ++half) {
                        f.a[lane][reg][half] = x[row * kCols + first + 2 * word + half];
                    }
                }
                const int w_row = mma::b_element(lane, 0, 0).col;
                for (int reg = 0; reg < 2; ++reg) {
                    const int word = mma::slice_word(step, reg);
                    for (int half = 0; half < 2; ++half) {
                        f.b[lane][reg][half] = w[w_row * kCols + first + 2 * word + half];
                    }
                }
                f.c[lane] = acc[lane];
            }
            emulate_mma(f);
            for (int lane = 0; lane < 32; ++lane) {
                acc[lane] = f.c[lane];
            }
        }
    }
    for (int lane = 0; lane < 32; ++lane) {
        for (int v = 0; v < 4; ++v) {
            const mma::Element e = mma::c_element(lane, v); // (token, output row)
            double expected = 0.0;
            for (int c = 0; c < kCols; ++c) {
                expected += static_cast<double>(x[e.row * kCols + c]) * w[e.col * kCols + c];
            }
            QVERIFY2(std::abs(acc[lane][v] - expected) < 1e-4,
                     qPrintable(QString("token %1, row %2: %3 against %4")
                                    .arg(e.row)
                                    .arg(e.col)
                                    .arg(acc[lane][v])
                                    .arg(expected)));
        }
    }
}

QTEST_APPLESS_MAIN(TestTensorCoreTiles)
#include "tst_tensor_core_tiles.moc"
