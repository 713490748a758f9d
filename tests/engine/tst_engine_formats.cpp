// The serving loop on the real model with every KV format and eviction
// policy: random arrivals into a tiny pool (preemption, prefix sharing and
// compaction all happen, and are checked to), the invariants after every
// step, and nothing left behind at the end, KIVI's open full-precision blocks
// included. With an f32 cache, the golden prompts served together through
// preemption and prefix sharing give transformers' greedy tokens.
#include "engine/cpu/cpu_backend.h"
#include "engine/model/llama_model.h"
#include "engine/sched/llm_engine.h"
#include "tests/support/golden.h"
#include "tests/support/sanitized_build.h"

#include <random>

#include <QJsonArray>
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
    void batched_greedy_matches_the_reference();

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
    // Requests arrive during the first 60 steps; under a sanitizer, which
    // slows the model five-fold, during the first 15 (still enough to fill
    // the pool, preempt and evict).
    const int arrival_steps = test::full_or_sanitized(60, 15);
    for (int step = 0; step < arrival_steps || engine.has_unfinished(); ++step) {
        QVERIFY2(step < 400, "requests stuck");
        if (step < arrival_steps && std::uniform_int_distribution<int>(0, 1)(rng) == 0) {
            sched::RequestSpec spec;
            spec.prompt = shared;
            const int extra = std::uniform_int_distribution<int>(1, 24)(rng);
            for (int i = 0; i < extra; ++i) {
                spec.prompt.push_back(std::uniform_int_distribution<std::int32_t>(100, 40000)(rng));
            }
            spec.max_tokens = std::uniform_int_distribution<int>(4, 24)(rng);
            spec.sampling.temperature = 0;
            engine.add_request(spec);
            ++submitted;
        }
        if (step == arrival_steps / 2 && engine.has_unfinished()) {
            engine.abort(engine.request_ids().back());
        }
        engine.step();
        const std::string problem = engine.check_invariants();
        QVERIFY2(problem.empty(),
                 qPrintable(QString("step %1: %2").arg(step).arg(problem.c_str())));
    }
    std::int64_t evicted = 0;
    std::int64_t preemptions = 0;
    std::int64_t hit_tokens = 0;
    for (const std::int64_t id : engine.request_ids()) {
        QVERIFY(engine.request(id).is_done());
        const sched::RequestAccounting& a = engine.request(id).accounting;
        evicted += a.evicted_tokens;
        preemptions += a.preemptions;
        hit_tokens += a.prefix_hit_tokens;
    }
    // What the header promises happened: the shared 9-token prefix fills two
    // 4-token blocks, and the pool is too small for four long requests.
    QVERIFY2(hit_tokens >= 8, "no request reused the shared prefix's blocks");
    if (eviction == kv::EvictionKind::none) {
        QVERIFY2(preemptions > 0, "the pool never ran out");
    }
    QCOMPARE(engine.kv().stats().used, 0);
    QCOMPARE(backend.kv_store().open_block_count(), std::size_t{0}); // no KIVI leftovers
    if (eviction != kv::EvictionKind::none) {
        QVERIFY2(evicted > 0, "the policy never evicted");
    }
    qInfo("%d requests, %lld prefix-hit tokens, %lld preemptions, %lld tokens evicted, %lld steps",
          submitted, static_cast<long long>(hit_tokens), static_cast<long long>(preemptions),
          static_cast<long long>(evicted), static_cast<long long>(engine.steps()));
}

void TestEngineFormats::batched_greedy_matches_the_reference() {
    // transformers' greedy tokens for the golden prompts, compared up to the
    // first step whose top-1 margin is a near-tie (test::greedy_mismatch).
    const QJsonArray cases = test::load_golden().value("greedy").toArray();
    QVERIFY(!cases.isEmpty());
    cpu::CpuBackendOptions options;
    options.block_size = 16;
    options.num_blocks = 16; // 256 tokens for three ~105-token sequences
    options.cache_format = {kv::KvFormat::f32, kv::KvFormat::f32};
    cpu::CpuBackend backend(model_, options);
    sched::EngineConfig config;
    config.scheduler.max_num_batched_tokens = 48; // prompts prefill in chunks
    sched::LlmEngine engine(backend, config);
    const auto ids_of = [](const QJsonValue& value) {
        std::vector<std::int32_t> ids;
        for (const QJsonValue& v : value.toArray()) {
            ids.push_back(v.toInt());
        }
        return ids;
    };
    std::vector<std::int64_t> requests;
    for (const QJsonValue& c : cases) {
        sched::RequestSpec spec;
        spec.prompt = ids_of(c.toObject().value("prompt_ids"));
        spec.max_tokens = static_cast<int>(c.toObject().value("tokens").toArray().size());
        spec.ignore_eos = true;
        spec.sampling.temperature = 0;
        requests.push_back(engine.add_request(spec));
    }
    while (engine.has_unfinished()) {
        engine.step();
    }
    std::int64_t preemptions = 0;
    std::int64_t hit_tokens = 0;
    for (qsizetype i = 0; i < cases.size(); ++i) {
        const QJsonObject c = cases[i].toObject();
        const sched::Request& r = engine.request(requests[static_cast<std::size_t>(i)]);
        QCOMPARE(r.state, sched::RequestState::finished);
        preemptions += r.accounting.preemptions;
        hit_tokens += r.accounting.prefix_hit_tokens + r.accounting.resumed_hit_tokens;
        const std::vector<std::int32_t> got(r.tokens.begin() + r.prompt_length(), r.tokens.end());
        const QString mismatch = test::greedy_mismatch(c, got);
        QVERIFY2(mismatch.isEmpty(), qPrintable(mismatch));
    }
    // The point of serving them together: sharing and preemption happened.
    QVERIFY2(hit_tokens > 0, "the prompts' shared chat prefix was never reused");
    QVERIFY2(preemptions > 0, "the pool never ran out");
}

QTEST_GUILESS_MAIN(TestEngineFormats)
#include "tst_engine_formats.moc"
