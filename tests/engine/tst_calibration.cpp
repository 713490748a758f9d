// kvscope simulate --calibrate's parts: the least-squares fit recovers a
// known cost model from exact step times and keeps every coefficient
// non-negative; timing steps on a real CPU backend (the tiny random-weight
// model) gives the planned shapes, counted as the simulated clock counts
// them, and a fit that accounts for the measured time.
#include "engine/session/backend_factory.h"
#include "engine/session/model_loading.h"
#include "engine/sim/calibration.h"
#include "tests/support/tiny_model.h"

#include <QTest>

using namespace kvscope;
using namespace kvscope::sim;

namespace {

std::vector<MeasuredStep> steps_of(const CostModel& model) {
    std::vector<MeasuredStep> steps;
    for (const long long prefill : {0LL, 32LL, 300LL, 2000LL}) {
        for (const long long decode : {0LL, 1LL, 8LL, 64LL}) {
            for (const long long read : {100LL, 5000LL, 90000LL}) {
                const StepWork work{prefill, decode, read};
                steps.push_back({work, model.seconds(work)});
            }
        }
    }
    return steps;
}

} // namespace

class TestCalibration : public QObject {
    Q_OBJECT

private slots:
    void fitRecoversAKnownModel() {
        CostModel truth;
        truth.step_s = 0.004;
        truth.prefill_token_s = 3e-5;
        truth.decode_sequence_s = 2e-4;
        truth.kv_token_read_s = 7e-8;
        const CostModel fit = fit_cost_model(steps_of(truth), "test");
        QCOMPARE(fit.source, std::string("test"));
        const auto close = [](double a, double b) {
            return std::abs(a - b) <= 1e-6 * b;
        };
        QVERIFY2(close(fit.step_s, truth.step_s), qPrintable(QString::number(fit.step_s)));
        QVERIFY(close(fit.prefill_token_s, truth.prefill_token_s));
        QVERIFY(close(fit.decode_sequence_s, truth.decode_sequence_s));
        QVERIFY(close(fit.kv_token_read_s, truth.kv_token_read_s));
    }

    void fitNeverGoesNegative() {
        // Times that fall as KV reads grow: the best unconstrained fit has a
        // negative read cost; the fit holds it at 0 and fits the rest.
        std::vector<MeasuredStep> steps;
        for (int i = 0; i < 12; ++i) {
            const StepWork work{100LL * i, i % 3, 1000LL * (12 - i)};
            steps.push_back({work, 0.002 + 1e-5 * 100 * i});
        }
        const CostModel fit = fit_cost_model(steps, "test");
        QVERIFY(fit.step_s >= 0 && fit.prefill_token_s >= 0 && fit.decode_sequence_s >= 0 &&
                fit.kv_token_read_s >= 0);
        QCOMPARE(fit.kv_token_read_s, 0.0);
        QVERIFY(fit.prefill_token_s > 0);
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                                 fit_cost_model(std::span(steps).first(3), "few"));
    }

    void measuresARealBackend() {
        const auto model = session::load_model(tiny_model_path());
        CalibrationPlan plan;
        plan.prefill_tokens = {16, 64};
        plan.decode_batches = {1, 4};
        plan.decode_contexts = {16, 48};
        plan.repeats = 2;
        const std::int64_t tokens = calibration_tokens(plan, 16);
        const auto backend = session::make_backend(
            {.kind = session::BackendKind::cpu, .threads = 1, .throttle_ms = 0}, model,
            {.block_size = 16, .num_blocks = static_cast<int>(tokens / 16), .format = {}});
        std::vector<std::string> said;
        const std::vector<MeasuredStep> steps =
            measure_steps(*backend, plan, [&](const std::string& what) { said.push_back(what); });
        QCOMPARE(steps.size(), std::size_t{2 * 2 + 2 * 2 * 2});
        QCOMPARE(said.size(), std::size_t{2 + 4});
        QCOMPARE(steps[0].work.prefill_tokens, 16LL);
        QCOMPARE(steps[0].work.decode_sequences, 0LL);
        QCOMPARE(steps[2].work.prefill_tokens, 64LL);
        // Decode: 4 sequences at context 48, the second repeat (49 + 1 cached
        // tokens after it each).
        const MeasuredStep& last = steps.back();
        QCOMPARE(last.work.decode_sequences, 4LL);
        QCOMPARE(last.work.prefill_tokens, 0LL);
        QCOMPARE(last.work.kv_tokens_read, 4LL * 50);
        double measured = 0;
        for (const MeasuredStep& s : steps) {
            QVERIFY(s.seconds > 0);
            measured += s.seconds;
        }
        const CostModel fit = fit_cost_model(steps, "tiny model");
        double predicted = 0;
        for (const MeasuredStep& s : steps) {
            predicted += fit.seconds(s.work);
        }
        // Least squares with an intercept matches the total unless a
        // coefficient was held at 0; either way it is of the same size.
        QVERIFY2(predicted > 0.5 * measured && predicted < 2 * measured,
                 qPrintable(QString("%1 predicted, %2 measured").arg(predicted).arg(measured)));

        const auto small = session::make_backend(
            {.kind = session::BackendKind::cpu, .threads = 1, .throttle_ms = 0}, model,
            {.block_size = 16, .num_blocks = 2, .format = {}});
        QVERIFY_THROWS_EXCEPTION(std::runtime_error, measure_steps(*small, plan));
    }
};

QTEST_GUILESS_MAIN(TestCalibration)
#include "tst_calibration.moc"
