// What each step reports it cost (step_counters), on the tiny model: the
// engine thread's CPU time, hardware counters or the reason there are none,
// and the cache entries attention read, which must equal what the requests'
// lengths alone say; and the planted slowdown (--slow-down), which must cost
// CPU time as slower code would.
#include "engine/cpu/cpu_backend.h"
#include "engine/events/typed_events.h"
#include "engine/model/llama_model.h"
#include "engine/runner/throttled_backend.h"
#include "engine/sched/llm_engine.h"
#include "engine/util/cpu_clock.h"
#include "engine/util/perf_counters.h"
#include "tests/support/tiny_model.h"

#include <numeric>
#include <vector>

#include <QTest>

using namespace kvscope;

namespace {

struct Collected : events::EventSink {
    std::vector<events::EngineEvent> events;
    void on_event(const events::EngineEvent& event) override { events.push_back(event); }
};

// Sums the CPU time the backend's ops report.
struct OpCpu : runner::OpObserver {
    std::int64_t cpu_ns = 0;
    int ops = 0;
    void on_op(std::string_view, int, std::int64_t, std::int64_t, std::int64_t cpu) override {
        cpu_ns += cpu;
        ++ops;
    }
};

cpu::CpuBackendOptions one_thread() {
    cpu::CpuBackendOptions options;
    options.num_blocks = 64;
    options.block_size = 4;
    options.threads = 1;
    return options;
}

} // namespace

class TestStepCounters : public QObject {
    Q_OBJECT

private slots:
    void every_step_reports_its_cost() {
        const auto model = model::LlamaModel::load(tiny_model_path());
        cpu::CpuBackend backend(model, one_thread());
        Collected sink;
        sched::LlmEngine engine(backend, sched::EngineConfig{}, &sink);
        // Prompts of 9 and 5 distinct tokens (no prefix hits), 4 tokens each.
        const std::vector<std::pair<int, int>> requests = {{9, 4}, {5, 4}};
        std::int32_t next_token = 3;
        for (const auto& [prompt, generate] : requests) {
            sched::RequestSpec spec;
            spec.prompt.resize(static_cast<std::size_t>(prompt));
            std::iota(spec.prompt.begin(), spec.prompt.end(), next_token);
            next_token += prompt;
            spec.max_tokens = generate;
            spec.ignore_eos = true;
            spec.sampling.temperature = 0;
            engine.add_request(spec);
        }
        while (engine.has_unfinished()) {
            engine.step();
        }

        // The token at position p attends p + 1 entries; a request computes
        // its prompt and every generated token but the last.
        std::int64_t expected_reads = 0;
        for (const auto& [prompt, generate] : requests) {
            const std::int64_t computed = prompt + generate - 1;
            expected_reads += computed * (computed + 1) / 2;
        }
        std::int64_t reads = 0;
        int steps = 0;
        const bool counted = perf_counters_unavailable_reason().empty();
        for (std::size_t i = 0; i < sink.events.size(); ++i) {
            if (sink.events[i].kind != events::EventKind::step_end) {
                continue;
            }
            ++steps;
            QVERIFY2(i > 0 && sink.events[i - 1].kind == events::EventKind::step_counters,
                     "each step_end follows its step_counters");
            const auto cost = events::as<events::StepCounters>(sink.events[i - 1]);
            QVERIFY(cost.cpu_ns > 0);
            reads += cost.kv_entries_read;
            if (counted) {
                QVERIFY(cost.instructions > 0);
                QVERIFY(cost.cycles > 0);
            } else {
                QCOMPARE(cost.instructions, std::int64_t{-1});
                QCOMPARE(cost.cycles, std::int64_t{-1});
            }
        }
        QCOMPARE(steps, static_cast<int>(engine.steps()));
        QCOMPARE(reads, expected_reads);
        if (!counted) {
            qInfo("hardware counters: %s", perf_counters_unavailable_reason().c_str());
        }
    }

    void unavailable_counters_say_why() {
        const ThreadPerfCounters counters;
        if (counters.available()) {
            QVERIFY(counters.unavailable_reason().empty());
            const CounterReading before = counters.read();
            spin_thread_cpu_ns(5'000'000);
            const CounterReading after = counters.read();
            QVERIFY(after.instructions > before.instructions);
            QVERIFY(after.cycles > before.cycles);
        } else {
            QVERIFY(counters.unavailable_reason().find("perf_event_open") != std::string::npos);
            QCOMPARE(counters.read().instructions, std::int64_t{-1});
        }
    }

    // A forward pass through --slow-down 50 costs at least half as much CPU
    // time again as its ops did (the spin is measured on the same clock, so
    // this holds however busy the machine is).
    void planted_slowdown_costs_cpu_time() {
        const auto model = model::LlamaModel::load(tiny_model_path());
        auto inner = std::make_unique<cpu::CpuBackend>(model, one_thread());
        runner::ThrottledBackend slowed(std::move(inner), 0, 50);
        OpCpu ops;
        slowed.set_op_observer(&ops);
        kv::SequenceBlocks blocks;
        blocks.block_table = {0, 1};
        std::vector<std::int32_t> tokens = {5, 6, 7, 8, 9, 10};
        const runner::SequenceStep step{&blocks, tokens, false, false};
        const runner::ForwardBatch batch =
            runner::build_forward_batch(std::span(&step, 1), slowed.block_size());
        std::vector<float> logits(static_cast<std::size_t>(slowed.vocab_size()));
        const std::int64_t start = thread_cpu_ns();
        slowed.forward(batch, logits.data());
        const std::int64_t spent = thread_cpu_ns() - start;
        QVERIFY(ops.ops > 0);
        QVERIFY2(
            spent >= ops.cpu_ns * 3 / 2,
            qPrintable(
                QString("forward %1 us, its ops %2 us").arg(spent / 1000).arg(ops.cpu_ns / 1000)));
    }
};

QTEST_GUILESS_MAIN(TestStepCounters)
#include "tst_step_counters.moc"
