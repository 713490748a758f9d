// The engine's path for backends that sample where the logits are (the CUDA
// backend): the draws come from each request's generator in the host
// sampler's order and are picked by the same rule, so a seeded run gives the
// very tokens it gives with host sampling. Checked without a GPU through the
// Backend's reference forward_sampled over the CPU backend.
#include "engine/cpu/cpu_backend.h"
#include "engine/model/llama_model.h"
#include "engine/sched/llm_engine.h"
#include "tests/support/tiny_model.h"

#include <memory>
#include <vector>

#include <QTest>

using namespace kvscope;

namespace {

// The CPU backend, claiming to sample on its device: the engine then takes
// the forward_sampled path, whose default picks on the host by the shared
// rule (sampling::pick_token).
class SamplingCpuBackend final : public runner::Backend {
public:
    explicit SamplingCpuBackend(std::unique_ptr<runner::Backend> inner)
        : inner_(std::move(inner)) {}
    std::string name() const override { return inner_->name(); }
    int vocab_size() const override { return inner_->vocab_size(); }
    int block_size() const override { return inner_->block_size(); }
    int num_blocks() const override { return inner_->num_blocks(); }
    kv::KvCacheFormat cache_format() const override { return inner_->cache_format(); }
    std::int64_t kv_cache_bytes() const override { return inner_->kv_cache_bytes(); }
    void forward(const runner::ForwardBatch& batch, float* logits) override {
        ++forwards;
        inner_->forward(batch, logits);
    }
    void release_blocks(std::span<const kv::BlockId> blocks) override {
        inner_->release_blocks(blocks);
    }
    void copy_slots(std::span<const std::int32_t> from, std::span<const std::int32_t> to) override {
        inner_->copy_slots(from, to);
    }
    bool samples_on_device() const override { return true; }
    void forward_sampled(const runner::ForwardBatch& batch,
                         std::span<const runner::RowSampling> rows, std::int32_t* tokens) override {
        ++sampled_steps;
        runner::Backend::forward_sampled(batch, rows, tokens);
    }

    int forwards = 0;
    int sampled_steps = 0;

private:
    std::unique_ptr<runner::Backend> inner_;
};

std::unique_ptr<runner::Backend> cpu_backend(std::shared_ptr<const model::LlamaModel> model) {
    cpu::CpuBackendOptions options;
    options.num_blocks = 64;
    options.block_size = 16;
    options.threads = 2;
    return std::make_unique<cpu::CpuBackend>(std::move(model), options);
}

// Every request's tokens after serving them all to the end.
std::vector<std::vector<std::int32_t>> serve(runner::Backend& backend,
                                             const std::vector<sched::RequestSpec>& specs) {
    sched::LlmEngine engine(backend, sched::EngineConfig{});
    std::vector<std::int64_t> ids;
    for (const sched::RequestSpec& spec : specs) {
        ids.push_back(engine.add_request(spec));
    }
    while (engine.has_unfinished()) {
        engine.step();
    }
    std::vector<std::vector<std::int32_t>> tokens;
    for (const std::int64_t id : ids) {
        tokens.push_back(engine.request(id).tokens);
    }
    return tokens;
}

} // namespace

class TestDeviceSampling : public QObject {
    Q_OBJECT

private slots:
    void seeded_runs_give_the_host_samplers_tokens_data();
    void seeded_runs_give_the_host_samplers_tokens();
};

void TestDeviceSampling::seeded_runs_give_the_host_samplers_tokens_data() {
    QTest::addColumn<float>("penalty");
    QTest::newRow("no repetition penalty: sampled on the device") << 1.0f;
    QTest::newRow("repetition penalty: sampled on the host") << 1.3f;
}

void TestDeviceSampling::seeded_runs_give_the_host_samplers_tokens() {
    QFETCH(float, penalty);
    const auto model = model::LlamaModel::load(tiny_model_path());
    std::vector<sched::RequestSpec> specs;
    for (int r = 0; r < 5; ++r) {
        sched::RequestSpec spec;
        for (int t = 0; t < 12 + 5 * r; ++t) {
            spec.prompt.push_back(3 + (t * 7 + r * 13) % 250);
        }
        spec.max_tokens = 24;
        spec.ignore_eos = true;
        spec.sampling.seed = 100 + static_cast<std::uint64_t>(r);
        spec.sampling.temperature = r == 0 ? 0.0f : 0.6f + 0.2f * static_cast<float>(r);
        spec.sampling.top_k = r == 2 ? 0 : 40;
        spec.sampling.top_p = r == 3 ? 0.9f : 1.0f;
        spec.sampling.min_p = r == 4 ? 0.05f : 0.0f;
        spec.sampling.repetition_penalty = penalty;
        specs.push_back(spec);
    }
    auto host = cpu_backend(model);
    SamplingCpuBackend device(cpu_backend(model));
    const auto expected = serve(*host, specs);
    const auto got = serve(device, specs);
    QCOMPARE(got, expected);
    if (penalty == 1.0f) {
        QVERIFY(device.sampled_steps > 0);
    } else {
        QCOMPARE(device.sampled_steps, 0); // the penalty needs the history on the host
    }
    // The sampled tokens are not all the greedy ones: sampling was exercised.
    QVERIFY(expected[1] != serve(*cpu_backend(model), {[&] {
                auto greedy = specs[1];
                greedy.sampling.temperature = 0.0f;
                return greedy;
            }()})[0]);
}

QTEST_GUILESS_MAIN(TestDeviceSampling)
#include "tst_device_sampling.moc"
