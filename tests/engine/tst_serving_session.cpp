// The serving session: one run configuration to a running engine. Cache
// sizes resolve to the block counts worked out by hand below; backend names
// parse, `auto` falls back to the CPU with a note saying why, and `cuda`
// without a GPU is refused with the reason; on the real model, a run is
// reproducible, per-request seeds are as `kvscope run` has always made them,
// --max-model-len rejects and clamps, and the summary counts a rejected
// prompt as never run (not computed).
#include "engine/gpu_devices.h"
#include "engine/model_path.h"
#include "engine/session/backend_factory.h"
#include "engine/session/cache_size.h"
#include "engine/session/run_summary.h"
#include "engine/session/serving_session.h"

#include <fstream>
#include <functional>

#include <QTemporaryDir>
#include <QtTest>

using namespace kvscope;

namespace {

// SmolLM2-135M's shape: 30 layers, 3 KV heads of 64. At f16 a token's K and
// V take 2 * 30 * 3 * 64 * 2 B = 23,040 B; a 16-token block 368,640 B.
model::LlamaConfig smollm2_shape() {
    model::LlamaConfig c;
    c.layers = 30;
    c.kv_heads = 3;
    c.heads = 9;
    c.head_dim = 64;
    c.hidden = 576;
    c.context_length = 8192;
    return c;
}

#define REQUIRE_MODEL()                                                                            \
    do {                                                                                           \
        if (const std::string problem = model_path_problem(resolve_model_path());                  \
            !problem.empty()) {                                                                    \
            QSKIP(qPrintable("needs the model (run scripts/setup.sh): " +                          \
                             QString::fromStdString(problem)));                                    \
        }                                                                                          \
    } while (false)

std::string write_trace(const QTemporaryDir& dir, const std::vector<std::string>& lines) {
    const std::string path = dir.filePath("trace.jsonl").toStdString();
    std::ofstream out(path);
    for (const std::string& line : lines) {
        out << line << '\n';
    }
    return path;
}

std::string words(int n) {
    std::string text;
    for (int i = 0; i < n; ++i) {
        text += " apple";
    }
    return text;
}

} // namespace

class TestServingSession : public QObject {
    Q_OBJECT

private slots:
    void cache_size_resolves_data();
    void cache_size_resolves();
    void cache_size_refuses_data();
    void cache_size_refuses();
    void backend_kinds();
    void run_is_reproducible_with_per_request_seeds();
    void max_model_len_rejects_and_clamps();
    void rejected_prompt_is_not_computed();
};

void TestServingSession::cache_size_resolves_data() {
    QTest::addColumn<int>("num_blocks");
    QTest::addColumn<qint64>("memory_bytes");
    QTest::addColumn<double>("utilization");
    QTest::addColumn<qint64>("budget");
    QTest::addColumn<qint64>("tokens");
    QTest::addColumn<int>("key_format"); // kv::KvFormat, V the same
    QTest::addColumn<qint64>("available");
    QTest::addColumn<int>("expected");
    const int f16 = static_cast<int>(kv::KvFormat::f16);
    const int q8 = static_cast<int>(kv::KvFormat::q8_0);
    QTest::newRow("blocks") << 300 << 0LL << 0.0 << 0LL << 0LL << f16 << 0LL << 300;
    // 104,857,600 / 368,640 = 284.4
    QTest::newRow("bytes") << 0 << 100LL * 1024 * 1024 << 0.0 << 0LL << 0LL << f16 << 0LL << 284;
    // q8_0: 64 values per head in 2 groups of 32 (34 B each): 68 B per head,
    // x 3 heads x 2 (K, V) x 30 layers = 12,240 B a token, 195,840 a block;
    // 10 MiB / 195,840 = 53.5.
    QTest::newRow("bytes q8_0") << 0 << 10LL * 1024 * 1024 << 0.0 << 0LL << 0LL << q8 << 0LL << 53;
    // Half of a stated 1 GiB: 536,870,912 / 368,640 = 1456.4
    QTest::newRow("share of budget")
        << 0 << 0LL << 0.5 << 1024LL * 1024 * 1024 << 0LL << f16 << 0LL << 1456;
    // A quarter of what the backend has free: 40 blocks' worth.
    QTest::newRow("share of free") << 0 << 0LL << 0.25 << 0LL << 0LL << f16 << 40LL * 368640 << 10;
    QTest::newRow("tokens round up") << 0 << 0LL << 0.0 << 0LL << 1000LL << f16 << 0LL << 63;
    QTest::newRow("the run's need") << 0 << 0LL << 0.0 << 0LL << 0LL << f16 << 0LL << 512;
}

void TestServingSession::cache_size_resolves() {
    QFETCH(int, num_blocks);
    QFETCH(qint64, memory_bytes);
    QFETCH(double, utilization);
    QFETCH(qint64, budget);
    QFETCH(qint64, tokens);
    QFETCH(int, key_format);
    QFETCH(qint64, available);
    QFETCH(int, expected);
    session::CacheSize size;
    size.num_blocks = num_blocks;
    size.memory_bytes = memory_bytes;
    size.memory_utilization = utilization;
    size.budget_bytes = budget;
    size.tokens = tokens;
    QVERIFY(size.problem().empty());
    const auto format = static_cast<kv::KvFormat>(key_format);
    QCOMPARE(
        session::resolve_num_blocks(size, smollm2_shape(), {format, format}, 16, 8192, available),
        expected);
}

void TestServingSession::cache_size_refuses_data() {
    QTest::addColumn<int>("num_blocks");
    QTest::addColumn<qint64>("memory_bytes");
    QTest::addColumn<double>("utilization");
    QTest::addColumn<qint64>("tokens");
    QTest::addColumn<QString>("message");
    QTest::newRow("two sizes") << 64 << 0LL << 0.0 << 1024LL << "one way";
    QTest::newRow("share above 1") << 0 << 0LL << 1.5 << 0LL << "between 0 and 1";
    QTest::newRow("one block of tokens") << 0 << 0LL << 0.0 << 16LL << "fewer than 2 blocks";
    QTest::newRow("bytes for one block") << 0 << 400000LL << 0.0 << 0LL << "fewer than 2 blocks";
}

void TestServingSession::cache_size_refuses() {
    QFETCH(int, num_blocks);
    QFETCH(qint64, memory_bytes);
    QFETCH(double, utilization);
    QFETCH(qint64, tokens);
    QFETCH(QString, message);
    session::CacheSize size;
    size.num_blocks = num_blocks;
    size.memory_bytes = memory_bytes;
    size.memory_utilization = utilization;
    size.tokens = tokens;
    try {
        session::resolve_num_blocks(size, smollm2_shape(), {}, 16, 8192, 1LL << 30);
        QFAIL("no error");
    } catch (const std::runtime_error& e) {
        QVERIFY2(QString::fromUtf8(e.what()).contains(message), e.what());
    }
}

void TestServingSession::backend_kinds() {
    QCOMPARE(session::parse_backend_kind("auto"), session::BackendKind::automatic);
    QCOMPARE(session::parse_backend_kind("cpu"), session::BackendKind::cpu);
    QCOMPARE(session::parse_backend_kind("cuda"), session::BackendKind::cuda);
    QVERIFY(!session::parse_backend_kind("gpu").has_value());
    QCOMPARE(session::resolve_backend_kind(session::BackendKind::cpu), session::BackendKind::cpu);
    QVERIFY(
        session::resolve_backend_kind_with_reason(session::BackendKind::cpu).fallback_note.empty());

    const GpuInventory gpus = query_gpu_devices();
#if defined(KVSCOPE_HAVE_CUDA)
    const bool cuda_runs = !gpus.devices.empty();
    const std::string why = gpus.unavailable_reason; // what the messages must pass on
#else
    const bool cuda_runs = false;
    const std::string why = "not compiled with CUDA";
#endif
    const session::ResolvedBackend automatic =
        session::resolve_backend_kind_with_reason(session::BackendKind::automatic);
    QCOMPARE(session::resolve_backend_kind(session::BackendKind::automatic), automatic.kind);
    if (cuda_runs) { // a GPU this build can use: auto takes it, cuda is allowed
        QCOMPARE(automatic.kind, session::BackendKind::cuda);
        QVERIFY(automatic.fallback_note.empty());
        QVERIFY(session::cuda_unavailable_reason().empty());
        QCOMPARE(session::resolve_backend_kind(session::BackendKind::cuda),
                 session::BackendKind::cuda);
        return;
    }
    QVERIFY(!why.empty());
    const std::string reason = session::cuda_unavailable_reason();
    QVERIFY2(reason.find(why) != std::string::npos, reason.c_str());
    // auto falls back to the CPU and says so, with the reason, in one line.
    QCOMPARE(automatic.kind, session::BackendKind::cpu);
    const std::string& note = automatic.fallback_note;
    QVERIFY2(note.find("CPU") != std::string::npos, note.c_str());
    QVERIFY2(note.find(why) != std::string::npos, note.c_str());
    QVERIFY2(note.find('\n') == std::string::npos, note.c_str());
    // Asked for by name, an unavailable backend is an error saying why, never
    // a silent fall-back to the CPU; make_backend refuses before the model
    // is touched.
    for (const auto& attempt : std::vector<std::function<void()>>{
             [] { session::resolve_backend_kind(session::BackendKind::cuda); },
             [] {
                 session::BackendSpec spec;
                 spec.kind = session::BackendKind::cuda;
                 session::make_backend(spec, nullptr, {});
             }}) {
        try {
            attempt();
            QFAIL("the CUDA backend was allowed without a GPU");
        } catch (const std::runtime_error& e) {
            const std::string message = e.what();
            QVERIFY2(message.find("CUDA") != std::string::npos, e.what());
            QVERIFY2(message.find("no") != std::string::npos, e.what());
            QVERIFY2(message.find(why) != std::string::npos, e.what());
        }
    }
}

void TestServingSession::run_is_reproducible_with_per_request_seeds() {
    REQUIRE_MODEL();
    session::RunConfig config;
    config.workload = "shared-prefix";
    config.preset.requests = 3;
    config.preset.max_tokens = 5;
    config.preset.seed = 7;
    config.temperature = 0.9f; // sampled: the seeds matter
    config.real_time = false;
    config.backend.threads = 2;
    config.cache.num_blocks = 64;
    std::vector<std::vector<std::int32_t>> outputs[2];
    for (auto& output : outputs) {
        session::ServingSession run(config, nullptr);
        QCOMPARE(run.backend().num_blocks(), 64);
        const std::vector<std::int64_t> ids = run.serve({});
        QCOMPARE(ids.size(), std::size_t{3});
        for (std::size_t i = 0; i < ids.size(); ++i) {
            const sched::Request& r = run.engine().request(ids[i]);
            QCOMPARE(r.state, sched::RequestState::finished);
            // As `kvscope run` has seeded requests since its first version.
            QCOMPARE(r.spec.sampling.seed, std::uint64_t{7} * 1'000'003 + i);
            output.push_back(r.tokens);
        }
        const auto metadata = run.recording_metadata();
        QCOMPARE(metadata.at("requests"), std::string("3"));
        QCOMPARE(metadata.at("backend"), std::string("cpu"));
        QVERIFY(metadata.at("run_config").find("\"blocks\":64") != std::string::npos);
    }
    QCOMPARE(outputs[0], outputs[1]);
}

void TestServingSession::max_model_len_rejects_and_clamps() {
    REQUIRE_MODEL();
    QTemporaryDir dir;
    session::RunConfig config;
    config.workload =
        write_trace(dir, {R"({"prompt": ")" + words(60) + R"(", "max_tokens": 4})",
                          R"({"prompt": "Count to one hundred:", "max_tokens": 200})"});
    config.max_model_len = 40;
    config.real_time = false;
    config.backend.threads = 2;
    session::ServingSession run(config, nullptr);
    const std::vector<std::int64_t> ids = run.serve({});
    const sched::Request& long_prompt = run.engine().request(ids[0]);
    QCOMPARE(long_prompt.state, sched::RequestState::rejected);
    QVERIFY2(long_prompt.finish_reason.find("--max-model-len") != std::string::npos,
             long_prompt.finish_reason.c_str());
    const sched::Request& short_prompt = run.engine().request(ids[1]);
    QVERIFY(short_prompt.state == sched::RequestState::finished);
    QVERIFY(short_prompt.prompt_length() + short_prompt.generated <= 40);
    QCOMPARE(short_prompt.spec.max_tokens, 40 - short_prompt.prompt_length());
}

void TestServingSession::rejected_prompt_is_not_computed() {
    REQUIRE_MODEL();
    QTemporaryDir dir;
    session::RunConfig config;
    config.workload = write_trace(dir, {R"({"prompt": ")" + words(700) + R"(", "max_tokens": 2})",
                                        R"({"prompt": "Hello there", "max_tokens": 2})"});
    config.cache.tokens = 512;
    config.real_time = false;
    config.backend.threads = 2;
    session::ServingSession run(config, nullptr);
    const std::vector<std::int64_t> ids = run.serve({});
    const std::int64_t long_tokens = run.engine().request(ids[0]).prompt_length();
    const std::int64_t short_tokens = run.engine().request(ids[1]).prompt_length();
    QVERIFY(long_tokens > 512);
    QCOMPARE(run.engine().request(ids[0]).state, sched::RequestState::rejected);
    const session::RunSummary summary =
        session::summarize_run(run.engine(), ids, config.workload, 1.0, 0, 0);
    QCOMPARE(summary.rejected, 1);
    QCOMPARE(summary.prompt_tokens, long_tokens + short_tokens);
    QCOMPARE(summary.prefix_hit_tokens, std::int64_t{0});
    QCOMPARE(summary.prompt_computed_tokens, short_tokens); // not long + short
    QCOMPARE(summary.prompt_not_run_tokens, long_tokens);
    QCOMPARE(summary.requests[0].prompt_computed_tokens, std::int64_t{0});
}

QTEST_GUILESS_MAIN(TestServingSession)
#include "tst_serving_session.moc"
