// fp16 and bf16 conversions: exhaustive over every 16-bit pattern, and
// fp32 -> fp16 rounding checked against the CPU's own F16C instruction.
#include "engine/util/cpu_features.h"
#include "kernels/math/half.h"

#include <cmath>
#include <immintrin.h>
#include <random>

#include <QTest>

using namespace kvscope;

class TestHalf : public QObject {
    Q_OBJECT

private slots:
    void fp16_round_trips_every_pattern();
    void fp16_known_values();
    void fp32_to_fp16_matches_f16c();
    void bf16_round_trips_and_rounds_to_even();
};

void TestHalf::fp16_round_trips_every_pattern() {
    for (std::uint32_t bits = 0; bits <= 0xffff; ++bits) {
        const auto h = static_cast<std::uint16_t>(bits);
        const float f = fp16_to_fp32(h);
        if (std::isnan(f)) {
            QVERIFY((h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0);
            QVERIFY(std::isnan(fp16_to_fp32(fp32_to_fp16(f))));
            continue;
        }
        QCOMPARE(fp32_to_fp16(f), h);
    }
}

void TestHalf::fp16_known_values() {
    QCOMPARE(fp16_to_fp32(0x3c00), 1.0f);
    QCOMPARE(fp16_to_fp32(0xc000), -2.0f);
    QCOMPARE(fp16_to_fp32(0x7bff), 65504.0f);
    QCOMPARE(fp16_to_fp32(0x0001), std::ldexp(1.0f, -24)); // smallest subnormal
    QVERIFY(std::isinf(fp16_to_fp32(0x7c00)));
    QCOMPARE(fp32_to_fp16(1e6f), std::uint16_t{0x7c00});  // overflow to inf
    QCOMPARE(fp32_to_fp16(1e-9f), std::uint16_t{0x0000}); // underflow to zero
    QCOMPARE(fp32_to_fp16(-0.0f), std::uint16_t{0x8000});
}

__attribute__((target("f16c"))) static std::uint16_t hardware_fp16(float value) {
    return static_cast<std::uint16_t>(_cvtss_sh(value, _MM_FROUND_TO_NEAREST_INT));
}

void TestHalf::fp32_to_fp16_matches_f16c() {
    if (!kvscope::cpu_features().f16c) {
        QSKIP("this CPU has no F16C instruction to compare against");
    }
    std::mt19937 rng(11);
    std::uniform_int_distribution<std::uint32_t> bits;
    for (int i = 0; i < 2'000'000; ++i) {
        // Random bit patterns cover every exponent, including halfway cases.
        float value = std::bit_cast<float>(bits(rng));
        if (std::isnan(value)) {
            continue;
        }
        if (i % 2 == 0) { // and half of them in the fp16 range, where rounding matters
            value = std::ldexp(std::abs(value) / std::pow(2.0f, std::ilogb(value) * 1.0f),
                               static_cast<int>(bits(rng) % 44) - 28) *
                    (value < 0 ? -1.0f : 1.0f);
        }
        if (fp32_to_fp16(value) != hardware_fp16(value)) {
            QFAIL(qPrintable(QString("%1: ours %2, F16C %3")
                                 .arg(double(value), 0, 'g', 12)
                                 .arg(fp32_to_fp16(value), 4, 16)
                                 .arg(hardware_fp16(value), 4, 16)));
        }
    }
}

void TestHalf::bf16_round_trips_and_rounds_to_even() {
    for (std::uint32_t bits = 0; bits <= 0xffff; ++bits) {
        const auto b = static_cast<std::uint16_t>(bits);
        const float f = bf16_to_fp32(b);
        if (!std::isnan(f)) {
            QCOMPARE(fp32_to_bf16(f), b);
        }
    }
    // 1 + 2^-8 is halfway between two bf16 values: ties go to the even one (1.0).
    QCOMPARE(fp32_to_bf16(1.0f + std::ldexp(1.0f, -8)), std::uint16_t{0x3f80});
    QCOMPARE(fp32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), std::uint16_t{0x3f82});
}

QTEST_GUILESS_MAIN(TestHalf)
#include "tst_half.moc"
