// What the CUDA tile attention (kernels/tile_attention.cu) plans and indexes
// on the host's side, checked here where no GPU is needed: how a step's
// tokens are cut into query tiles (engine/cuda/query_tiles.h), and the
// tensor-core fragment layouts it finds every element through
// (kernels/math/mma_fragments.h). The layouts are run lane by lane as a warp
// holds them: each covers its matrix exactly once, and a warp's scores and
// weighted values, composed the way the kernel composes them (queries as A,
// keys read along their dimensions as B, the scores' accumulators reused as
// the probabilities' A, values read down the entries as B), are Q K^T and
// P V.
#include "engine/cuda/query_tiles.h"
#include "kernels/math/mma_fragments.h"

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

// What the hardware does with them (the PTX ISA's definition, through the
// same layouts): d = a b + c.
void emulate_mma(Fragments& f) {
    float a[16][16];
    float b[16][8];
    for (int lane = 0; lane < 32; ++lane) {
        for (int reg = 0; reg < 4; ++reg) {
            for (int half = 0; half < 2; ++half) {
                const mma::Element e = mma::a_element(lane, reg, half);
                a[e.row][e.col] = f.a[lane][reg][half];
            }
        }
        for (int reg = 0; reg < 2; ++reg) {
            for (int half = 0; half < 2; ++half) {
                const mma::Element e = mma::b_element(lane, reg, half);
                b[e.row][e.col] = f.b[lane][reg][half];
            }
        }
    }
    for (int lane = 0; lane < 32; ++lane) {
        for (int v = 0; v < 4; ++v) {
            const mma::Element e = mma::c_element(lane, v);
            double sum = f.c[lane][v];
            for (int k = 0; k < 16; ++k) {
                sum += static_cast<double>(a[e.row][k]) * b[k][e.col];
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

class TestTileAttentionPlan : public QObject {
    Q_OBJECT

private slots:
    void tiles_cut_at_sequences_and_at_the_tile_length();
    void decodes_alone_stay_per_token();
    void fragment_layouts_cover_each_matrix_once();
    void a_warp_composes_scores_and_weighted_values();
};

void TestTileAttentionPlan::tiles_cut_at_sequences_and_at_the_tile_length() {
    // A prefill of 37 tokens, a decode, a chunk of 20, a decode of 2 (a
    // speculative verification), cut into tiles of 16.
    std::vector<std::int32_t> sequence_of;
    const int lengths[] = {37, 1, 20, 2};
    for (int s = 0; s < 4; ++s) {
        sequence_of.insert(sequence_of.end(), static_cast<std::size_t>(lengths[s]), s);
    }
    const std::vector<std::int32_t> starts = cuda::query_tile_starts(sequence_of, 16);
    const std::vector<std::int32_t> expected{0, 16, 32, 37, 38, 54, 58, 60};
    QCOMPARE(starts, expected);
    // Every tile is one sequence's, at most 16 long, and they cover the step.
    for (std::size_t i = 0; i + 1 < starts.size(); ++i) {
        QVERIFY(starts[i + 1] - starts[i] >= 1 && starts[i + 1] - starts[i] <= 16);
        for (std::int32_t t = starts[i]; t < starts[i + 1]; ++t) {
            QCOMPARE(sequence_of[static_cast<std::size_t>(t)],
                     sequence_of[static_cast<std::size_t>(starts[i])]);
        }
    }
    QCOMPARE(cuda::query_tile_starts(sequence_of, 64),
             (std::vector<std::int32_t>{0, 37, 38, 58, 60}));
    QCOMPARE(cuda::query_tile_starts({}, 16), std::vector<std::int32_t>{0});
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, cuda::query_tile_starts(sequence_of, 0));
    QVERIFY(cuda::worth_tiling(60, 7)); // 8.6 tokens a tile
}

void TestTileAttentionPlan::decodes_alone_stay_per_token() {
    std::vector<std::int32_t> sequence_of(32);
    for (std::int32_t s = 0; s < 32; ++s) {
        sequence_of[static_cast<std::size_t>(s)] = s;
    }
    const std::vector<std::int32_t> starts = cuda::query_tile_starts(sequence_of, 16);
    QCOMPARE(starts.size(), std::size_t{33}); // a tile per decode
    QVERIFY(!cuda::worth_tiling(32, 32));
    // Decodes beside one long chunk: mostly chunk, tiled.
    sequence_of.insert(sequence_of.end(), 512, 32);
    QVERIFY(cuda::worth_tiling(
        static_cast<std::int64_t>(sequence_of.size()),
        static_cast<std::int64_t>(cuda::query_tile_starts(sequence_of, 16).size() - 1)));
    QVERIFY(!cuda::worth_tiling(0, 0));
}

void TestTileAttentionPlan::fragment_layouts_cover_each_matrix_once() {
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

void TestTileAttentionPlan::a_warp_composes_scores_and_weighted_values() {
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

QTEST_APPLESS_MAIN(TestTileAttentionPlan)
#include "tst_tile_attention_plan.moc"
