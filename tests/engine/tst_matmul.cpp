// The CPU matmul kernels against a double-precision reference computed from
// gguf-py's dequantised weights: every weight type of the reference file, at
// token counts that exercise the 1-, 4- and 8-token kernels and their
// remainders, one thread and several. Also the packed row layouts against
// gguf-py's values, for every type they take.
#include "engine/cpu/kernel_set.h"
#include "engine/cpu/matmul.h"
#include "engine/cpu/ops.h"
#include "engine/cpu/packed_rows.h"
#include "engine/gguf/gguf_file.h"
#include "engine/util/cpu_features.h"

#include <algorithm>
#include <cmath>
#include <random>

#include <QTest>

using namespace kvscope;

namespace {

const char* reference_path() {
    return KVSCOPE_SOURCE_DIR "/tests/engine/data/reference_types.gguf";
}

cpu::WeightMatrix view(const gguf::GgufFile& file, const std::string& name) {
    const gguf::TensorInfo& t = file.require_tensor(name);
    cpu::WeightMatrix w;
    w.type = t.type;
    w.cols = static_cast<std::int64_t>(t.shape[0]);
    w.rows = static_cast<std::int64_t>(t.rows());
    w.row_bytes = static_cast<std::size_t>(t.byte_size / t.rows());
    w.data = file.tensor_bytes(t).data();
    return w;
}

} // namespace

class TestMatmul : public QObject {
    Q_OBJECT

private slots:
    void initTestCase();
    void the_kernel_set_asked_for_runs();
    void packed_rows_round_trip_data();
    void packed_rows_round_trip();
    void matches_double_reference_data();
    void matches_double_reference();
    void shared_input_mixes_fused_and_expanded_matrices();
    void gated_activations_match_the_scalar_math();
};

void TestMatmul::initTestCase() {
    if (qgetenv("KVSCOPE_CPU_KERNELS") == "avx2" && !cpu_has_avx512_kernels()) {
        QSKIP("no AVX-512 here: the suite's default run covers the AVX2 set");
    }
}

void TestMatmul::the_kernel_set_asked_for_runs() {
    // KVSCOPE_CPU_KERNELS narrows the set (ctest runs this suite once with
    // the widest set the CPU has and, where that is AVX-512, once more with
    // "avx2"); unset, the widest.
    const QByteArray asked = qgetenv("KVSCOPE_CPU_KERNELS");
    const QString name = cpu::kernel_set_name(cpu::kernel_set());
    qInfo("kernel set: %s", qPrintable(name));
    const QString widest = cpu_has_avx512_kernels() ? "avx512-vnni"
                           : cpu_has_avx2_kernels() ? "avx2"
                                                    : "scalar";
    if (asked == "avx2") {
        QCOMPARE(name, QString("avx2"));
    } else if (asked == "scalar") {
        QCOMPARE(name, QString("scalar"));
    } else {
        QCOMPARE(name, widest);
    }
}

void TestMatmul::packed_rows_round_trip_data() {
    QTest::addColumn<QString>("type");
    for (const char* type :
         {"Q4_0", "Q4_1", "Q8_0", "Q5_0", "Q5_1", "Q3_K", "Q4_K", "Q5_K", "Q6_K"}) {
        QTest::newRow(type) << QString(type);
    }
}

// Packed rows against gguf-py's values for the same bytes: the types whose
// blocks map onto the packed layouts keep every value (up to the order of
// (q - 8) * d), Q3_K, Q5_K and Q6_K in the split layout with fp32 scales included;
// Q4_K's sub-block scales and offsets are rounded to fp16.
void TestMatmul::packed_rows_round_trip() {
    QFETCH(QString, type);
    const gguf::GgufFile file = gguf::GgufFile::open(reference_path());
    const cpu::WeightMatrix w = view(file, "q." + type.toStdString());
    const auto* expected = reinterpret_cast<const float*>(
        file.tensor_bytes(file.require_tensor("expected." + type.toStdString())).data());
    std::vector<std::byte> storage;
    const cpu::WeightMatrix packed = cpu::pack_rows(w, storage);
    QVERIFY(packed.packed);
    QCOMPARE(packed.type, *cpu::packed_layout(w.type));
    QCOMPARE(packed.row_bytes, cpu::packed_row_bytes(packed.type, w.cols));
    std::vector<float> row(static_cast<std::size_t>(w.cols));
    double worst = 0;
    for (std::int64_t r = 0; r < w.rows; ++r) {
        cpu::unpack_row(packed, r, row.data());
        for (std::int64_t block = 0; block < w.cols; block += 32) {
            const float* want = expected + r * w.cols + block;
            float largest = 0;
            for (int i = 0; i < 32; ++i) {
                largest = std::max(largest, std::abs(want[i]));
            }
            for (int i = 0; i < 32; ++i) {
                const float got = row[static_cast<std::size_t>(block + i)];
                const float error = std::abs(got - want[i]);
                // The split layout (Q3_K, Q5_K, Q6_K) computes what gguf-py
                // does, to the bit.
                const float bound = type == "Q4_K" ? largest * 1e-3f + 1e-7f
                                    : type == "Q3_K" || type == "Q5_K" || type == "Q6_K"
                                        ? 0.0f
                                        : 1e-6f * (1.0f + std::abs(want[i]));
                worst = std::max(worst, double(error / (largest + 1e-30f)));
                QVERIFY2(error <= bound, qPrintable(QString("row %1 value %2: %3, gguf-py %4")
                                                        .arg(r)
                                                        .arg(block + i)
                                                        .arg(double(got))
                                                        .arg(double(want[i]))));
            }
        }
    }
    qInfo("%s: worst error %.2g of its block's largest value", qPrintable(type), worst);
}

void TestMatmul::matches_double_reference_data() {
    QTest::addColumn<QString>("type");
    QTest::addColumn<int>("tokens");
    QTest::addColumn<int>("threads");
    for (const char* type : {"F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K",
                             "Q3_K", "Q4_K", "Q5_K", "Q6_K"}) {
        // 93 = a tile of 64 (four sixteen-token groups), then 16, 8, 4, 1.
        for (const int tokens : {1, 3, 4, 8, 13, 70, 93}) {
            for (const int threads : {1, 3}) {
                QTest::addRow("%s, %d tokens, %d threads", type, tokens, threads)
                    << QString(type) << tokens << threads;
            }
        }
    }
}

void TestMatmul::matches_double_reference() {
    QFETCH(QString, type);
    QFETCH(int, tokens);
    QFETCH(int, threads);
    const gguf::GgufFile file = gguf::GgufFile::open(reference_path());
    std::vector<std::byte> storage;
    // The file's 3 rows repeated 40 times, so the rows are shared out over
    // the threads.
    constexpr int kRepeats = 40;
    const cpu::WeightMatrix three = view(file, "q." + type.toStdString());
    std::vector<std::byte> tall_bytes;
    for (int k = 0; k < kRepeats; ++k) {
        tall_bytes.insert(tall_bytes.end(), three.data, three.data + three.row_bytes * 3);
    }
    cpu::WeightMatrix tall = three;
    tall.rows = 3 * kRepeats;
    tall.data = tall_bytes.data();
    const cpu::WeightMatrix w = cpu::prepare_for_matmul(tall, storage);
    const auto* three_rows = reinterpret_cast<const float*>(
        file.tensor_bytes(file.require_tensor("expected." + type.toStdString())).data());
    // The weights the kernels hold: gguf-py's values, or, packed, the packed
    // values (packed_rows_round_trip bounds how far those are from gguf-py's).
    std::vector<float> reference(static_cast<std::size_t>(w.rows * w.cols));
    for (std::int64_t r = 0; r < w.rows; ++r) {
        if (w.packed) {
            cpu::unpack_row(w, r, reference.data() + r * w.cols);
        } else {
            std::copy(three_rows + (r % 3) * w.cols, three_rows + (r % 3 + 1) * w.cols,
                      reference.begin() + r * w.cols);
        }
    }
    const float* weights = reference.data();

    std::mt19937 rng(static_cast<unsigned>(tokens * 31 + threads));
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> x(static_cast<std::size_t>(tokens * w.cols));
    for (float& v : x) {
        v = normal(rng);
    }
    x[5] = 40.0f; // an outlier, as RMSNorm outputs have
    std::vector<float> y(static_cast<std::size_t>(tokens * w.rows), std::nanf(""));
    cpu::ThreadPool pool(threads);
    cpu::matmul(w, x.data(), tokens, y.data(), pool);

    for (int t = 0; t < tokens; ++t) {
        for (std::int64_t r = 0; r < w.rows; ++r) {
            double expected = 0, magnitude = 0;
            for (std::int64_t i = 0; i < w.cols; ++i) {
                const double product =
                    double(weights[r * w.cols + i]) * x[static_cast<std::size_t>(t * w.cols + i)];
                expected += product;
                magnitude += std::abs(product);
            }
            const double got = y[static_cast<std::size_t>(t * w.rows + r)];
            // int16 activations: each value within 1.5e-5 of its block's
            // largest, so the sum within ~1e-4 of the sum of |products|.
            QVERIFY2(
                std::abs(got - expected) <= 1e-4 * magnitude + 1e-6,
                qPrintable(
                    QString("token %1 row %2: %3 vs %4").arg(t).arg(r).arg(got).arg(expected)));
        }
    }
}

void TestMatmul::shared_input_mixes_fused_and_expanded_matrices() {
    // A packed Q8_0 matrix (fused kernels) and an F16 one (rows expanded)
    // applied to one input in one loop give what each gives alone, at a
    // token count that takes every kernel.
    if (cpu::kernel_set() == cpu::KernelSet::scalar) {
        QSKIP("the scalar kernels keep every matrix in the file's layout: nothing is fused");
    }
    const gguf::GgufFile file = gguf::GgufFile::open(reference_path());
    std::vector<std::byte> storage;
    const cpu::WeightMatrix fused = cpu::prepare_for_matmul(view(file, "q.Q8_0"), storage);
    const cpu::WeightMatrix expanded = view(file, "q.F16");
    QVERIFY(fused.packed && !expanded.packed);
    QCOMPARE(fused.cols, expanded.cols);
    constexpr int kTokens = 93;
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> x(static_cast<std::size_t>(kTokens * fused.cols));
    for (float& v : x) {
        v = normal(rng);
    }
    cpu::ThreadPool pool(3);
    std::vector<float> alone_fused(static_cast<std::size_t>(kTokens * fused.rows));
    std::vector<float> alone_expanded(static_cast<std::size_t>(kTokens * expanded.rows));
    cpu::matmul(fused, x.data(), kTokens, alone_fused.data(), pool);
    cpu::matmul(expanded, x.data(), kTokens, alone_expanded.data(), pool);
    std::vector<float> both_fused(alone_fused.size(), std::nanf(""));
    std::vector<float> both_expanded(alone_expanded.size(), std::nanf(""));
    const cpu::MatmulOutput outputs[] = {{&fused, both_fused.data()},
                                         {&expanded, both_expanded.data()}};
    cpu::matmul_shared_input(outputs, x.data(), kTokens, pool);
    QCOMPARE(both_fused, alone_fused);
    QCOMPARE(both_expanded, alone_expanded);
}

void TestMatmul::gated_activations_match_the_scalar_math() {
    // ops.h's gated_activation (vectorised where the CPU has AVX2) against
    // the shared scalar math (the CUDA kernels' too), over the range FFN
    // gates take and past it: both tails of the sigmoid, zero, and counts
    // that leave a remainder.
    const bool vector = cpu::kernel_set() != cpu::KernelSet::scalar;
    std::mt19937 rng(5);
    std::normal_distribution<float> normal(0.0f, 3.0f);
    for (const int count : {1, 7, 8, 61, 2048}) {
        std::vector<float> gate(static_cast<std::size_t>(count));
        std::vector<float> up(gate.size());
        for (std::size_t i = 0; i < gate.size(); ++i) {
            gate[i] = normal(rng);
            up[i] = normal(rng);
        }
        // Zeros, tiny and huge gates, and gates at the ends of exp's range
        // (SiLU near -87.3 and -88.3; GELU near -10, where -k crosses them).
        const float extremes[] = {0.0f,   -0.0f,   1e-30f, -1e-30f, 40.0f, -40.0f,
                                  100.0f, -100.0f, 1e4f,   -1e4f,   1e30f, -1e30f,
                                  -87.5f, -88.5f,  -9.9f,  -10.0f,  -10.1f};
        for (std::size_t i = 0; i < std::size(extremes) && i < gate.size(); ++i) {
            gate[i] = extremes[i];
        }
        for (const auto activation :
             {model::GateActivation::gelu_tanh, model::GateActivation::silu}) {
            std::vector<float> got = gate;
            cpu::gated_activation(got.data(), up.data(), count, activation);
            for (std::size_t i = 0; i < gate.size(); ++i) {
                const float x = gate[i];
                // In double, as x sigmoid(2u): 0.5 x (1 + tanh u) cancels for
                // negative gates (1 + tanh u near 0), even in double.
                const double xd = x;
                const double k = activation == model::GateActivation::gelu_tanh
                                     ? 2.0 * 0.7978845608028654 * (xd + 0.044715 * xd * xd * xd)
                                     : xd;
                const double act = xd / (1.0 + std::exp(-k));
                const double expected = act * up[i];
                const double error = std::abs(static_cast<double>(got[i]) - expected);
                // A few float ulps of the value, and of exp(-k) for a k
                // rounded to float (results below 1e-35 count as
                // 0: past exp's range both paths flush); the scalar path's float
                // 1 + tanh u also cancels, to an ulp of x * up.
                const double allowed =
                    vector ? (8e-7 + 2e-7 * std::abs(k)) * std::abs(expected) + 1e-35
                           : 4e-7 * std::abs(expected) + 2e-7 * std::abs(xd * up[i]) + 1e-35;
                QVERIFY2(std::isfinite(got[i]) && error <= allowed,
                         qPrintable(QString("act(%1) * %2: %3, expected %4 (count %5)")
                                        .arg(x)
                                        .arg(up[i])
                                        .arg(got[i])
                                        .arg(expected)
                                        .arg(count)));
            }
        }
    }
}

QTEST_GUILESS_MAIN(TestMatmul)
#include "tst_matmul.moc"
