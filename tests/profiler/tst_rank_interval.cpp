// The gate's statistics over runs against known values: the exact null
// distributions of the Mann-Whitney U and Wilcoxon signed-rank statistics,
// and the Hodges-Lehmann ratios with their exact intervals and p-values, all
// from tests/profiler/data/rank_interval_reference.py (brute-force
// enumeration, no formula shared with profiler/gate/rank_interval.cpp) and, for
// the distributions, the printed tables of Hollander & Wolfe.
#include "profiler/gate/rank_interval.h"

#include <cmath>
#include <random>

#include <QTest>

using namespace kvscope::profiler;

namespace {

bool close(double a, double b, double relative = 1e-12) {
    return std::abs(a - b) <= relative * std::max(std::abs(a), std::abs(b));
}

#define QCOMPARE_CLOSE(actual, expected)                                                           \
    QVERIFY2(close(actual, expected), qPrintable(QString("%1 = %2, expected %3")                   \
                                                     .arg(#actual)                                 \
                                                     .arg(actual, 0, 'g', 17)                      \
                                                     .arg(expected, 0, 'g', 17)))

} // namespace

class TestRankInterval : public QObject {
    Q_OBJECT

private slots:
    void mann_whitney_null_distribution_data() {
        QTest::addColumn<int>("n");
        QTest::addColumn<int>("m");
        QTest::addColumn<double>("u");
        QTest::addColumn<double>("expected");
        // n = m = 5: 4/252 and 7/252, the table's two-sided 5% edge.
        QTest::newRow("5,5,2") << 5 << 5 << 2.0 << 0.015873015873015872;
        QTest::newRow("5,5,3") << 5 << 5 << 3.0 << 0.027777777777777776;
        QTest::newRow("4,6,3") << 4 << 6 << 3.0 << 0.03333333333333333;
        QTest::newRow("7,3,5") << 7 << 3 << 5.0 << 0.13333333333333333;
        QTest::newRow("6,6,7") << 6 << 6 << 7.0 << 0.046536796536796536;
        QTest::newRow("half rounds down") << 6 << 6 << 7.5 << 0.046536796536796536;
    }
    void mann_whitney_null_distribution() {
        QFETCH(int, n);
        QFETCH(int, m);
        QFETCH(double, u);
        QFETCH(double, expected);
        QCOMPARE_CLOSE(mann_whitney_cdf(n, m, u), expected);
        // The distribution is symmetric in the two samples' sizes.
        QCOMPARE_CLOSE(mann_whitney_cdf(m, n, u), expected);
    }

    void signed_rank_null_distribution_data() {
        QTest::addColumn<int>("n");
        QTest::addColumn<double>("w");
        QTest::addColumn<double>("expected");
        // n = 10, w = 8: 25/1024, the table's two-sided 5% edge.
        QTest::newRow("7,2") << 7 << 2.0 << 0.0234375;
        QTest::newRow("8,5") << 8 << 5.0 << 0.0390625;
        QTest::newRow("10,8") << 10 << 8.0 << 0.0244140625;
        QTest::newRow("10,10") << 10 << 10.0 << 0.0419921875;
        QTest::newRow("12,13") << 12 << 13.0 << 0.021240234375;
    }
    void signed_rank_null_distribution() {
        QFETCH(int, n);
        QFETCH(double, w);
        QFETCH(double, expected);
        QCOMPARE_CLOSE(signed_rank_cdf(n, w), expected);
    }

    // Past the exact range the normal approximation takes over; at the edge
    // the two agree to a few thousandths.
    void approximations_meet_the_exact_distributions() {
        // (The second pair, 110 x 190, is past the exact range.)
        const double exact_u = mann_whitney_cdf(100, 190, 8000); // 19000 pairs: exact
        const double normal_u = mann_whitney_cdf(110, 190, 8800);
        QVERIFY(exact_u > 0.001 && exact_u < 0.5);
        QVERIFY(std::abs(exact_u -
                         0.5 * std::erfc((9500.0 - 8000 - 0.5) / std::sqrt(19000.0 * 291 / 12) /
                                         std::sqrt(2.0))) < 0.002);
        QVERIFY(std::abs(normal_u -
                         0.5 * std::erfc((10450.0 - 8800 - 0.5) / std::sqrt(20900.0 * 301 / 12) /
                                         std::sqrt(2.0))) < 1e-12);
        const double exact_w = signed_rank_cdf(200, 8000);
        const double normal_w = signed_rank_cdf(201, 8000);
        QVERIFY(std::abs(exact_w - normal_w) < 0.01);
    }

    void unpaired_ratio_data() {
        QTest::addColumn<std::vector<double>>("base");
        QTest::addColumn<std::vector<double>>("now");
        QTest::addColumn<double>("confidence");
        QTest::addColumn<double>("ratio");
        QTest::addColumn<double>("low");
        QTest::addColumn<double>("high");
        QTest::addColumn<double>("p_greater");
        QTest::newRow("5% slower, separated")
            << std::vector<double>{1.00, 1.02, 0.99, 1.01, 1.03}
            << std::vector<double>{1.06, 1.05, 1.08, 1.04, 1.07} << 0.95 << 1.0495049504950495
            << 1.0196078431372548 << 1.0800000000000001 << 0.003968253968253968;
        QTest::newRow("same, with ties")
            << std::vector<double>{10.1, 9.8, 10.4, 10.0, 9.9, 10.2}
            << std::vector<double>{10.0, 10.3, 9.7, 10.5, 10.1, 9.6, 10.2} << 0.90 << 1.0
            << 0.96969696969696972 << 1.0303030303030301 << 0.52738927738927743;
    }
    void unpaired_ratio() {
        QFETCH(std::vector<double>, base);
        QFETCH(std::vector<double>, now);
        QFETCH(double, confidence);
        QFETCH(double, ratio);
        QFETCH(double, low);
        QFETCH(double, high);
        QFETCH(double, p_greater);
        const RatioInterval r = ratio_interval(base, now, confidence);
        QCOMPARE_CLOSE(r.ratio, ratio);
        QCOMPARE_CLOSE(r.low, low);
        QCOMPARE_CLOSE(r.high, high);
        QCOMPARE_CLOSE(r.p_greater, p_greater);
        QVERIFY(r.bounded());
        QVERIFY(r.confidence >= confidence);
    }

    void paired_ratio_data() {
        QTest::addColumn<std::vector<double>>("base");
        QTest::addColumn<std::vector<double>>("now");
        QTest::addColumn<double>("confidence");
        QTest::addColumn<double>("ratio");
        QTest::addColumn<double>("low");
        QTest::addColumn<double>("high");
        QTest::addColumn<double>("p_greater");
        // Runs whose speed drifts by 50% between rounds, the new build 3-5%
        // slower in each: the pairs see it, all 8 rounds agreeing.
        QTest::newRow("4% slower under drift")
            << std::vector<double>{100, 130, 90, 120, 110, 95, 140, 105}
            << std::vector<double>{104, 136, 93, 127, 114, 99, 146, 108} << 0.98
            << 1.0405259167293821 << 1.03094963158107 << 1.0522259677367252 << 0.00390625;
        // Tied magnitudes of both signs: they share their mean rank.
        QTest::newRow("same, 2% noise, ties")
            << std::vector<double>{5.0, 5.2, 4.9, 5.1, 5.3, 5.0, 4.8, 5.2, 5.1, 4.9}
            << std::vector<double>{5.1, 5.1, 5.0, 5.0, 5.4, 4.95, 4.9, 5.3, 5.0, 5.0} << 0.95
            << 1.0006007810695148 << 0.98537380646206474 << 1.0202040612204071 << 0.1611328125;
    }
    void paired_ratio() {
        QFETCH(std::vector<double>, base);
        QFETCH(std::vector<double>, now);
        QFETCH(double, confidence);
        QFETCH(double, ratio);
        QFETCH(double, low);
        QFETCH(double, high);
        QFETCH(double, p_greater);
        const RatioInterval r = paired_ratio_interval(base, now, confidence);
        QCOMPARE_CLOSE(r.ratio, ratio);
        QCOMPARE_CLOSE(r.low, low);
        QCOMPARE_CLOSE(r.high, high);
        QCOMPARE_CLOSE(r.p_greater, p_greater);
    }

    // Too few runs for the confidence asked: no bounded interval (n = m = 2
    // cannot reach 98%; 6 rounds cannot either, 2^-6 > 1%).
    void too_few_runs_leave_the_interval_open() {
        QVERIFY(!ratio_interval({1, 1.1}, {1.2, 1.3}, 0.98).bounded());
        QVERIFY(!paired_ratio_interval({1, 2, 3, 4, 5, 6}, {2, 3, 4, 5, 6, 7}, 0.98).bounded());
        QVERIFY(
            paired_ratio_interval({1, 2, 3, 4, 5, 6, 7}, {2, 3, 4, 5, 6, 7, 8}, 0.98).bounded());
    }

    // Where the counts pass 2^64 the exact distribution is still a
    // distribution: symmetric, increasing, its tails agreeing with the
    // normal approximation.
    void large_exact_distributions_stay_sound() {
        const int n = 141;
        const int m = 141; // 19881 pairs: exact
        const double top = static_cast<double>(n) * m;
        double previous = 0;
        for (double u = 0; u < top; u += 1999) {
            const double p = mann_whitney_cdf(n, m, u);
            QVERIFY(p >= previous && p <= 1);
            QVERIFY(std::abs(p + mann_whitney_cdf(n, m, top - u - 1) - 1) < 1e-9);
            previous = p;
        }
        const double edge = mann_whitney_cdf(n, m, 8500);
        const double normal = 0.5 * std::erfc((top / 2 - 8500 - 0.5) /
                                              std::sqrt(top * (n + m + 1) / 12) / std::sqrt(2.0));
        QVERIFY2(std::abs(edge - normal) < 1e-3,
                 qPrintable(QString("exact %1, normal %2").arg(edge).arg(normal)));
    }

    void bad_samples_are_refused() {
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, ratio_interval({}, {1.0}, 0.95));
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, ratio_interval({0.0, 1.0}, {1.0}, 0.95));
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                                 paired_ratio_interval({1.0, 2.0}, {1.0}, 0.95));
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                                 paired_ratio_interval({1.0, NAN}, {1.0, 2.0}, 0.95));
    }

    // The intervals' promise, by simulation: a 98% interval from 10 paired
    // rounds of lognormal runs covers the true ratio about 98% of the time.
    void paired_intervals_cover_the_true_ratio() {
        std::mt19937 rng(7);
        std::normal_distribution<double> drift(0, 0.2);
        std::normal_distribution<double> noise(0, 0.01);
        int covered = 0;
        constexpr int kTrials = 2000;
        for (int trial = 0; trial < kTrials; ++trial) {
            std::vector<double> base;
            std::vector<double> now;
            for (int round = 0; round < 10; ++round) {
                const double speed = std::exp(drift(rng));
                base.push_back(speed * std::exp(noise(rng)));
                now.push_back(1.05 * speed * std::exp(noise(rng)));
            }
            const RatioInterval r = paired_ratio_interval(base, now, 0.98);
            covered += r.low <= 1.05 && 1.05 <= r.high;
        }
        qInfo("covered %d of %d", covered, kTrials);
        QVERIFY(covered >= kTrials * 96 / 100);
    }
};

QTEST_GUILESS_MAIN(TestRankInterval)
#include "tst_rank_interval.moc"
