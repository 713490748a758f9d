// The serving loop on the real model with every KV format and eviction
// policy: random arrivals into a tiny pool (so preemption, prefix sharing and
// compaction all happen), the invariants after every step, and nothing left
// behind at the end, KIVI's open full-precision blocks included.
#include "engine/cpu/cpu_backend.h"
#include "engine/model/llama_model.h"
#include "engine/sched/llm_engine.h"
#include "tests/support/golden.h"

#include <random>

#include <QTest>

using namespace kvscope;

Q_DECLARE_METATYPE(kvscope::kv::KvFormat)
Q_DECLARE_METATYPE(kvscope::kv::EvictionKind)

class TestEngineFormats : public QObject {
    Q_OBJECT

private slots:
    void initTestCase();
    void serves_with_every_format_and_policy_data();
    void serves_with_every_format_and_policy();

private:
    std::shared_ptr<const model::LlamaModel> model_;
};

void TestEngineFormats::initTestCase() {
    const QJsonObject golden = test::load_golden();
    if (const QString problem = test::golden_model_problem(golden); !problem.isEmpty()) {
        QSKIP(qPrintable("needs the SmolLM2 model: " + problem));
    }
    model_ = model::LlamaModel::load(test::golden_model_path());
}

void TestEngineFormats::serves_with_every_format_and_policy_data() {
    QTest::addColumn<kv::KvFormat>("format");
    QTest::addColumn<kv::EvictionKind>("eviction");
    for (const kv::KvFormat format : kv::all_kv_formats()) {
        QTest::newRow(kv::kv_format_name(format).data()) << format << kv::EvictionKind::none;
    }
    QTest::newRow("kivi4 + h2o") << kv::KvFormat::kivi4 << kv::EvictionKind::h2o;
    QTest::newRow("kivi2 + window") << kv::KvFormat::kivi2 << kv::EvictionKind::window;
    QTest::newRow("q8_0 + streaming") << kv::KvFormat::q8_0 << kv::EvictionKind::streaming;
    QTest::newRow("f16 + snapkv") << kv::KvFormat::f16 << kv::EvictionKind::snapkv;
}

void TestEngineFormats::serves_with_every_format_and_policy() {
    QFETCH(kv::KvFormat, format);
    QFETCH(kv::EvictionKind, eviction);
    cpu::CpuBackendOptions options;
    options.block_size = 4;
    options.num_blocks = 24;
    options.cache_format = {format, format};
    cpu::CpuBackend backend(model_, options);
    sched::EngineConfig config;
    config.scheduler.max_num_batched_tokens = 32;
    config.scheduler.max_num_seqs = 4;
    config.eviction.kind = eviction;
    config.eviction.budget = 16;
    config.eviction.sink_tokens = 2;
    config.eviction.snapkv_window = 4;
    config.eviction.snapkv_pool = 3;
    sched::LlmEngine engine(backend, config);

    std::mt19937 rng(42);
    const std::vector<std::int32_t> shared{504, 3458, 314, 253, 2053, 28, 4632, 30, 346};
    int submitted = 0;
    for (int step = 0; step < 60 || engine.has_unfinished(); ++step) {
        QVERIFY2(step < 400, "requests stuck");
        if (step < 60 && std::uniform_int_distribution<int>(0, 2)(rng) == 0) {
            sched::RequestSpec spec;
            spec.prompt = shared;
            const int extra = std::uniform_int_distribution<int>(1, 24)(rng);
            for (int i = 0; i < extra; ++i) {
                spec.prompt.push_back(std::uniform_int_distribution<std::int32_t>(100, 40000)(rng));
            }
            spec.max_tokens = std::uniform_int_distribution<int>(1, 12)(rng);
            spec.sampling.temperature = 0;
            engine.add_request(spec);
            ++submitted;
        }
        if (step == 30 && engine.has_unfinished()) {
            engine.abort(engine.request_ids().back());
        }
        engine.step();
        const std::string problem = engine.check_invariants();
        QVERIFY2(problem.empty(),
                 qPrintable(QString("step %1: %2").arg(step).arg(problem.c_str())));
    }
    std::int64_t evicted = 0;
    for (const std::int64_t id : engine.request_ids()) {
        QVERIFY(engine.request(id).is_done());
        evicted += engine.request(id).accounting.evicted_tokens;
    }
    QCOMPARE(engine.kv().stats().used, 0);
    QCOMPARE(backend.kv_store().open_block_count(), std::size_t{0}); // no KIVI leftovers
    if (eviction != kv::EvictionKind::none) {
        QVERIFY2(evicted > 0, "the policy never evicted");
    }
    qInfo("%d requests, %lld tokens evicted, %lld steps", submitted,
          static_cast<long long>(evicted), static_cast<long long>(engine.steps()));
}

QTEST_GUILESS_MAIN(TestEngineFormats)
#include "tst_engine_formats.moc"
