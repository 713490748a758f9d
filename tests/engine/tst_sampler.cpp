// The sampler: greedy picks the argmax; random sampling follows the softmax
// of logits / temperature after the filters (checked by frequency over many
// draws); filters keep exactly the tokens they should; seeds repeat.
#include "engine/sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <vector>

#include <QTest>

using kvscope::sampling::greedy_token;
using kvscope::sampling::Sampler;
using kvscope::sampling::SamplingParams;

namespace {

SamplingParams plain(float temperature) {
    SamplingParams p;
    p.temperature = temperature;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.seed = 1234;
    return p;
}

std::vector<float> logits_for(const std::vector<double>& probs) {
    std::vector<float> logits;
    for (double p : probs) {
        logits.push_back(static_cast<float>(std::log(p)));
    }
    return logits;
}

std::map<int, double> frequencies(Sampler& sampler, const std::vector<float>& logits, int draws) {
    std::map<int, double> counts;
    for (int i = 0; i < draws; ++i) {
        counts[sampler.sample(logits, {})] += 1.0 / draws;
    }
    return counts;
}

} // namespace

class TestSampler : public QObject {
    Q_OBJECT

private slots:
    void greedy_is_argmax_lowest_id_on_ties();
    void greedy_token_is_the_sorted_candidates_first();
    void follows_softmax_at_temperature_data();
    void follows_softmax_at_temperature();
    void top_k_top_p_min_p_keep_the_right_tokens_data();
    void top_k_top_p_min_p_keep_the_right_tokens();
    void top_k_top_p_follow_the_renormalised_distribution_data();
    void top_k_top_p_follow_the_renormalised_distribution();
    void same_seed_same_tokens();
    void repetition_penalty_discourages_recent_tokens();
    void invalid_parameters_are_explained();
    void pick_token_inverts_the_distribution();
};

void TestSampler::greedy_is_argmax_lowest_id_on_ties() {
    Sampler sampler(plain(0.0f));
    QCOMPARE(sampler.sample(std::vector<float>{0.1f, 2.0f, -1.0f, 1.9f}, {}), 1);
    QCOMPARE(sampler.sample(std::vector<float>{3.0f, 1.0f, 3.0f}, {}), 0);
}

void TestSampler::greedy_token_is_the_sorted_candidates_first() {
    // greedy_token scans the logits in lanes; the rule it must keep is the
    // candidates' order (descending logit, lower id first; a comparison with
    // NaN is false, so a NaN never wins and a NaN first logit stays first).
    const auto by_sort = [](const std::vector<float>& logits) {
        std::vector<std::pair<float, std::int32_t>> candidates;
        for (std::size_t i = 0; i < logits.size(); ++i) {
            candidates.emplace_back(logits[i], static_cast<std::int32_t>(i));
        }
        return std::min_element(candidates.begin(), candidates.end(),
                                [](const auto& a, const auto& b) {
                                    return a.first > b.first ||
                                           (a.first == b.first && a.second < b.second);
                                })
            ->second;
    };
    std::mt19937 rng(9);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const float inf = std::numeric_limits<float>::infinity();
    for (const std::size_t n : {1, 2, 15, 16, 17, 33, 1000, 262144}) {
        for (int trial = 0; trial < 20; ++trial) {
            // Few distinct values, so ties are common; some NaNs and infinities.
            std::uniform_int_distribution<int> value(-4, 4);
            std::vector<float> logits(n);
            for (float& x : logits) {
                x = static_cast<float>(value(rng));
            }
            std::uniform_int_distribution<std::size_t> at(0, n - 1);
            if (trial % 4 == 1) {
                logits[at(rng)] = nan;
            } else if (trial % 4 == 2) {
                std::fill(logits.begin(), logits.end(), -inf);
                logits[at(rng)] = nan;
            } else if (trial % 4 == 3) {
                logits[0] = nan;
            }
            if (trial == 8) {
                logits[at(rng)] = inf;
            }
            QCOMPARE(greedy_token(logits), by_sort(logits));
            QCOMPARE(Sampler(plain(0.0f)).sample(logits, {}), by_sort(logits));
        }
        // The only maximum in the lanes' remainder, then +inf past a number.
        std::vector<float> logits(n, 1.0f);
        logits[n - 1] = 2.0f;
        QCOMPARE(greedy_token(logits), static_cast<std::int32_t>(n - 1));
        logits[n / 2] = inf;
        QCOMPARE(greedy_token(logits), by_sort(logits));
    }
    QCOMPARE(greedy_token(std::vector<float>{-0.0f, 0.0f}), 0);
    QCOMPARE(greedy_token(std::vector<float>{-inf, -inf, -inf}), 0);
    QCOMPARE(greedy_token(std::vector<float>{}), 0);
}

void TestSampler::follows_softmax_at_temperature_data() {
    QTest::addColumn<float>("temperature");
    QTest::newRow("T=1") << 1.0f;
    QTest::newRow("T=0.5") << 0.5f;
    QTest::newRow("T=2") << 2.0f;
}

void TestSampler::follows_softmax_at_temperature() {
    QFETCH(float, temperature);
    const std::vector<float> logits{1.0f, 0.5f, 0.0f, -0.5f, -2.0f};
    double norm = 0;
    std::vector<double> expected;
    for (float l : logits) {
        expected.push_back(std::exp(l / temperature));
        norm += expected.back();
    }
    Sampler sampler(plain(temperature));
    const auto freq = frequencies(sampler, logits, 200000);
    for (std::size_t i = 0; i < logits.size(); ++i) {
        const double p = expected[i] / norm;
        const double seen = freq.count(static_cast<int>(i)) ? freq.at(static_cast<int>(i)) : 0.0;
        // 200k draws: the standard error is below 0.0012; allow 4 of them.
        QVERIFY2(std::abs(seen - p) < 0.005,
                 qPrintable(QString("token %1: %2 vs %3").arg(i).arg(seen).arg(p)));
    }
}

void TestSampler::top_k_top_p_min_p_keep_the_right_tokens_data() {
    QTest::addColumn<int>("top_k");
    QTest::addColumn<float>("top_p");
    QTest::addColumn<float>("min_p");
    QTest::addColumn<QList<int>>("allowed");
    // Probabilities 0.5, 0.3, 0.15, 0.05.
    QTest::newRow("top-k 2") << 2 << 1.0f << 0.0f << QList<int>{0, 1};
    QTest::newRow("top-p 0.79") << 0 << 0.79f << 0.0f << QList<int>{0, 1};
    QTest::newRow("top-p 0.81") << 0 << 0.81f << 0.0f << QList<int>{0, 1, 2};
    QTest::newRow("min-p 0.35") << 0 << 1.0f << 0.35f << QList<int>{0, 1};
    QTest::newRow("min-p 0.2") << 0 << 1.0f << 0.2f << QList<int>{0, 1, 2};
    QTest::newRow("top-k 1") << 1 << 1.0f << 0.0f << QList<int>{0};
    QTest::newRow("all") << 0 << 1.0f << 0.0f << QList<int>{0, 1, 2, 3};
}

void TestSampler::top_k_top_p_min_p_keep_the_right_tokens() {
    QFETCH(int, top_k);
    QFETCH(float, top_p);
    QFETCH(float, min_p);
    QFETCH(QList<int>, allowed);
    SamplingParams p = plain(1.0f);
    p.top_k = top_k;
    p.top_p = top_p;
    p.min_p = min_p;
    Sampler sampler(p);
    const auto freq = frequencies(sampler, logits_for({0.5, 0.3, 0.15, 0.05}), 20000);
    QList<int> seen;
    for (const auto& [token, f] : freq) {
        seen << token;
    }
    QCOMPARE(seen, allowed);
}

void TestSampler::top_k_top_p_follow_the_renormalised_distribution_data() {
    QTest::addColumn<int>("top_k");
    QTest::addColumn<float>("top_p");
    QTest::addColumn<float>("temperature");
    QTest::addColumn<std::vector<double>>("expected"); // per token id, 0: never drawn
    // Probabilities by token id 0..7: 0.30, 0.05, 0.20, 0.15, 0.10, 0.12, 0.03,
    // 0.05 (in descending order: ids 0, 2, 3, 5, 4, then 1 and 7, then 6).
    // Top-k 3 keeps ids 0, 2, 3, together 0.65.
    QTest::newRow("top-k 3") << 3 << 1.0f << 1.0f
                             << std::vector<double>{0.30 / 0.65, 0, 0.20 / 0.65, 0.15 / 0.65,
                                                    0,           0, 0,           0};
    // Top-p 0.7: running sums 0.30, 0.50, 0.65, 0.77: ids 0, 2, 3, 5 (0.77).
    QTest::newRow("top-p 0.7") << 0 << 0.7f << 1.0f
                               << std::vector<double>{0.30 / 0.77, 0, 0.20 / 0.77,
                                                      0.15 / 0.77, 0, 0.12 / 0.77,
                                                      0,           0};
    // Top-k 5 first (0.87 in all), then top-p 0.8 on the renormalised five:
    // 0.345, 0.575, 0.747, 0.885: ids 0, 2, 3, 5. (Top-p 0.8 on the whole
    // distribution would keep id 4 too.) Temperature 0.5 last squares the
    // kept probabilities: 0.09, 0.04, 0.0225, 0.0144, together 0.1669.
    QTest::newRow("top-k 5, top-p 0.8, T=0.5")
        << 5 << 0.8f << 0.5f
        << std::vector<double>{
               0.09 / 0.1669, 0, 0.04 / 0.1669, 0.0225 / 0.1669, 0, 0.0144 / 0.1669, 0, 0};
}

void TestSampler::top_k_top_p_follow_the_renormalised_distribution() {
    QFETCH(int, top_k);
    QFETCH(float, top_p);
    QFETCH(float, temperature);
    QFETCH(std::vector<double>, expected);
    SamplingParams p = plain(temperature);
    p.top_k = top_k;
    p.top_p = top_p;
    Sampler sampler(p);
    constexpr int kDraws = 200000;
    const auto freq =
        frequencies(sampler, logits_for({0.30, 0.05, 0.20, 0.15, 0.10, 0.12, 0.03, 0.05}), kDraws);
    for (const auto& [token, f] : freq) {
        QVERIFY2(token >= 0 && token < static_cast<int>(expected.size()) &&
                     expected[static_cast<std::size_t>(token)] > 0,
                 qPrintable(QString("token %1 was drawn %2 times but is filtered out")
                                .arg(token)
                                .arg(f * kDraws)));
    }
    for (std::size_t i = 0; i < expected.size(); ++i) {
        const double want = expected[i];
        const double seen = freq.count(static_cast<int>(i)) ? freq.at(static_cast<int>(i)) : 0.0;
        // Binomial standard error of the frequency; allow 5 of them
        // (under 0.006 here: far below any token's share or the gaps between
        // the distributions a wrong filter order would give).
        const double error = std::sqrt(want * (1 - want) / kDraws);
        QVERIFY2(std::abs(seen - want) <= 5 * error,
                 qPrintable(QString("token %1: drawn %2, expected %3 (standard error %4)")
                                .arg(i)
                                .arg(seen)
                                .arg(want)
                                .arg(error)));
    }
}

void TestSampler::same_seed_same_tokens() {
    const std::vector<float> logits{0.3f, 0.2f, 0.1f, 0.0f, -0.1f, -0.2f};
    const auto draw = [&](std::uint64_t seed) {
        SamplingParams p = plain(1.0f);
        p.seed = seed;
        Sampler sampler(p);
        std::vector<int> out;
        for (int i = 0; i < 64; ++i) {
            out.push_back(sampler.sample(logits, {}));
        }
        return out;
    };
    QCOMPARE(draw(7), draw(7));
    QVERIFY(draw(7) != draw(8));
}

void TestSampler::repetition_penalty_discourages_recent_tokens() {
    SamplingParams p = plain(0.0f);
    p.repetition_penalty = 1.5f;
    p.repetition_window = 2;
    Sampler sampler(p);
    const std::vector<float> logits{2.0f, 1.5f, -1.0f};
    // Token 0 (2.0 / 1.5 = 1.33) drops below token 1.
    const std::vector<std::int32_t> history{0};
    QCOMPARE(sampler.sample(logits, history), 1);
    // Outside the window it is not penalised.
    const std::vector<std::int32_t> old{0, 2, 2};
    QCOMPARE(sampler.sample(logits, old), 0);
}

void TestSampler::invalid_parameters_are_explained() {
    SamplingParams p;
    QVERIFY(p.problem().empty());
    p.top_p = 0.0f;
    QVERIFY(QString::fromStdString(p.problem()).contains("top-p"));
    p = {};
    p.min_p = 2.0f;
    QVERIFY(QString::fromStdString(p.problem()).contains("min-p"));
    p = {};
    p.repetition_penalty = 0.0f;
    QVERIFY(QString::fromStdString(p.problem()).contains("repetition"));
}

// The rule the CUDA sampler shares: candidates by descending logit (ties:
// lower id first), the first whose cumulative weight reaches u of the total.
void TestSampler::pick_token_inverts_the_distribution() {
    const std::vector<float> logits{0.0f, std::log(2.0f), 0.0f}; // weights 1, 2, 1
    SamplingParams p;
    p.temperature = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    QCOMPARE(pick_token(logits, p, 0.0), 1);
    QCOMPARE(pick_token(logits, p, 0.49), 1);
    QCOMPARE(pick_token(logits, p, 0.51), 0);
    QCOMPARE(pick_token(logits, p, 0.74), 0);
    QCOMPARE(pick_token(logits, p, 0.76), 2);
    QCOMPARE(pick_token(logits, p, 0.999999), 2);
    p.top_k = 2; // id 2 is cut: weights 2, 1 over ids 1, 0
    QCOMPARE(pick_token(logits, p, 0.7), 0);
    QCOMPARE(pick_token(logits, p, 0.99), 0);
    p.temperature = 0.0f; // greedy ignores u
    QCOMPARE(pick_token(logits, p, 0.99), 1);
}

QTEST_GUILESS_MAIN(TestSampler)
#include "tst_sampler.moc"
