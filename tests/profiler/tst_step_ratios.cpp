// Each round's median step ratio, for a gate's rounds recorded in step:
// medians worked by hand (odd and even step counts), a step one side took far
// slower leaving the median alone, and rounds that do not pair up or hold a
// cost that is not a time refused.
#include "profiler/gate/step_ratios.h"

#include <cmath>
#include <limits>

#include <QTest>

using kvscope::profiler::round_step_ratios;
using Runs = std::vector<std::vector<double>>;

class TestStepRatios : public QObject {
    Q_OBJECT

private slots:
    void medians_by_hand();
    void one_slow_step_leaves_the_median();
    void refuses_what_does_not_pair();
};

void TestStepRatios::medians_by_hand() {
    // Round 1: ratios 2, 1.1, 1 -> median 1.1. Round 2: ratios 0.5, 1, 1.25,
    // 4 -> the geometric middle of 1 and 1.25, sqrt(1.25).
    const Runs base = {{10, 10, 20}, {4, 10, 8, 1}};
    const Runs now = {{20, 11, 20}, {2, 10, 10, 4}};
    const auto ratios = round_step_ratios(base, now);
    QVERIFY(ratios.has_value());
    QCOMPARE(ratios->size(), std::size_t{2});
    QVERIFY(std::abs((*ratios)[0] - 1.1) < 1e-12);
    QVERIFY(std::abs((*ratios)[1] - std::sqrt(1.25)) < 1e-12);
    // Step i of one build is paired with step i of the other, not with the
    // step of the same rank: ratios 0.2, 2, 2 -> 2 (sorted pairs would give
    // 1, 2, 0.4 -> 1).
    const auto by_step = round_step_ratios(Runs{{5, 1, 1}}, Runs{{1, 2, 2}});
    QVERIFY(by_step.has_value());
    QVERIFY(std::abs(by_step->front() - 2) < 1e-12);
    // The same runs on both sides: every ratio exactly 1.
    const auto same = round_step_ratios(base, base);
    QVERIFY(same.has_value());
    for (const double r : *same) {
        QCOMPARE(r, 1.0);
    }
}

void TestStepRatios::one_slow_step_leaves_the_median() {
    // 21 steps 5% slower on the new side, but an interrupt made one of the
    // base's steps ten times slower: the round's total says the new build is
    // faster, its median step ratio still 1.05.
    std::vector<double> base(21, 10.0);
    std::vector<double> now(21, 10.5);
    base[7] = 100;
    double base_total = 0;
    double new_total = 0;
    for (std::size_t i = 0; i < base.size(); ++i) {
        base_total += base[i];
        new_total += now[i];
    }
    QVERIFY(new_total < base_total);
    const auto ratios = round_step_ratios(Runs{base}, Runs{now});
    QVERIFY(ratios.has_value());
    QVERIFY(std::abs(ratios->front() - 1.05) < 1e-12);
}

void TestStepRatios::refuses_what_does_not_pair() {
    const Runs two = {{1, 2}, {1, 2}};
    QVERIFY(!round_step_ratios(two, Runs{{1, 2}}).has_value());            // rounds differ
    QVERIFY(!round_step_ratios(two, Runs{{1, 2}, {1, 2, 3}}).has_value()); // steps differ
    QVERIFY(!round_step_ratios(Runs{}, Runs{}).has_value());
    QVERIFY(!round_step_ratios(Runs{{}}, Runs{{}}).has_value());
    QVERIFY(!round_step_ratios(Runs{{1, 0}}, Runs{{1, 1}}).has_value());
    QVERIFY(!round_step_ratios(Runs{{1, 1}}, Runs{{1, -1}}).has_value());
    const double nan = std::numeric_limits<double>::quiet_NaN();
    QVERIFY(!round_step_ratios(Runs{{1, nan}}, Runs{{1, 1}}).has_value());
    const double inf = std::numeric_limits<double>::infinity();
    QVERIFY(!round_step_ratios(Runs{{1, 1}}, Runs{{inf, 1}}).has_value());
}

QTEST_GUILESS_MAIN(TestStepRatios)
#include "tst_step_ratios.moc"
