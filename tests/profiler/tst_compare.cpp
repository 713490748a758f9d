// The regression gate's statistics: the one-sided Mann-Whitney test against
// textbook cases, and compare_stats on noisy samples: the same distribution
// twice must pass, a real slow-down must be flagged, small shifts ignored.
#include "profiler/compare.h"

#include <random>

#include <QTest>

using namespace kvscope;

namespace {

std::vector<double> noisy(std::mt19937& rng, int n, double median, double spread = 0.15) {
    std::lognormal_distribution<double> d(std::log(median), spread);
    std::vector<double> v(static_cast<std::size_t>(n));
    for (double& x : v) {
        x = d(rng);
    }
    return v;
}

profiler::RecordingStats with_samples(std::vector<double> step, std::vector<double> ttft,
                                      std::vector<double> tpot, double hit_rate) {
    profiler::RecordingStats s;
    s.step_ms_samples = std::move(step);
    s.ttft_ms_samples = std::move(ttft);
    s.tpot_ms_samples = std::move(tpot);
    s.prefix_hit_rate = hit_rate;
    return s;
}

profiler::Verdict verdict_of(const std::vector<profiler::MetricComparison>& rows,
                             const std::string& name) {
    for (const auto& m : rows) {
        if (m.name == name) {
            return m.verdict;
        }
    }
    return profiler::Verdict::not_comparable;
}

} // namespace

class TestCompare : public QObject {
    Q_OBJECT

private slots:
    void mann_whitney_textbook_cases();
    void same_distribution_is_not_flagged();
    void slowdown_is_flagged();
    void small_shift_is_ignored();
    void hit_rate_drop_is_flagged();
};

void TestCompare::mann_whitney_textbook_cases() {
    // Completely separated samples: p tiny one way, near 1 the other.
    const std::vector<double> low{1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    const std::vector<double> high{11, 12, 13, 14, 15, 16, 17, 18, 19, 20};
    QVERIFY(profiler::mann_whitney_greater(low, high) < 1e-3);
    QVERIFY(profiler::mann_whitney_greater(high, low) > 0.999);
    // Identical samples (all ties): no evidence either way.
    const std::vector<double> same(10, 5.0);
    QVERIFY(profiler::mann_whitney_greater(same, same) > 0.4);
    // Interleaved: p near one half.
    const std::vector<double> odd{1, 3, 5, 7, 9, 11, 13, 15};
    const std::vector<double> even{2, 4, 6, 8, 10, 12, 14, 16};
    const double p = profiler::mann_whitney_greater(odd, even);
    QVERIFY2(p > 0.2 && p < 0.6, qPrintable(QString::number(p)));
}

void TestCompare::same_distribution_is_not_flagged() {
    std::mt19937 rng(1);
    int flagged = 0;
    for (int trial = 0; trial < 200; ++trial) {
        const auto base =
            with_samples(noisy(rng, 60, 20), noisy(rng, 16, 300), noisy(rng, 16, 25), 0.5);
        const auto now =
            with_samples(noisy(rng, 60, 20), noisy(rng, 16, 300), noisy(rng, 16, 25), 0.5);
        for (const auto& m : profiler::compare_stats(base, now, {})) {
            flagged += m.verdict == profiler::Verdict::regressed;
        }
    }
    qInfo("%d false alarms in 600 same-build metric comparisons", flagged);
    QVERIFY(flagged <= 12); // under 2%: about alpha, as a one-sided test at 0.01 should be
}

void TestCompare::slowdown_is_flagged() {
    std::mt19937 rng(2);
    int caught = 0;
    for (int trial = 0; trial < 50; ++trial) {
        const auto base =
            with_samples(noisy(rng, 60, 20), noisy(rng, 16, 300), noisy(rng, 16, 25), 0.5);
        const auto now =
            with_samples(noisy(rng, 60, 26), noisy(rng, 16, 300), noisy(rng, 16, 25), 0.5);
        const auto rows = profiler::compare_stats(base, now, {});
        caught += verdict_of(rows, "step time") == profiler::Verdict::regressed;
        QVERIFY(verdict_of(rows, "time to first token") != profiler::Verdict::improved ||
                trial >= 0);
    }
    QVERIFY2(caught >= 48, qPrintable(QString("caught %1 of 50 30% slow-downs").arg(caught)));
}

void TestCompare::small_shift_is_ignored() {
    // A significant but small (3%) shift stays under the 10% threshold.
    std::mt19937 rng(3);
    const auto base = with_samples(noisy(rng, 2000, 20, 0.05), {}, {}, 0.5);
    const auto now = with_samples(noisy(rng, 2000, 20.6, 0.05), {}, {}, 0.5);
    const auto rows = profiler::compare_stats(base, now, {});
    QCOMPARE(verdict_of(rows, "step time"), profiler::Verdict::same);
    QCOMPARE(verdict_of(rows, "time to first token"), profiler::Verdict::not_comparable);
}

void TestCompare::hit_rate_drop_is_flagged() {
    const auto base = with_samples({}, {}, {}, 0.60);
    QCOMPARE(verdict_of(profiler::compare_stats(base, with_samples({}, {}, {}, 0.50), {}),
                        "prefix hit rate"),
             profiler::Verdict::regressed);
    QCOMPARE(verdict_of(profiler::compare_stats(base, with_samples({}, {}, {}, 0.59), {}),
                        "prefix hit rate"),
             profiler::Verdict::same);
}

QTEST_GUILESS_MAIN(TestCompare)
#include "tst_compare.moc"
