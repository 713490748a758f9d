// The CUDA backend end to end against the CPU backend, which the golden tests
// pin to transformers: the same batches through both, in the same KV-cache
// format, must give the same next-token choices. The CUDA backend computes in
// fp16 weights and activations with fp32 accumulation, so logits differ by
// rounding; a wrong slot, block, position or codec moves them by whole units.
//  - the tiny random model (always present): logits within a tolerance per
//    format over a prefill, decodes and a context long enough for split-K;
//  - the real SmolLM2 when it is in place: teacher-forced top-1 agreement of
//    at least 99% and KL reported per format, greedy tokens on the golden
//    prompts equal up to the CPU's first close call;
//  - in 4-bit, 2-bit and fp8 formats instead of the above (on the real model,
//    every format but f16): a distance from the CPU's f32 logits at most 1.5
//    times the CPU's own in that format (coarse_format says why);
//  - captured attention sums (H2O, SnapKV) equal to the CPU's;
//  - slot copies (compaction after eviction) then decoding equal to the CPU
//    doing the same, every kind of format (per-token, KIVI, mixed);
//  - whole blocks copied out as bytes and back (the offload tier), the CPU's
//    bytes decoding on the GPU as on the CPU;
//  - op timing reported on the host clock, device memory accounted;
//  - the tiny Qwen 2, Qwen 3 and Gemma 3 (tests/engine/data) against the CPU,
//    with and without the hybrid KV cache, graphs and formats, over steps
//    that slide Gemma's window of 8 past whole blocks, and against
//    transformers (golden_tiny_archs.json);
//  - the real Gemma 3 270M when it is in place: teacher-forced top-1
//    agreement of at least 99% over a text past its 512-token window.
// Skips where no GPU is present.
#include "engine/cpu/cpu_backend.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/gpu_devices.h"
#include "engine/kv/block_allocator.h"
#include "engine/kv/kv_groups.h"
#include "engine/kv/kv_manager.h"
#include "engine/model/llama_model.h"
#include "engine/runner/forward_batch.h"
#include "engine/sampling/sampler.h"
#include "engine/session/backend_factory.h"
#include "engine/util/host_clock.h"
#include "kernels/launch_overlap.h"
#include "tests/support/chunked_logits.h"
#include "tests/support/golden.h"
#include "tests/support/tiny_arch_golden.h"
#include "tests/support/tiny_model.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <set>

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTest>

using namespace kvscope;

Q_DECLARE_METATYPE(kvscope::kv::KvFormat)

namespace {

using F = kv::KvFormat;

std::unique_ptr<runner::Backend> make_cpu(std::shared_ptr<const model::LlamaModel> model,
                                          int num_blocks, int block_size, kv::KvCacheFormat format,
                                          bool hybrid = true) {
    cpu::CpuBackendOptions options;
    options.num_blocks = num_blocks;
    options.block_size = block_size;
    options.cache_format = format;
    options.hybrid_kv = hybrid;
    return std::make_unique<cpu::CpuBackend>(std::move(model), options);
}

cuda::CudaBackendOptions cuda_options(int num_blocks, int block_size, kv::KvCacheFormat format,
                                      bool graphs = true, bool hybrid = true) {
    cuda::CudaBackendOptions options;
    options.num_blocks = num_blocks;
    options.block_size = block_size;
    options.cache_format = format;
    options.cuda_graphs = graphs;
    options.hybrid_kv = hybrid;
    return options;
}

std::unique_ptr<runner::Backend> make_cuda(std::shared_ptr<const model::LlamaModel> model,
                                           int num_blocks, int block_size, kv::KvCacheFormat format,
                                           bool graphs = true, bool hybrid = true) {
    return std::make_unique<cuda::CudaBackend>(
        std::move(model), cuda_options(num_blocks, block_size, format, graphs, hybrid));
}

std::vector<std::int32_t> to_ids(const QJsonValue& value) {
    std::vector<std::int32_t> ids;
    for (const QJsonValue& id : value.toArray()) {
        ids.push_back(id.toInt());
    }
    return ids;
}

std::vector<std::int32_t> random_ids(int count, int vocab, unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<std::int32_t> id(0, vocab - 1);
    std::vector<std::int32_t> ids(static_cast<std::size_t>(count));
    for (std::int32_t& t : ids) {
        t = id(rng);
    }
    return ids;
}

using kvscope::test::lockstep_in_chunks;
using kvscope::test::logits_in_chunks;

struct Agreement {
    double max_abs = 0;          // largest |logit difference|
    double kl_mean = 0;          // KL(reference || ours), per position
    double kl_max = 0;           //
    double top1 = 0;             // share of positions with the same argmax
    int close_calls = 0;         // positions whose reference top-1 margin is under `margin`
    int clear_disagreements = 0; // other argmax differences: never allowed
};

// Row by row, `ours` against `reference`, both (rows, vocab).
Agreement compare(const std::vector<float>& reference, const std::vector<float>& ours, int vocab,
                  double margin) {
    Agreement a;
    const std::size_t rows = reference.size() / static_cast<std::size_t>(vocab);
    int agree = 0;
    for (std::size_t r = 0; r < rows; ++r) {
        const float* p = reference.data() + r * static_cast<std::size_t>(vocab);
        const float* q = ours.data() + r * static_cast<std::size_t>(vocab);
        const auto lse = [vocab](const float* logits) {
            const float top = *std::max_element(logits, logits + vocab);
            double sum = 0;
            for (int i = 0; i < vocab; ++i) {
                sum += std::exp(double(logits[i]) - top);
            }
            return top + std::log(sum);
        };
        const double lse_p = lse(p);
        const double lse_q = lse(q);
        double kl = 0;
        int best_p = 0;
        int best_q = 0;
        float second_p = -INFINITY;
        for (int i = 0; i < vocab; ++i) {
            const double lp = p[i] - lse_p;
            kl += std::exp(lp) * (lp - (q[i] - lse_q));
            a.max_abs = std::max(a.max_abs, double(std::abs(p[i] - q[i])));
            best_q = q[i] > q[best_q] ? i : best_q;
            if (p[i] > p[best_p]) {
                second_p = p[best_p];
                best_p = i;
            } else if (i != best_p && p[i] > second_p) {
                second_p = p[i];
            }
        }
        a.kl_mean += kl;
        a.kl_max = std::max(a.kl_max, kl);
        if (best_p == best_q) {
            ++agree;
        } else if (p[best_p] - second_p < margin) {
            ++a.close_calls;
        } else {
            ++a.clear_disagreements;
        }
    }
    a.kl_mean /= static_cast<double>(std::max<std::size_t>(rows, 1));
    a.top1 = double(agree) / static_cast<double>(std::max<std::size_t>(rows, 1));
    return a;
}

// Greedy continuation of `prompt`, `count` tokens; `margins` gets each
// step's top-1 margin (best minus second-best logit).
std::vector<std::int32_t> greedy(runner::Backend& backend, const std::vector<std::int32_t>& prompt,
                                 std::size_t count, std::vector<float>* margins = nullptr) {
    const int vocab = backend.vocab_size();
    kv::BlockAllocator allocator(backend.num_blocks());
    kv::SequenceBlocks sequence;
    std::vector<std::int32_t> pending = prompt;
    std::vector<std::int32_t> generated;
    std::vector<float> logits(static_cast<std::size_t>(vocab));
    while (generated.size() < count) {
        if (!kv::reserve(sequence, sequence.length + static_cast<std::int32_t>(pending.size()),
                         backend.block_size(), allocator)) {
            qFatal("KV cache too small for the test");
        }
        const runner::SequenceStep step{&sequence, pending, false};
        backend.forward(runner::build_forward_batch(std::span(&step, 1), backend.block_size()),
                        logits.data());
        sequence.length += static_cast<std::int32_t>(pending.size());
        const auto best = std::max_element(logits.begin(), logits.end());
        if (margins != nullptr) {
            float second = -INFINITY;
            for (auto it = logits.begin(); it != logits.end(); ++it) {
                if (it != best) {
                    second = std::max(second, *it);
                }
            }
            margins->push_back(*best - second);
        }
        generated.push_back(static_cast<std::int32_t>(best - logits.begin()));
        pending = {generated.back()};
    }
    return generated;
}

class RecordingObserver : public runner::OpObserver {
public:
    struct Op {
        std::string name;
        int layer;
        std::int64_t begin_ns;
        std::int64_t end_ns;
    };
    void on_op(std::string_view name, int layer, std::int64_t begin_ns, std::int64_t end_ns,
               std::int64_t /*cpu_ns*/) override {
        ops.push_back({std::string(name), layer, begin_ns, end_ns});
    }
    std::vector<Op> ops;
};

void add_format_rows() {
    QTest::addColumn<kv::KvFormat>("key");
    QTest::addColumn<kv::KvFormat>("value");
    QTest::newRow("f16") << F::f16 << F::f16;
    QTest::newRow("q8_0") << F::q8_0 << F::q8_0;
    QTest::newRow("q4_0") << F::q4_0 << F::q4_0;
    QTest::newRow("kivi4") << F::kivi4 << F::kivi4;
    QTest::newRow("K kivi2, V q8_0") << F::kivi2 << F::q8_0;
    QTest::newRow("K fp8, V kivi4") << F::fp8_e4m3 << F::kivi4;
}

// 4-bit, 2-bit and fp8 codes. The GPU's K and V differ from the CPU's by
// fp16 rounding, so now and then one lands in the neighbouring code: a whole
// code step (an eighth of the block's range for 4 bits), not a rounding
// error, and attention carries it into every later position. On an H100
// (2026-11-24) q4_0 gave a teacher-forced top-1 agreement between the two
// backends of 0.83 while q4_0 itself agrees with f32 at 0.76
// (docs/kv-formats.md): the two backends' quantisation noise differs as much
// as the format's own. What these formats must satisfy instead is that the
// GPU loses no more to the format than the CPU does, both against the CPU in
// f32 (format_loss_is_the_cpus); a wrong slot, block or codec loses far more.
// tst_cuda_kernels compares their codec bytes and attention exactly.
bool coarse_format(F key, F value) {
    const auto coarse = [](F f) {
        return f == F::q4_0 || f == F::q4_1 || f == F::kivi4 || f == F::kivi2 || f == F::fp8_e4m3;
    };
    return coarse(key) || coarse(value);
}

// What quantised formats round this step's K and V to can differ by a code
// step (above): worth more than rounding noise.
double tiny_tolerance(F key, F value) {
    return coarse_format(key, value) ? 0.15 : 0.05;
}

double rms_difference(const std::vector<float>& a, const std::vector<float>& b) {
    double sum = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        const double d = double(a[i]) - double(b[i]);
        sum += d * d;
    }
    return std::sqrt(sum / static_cast<double>(std::max<std::size_t>(a.size(), 1)));
}

// For a coarse format: the logits' distance from the f32 reference, the
// GPU's against the CPU's in the same format. The GPU's rounding moves some
// codes (see coarse_format), which adds a little to the format's own loss;
// half as much again is the most that allows.
bool format_loss_is_the_cpus(const std::vector<float>& reference, const std::vector<float>& cpu,
                             const std::vector<float>& gpu) {
    const double cpu_loss = rms_difference(reference, cpu);
    const double gpu_loss = rms_difference(reference, gpu);
    qInfo("%s: RMS logit distance from f32, CPU %.4g, CUDA %.4g (ratio %.3f); CUDA against the "
          "CPU %.4g",
          QTest::currentDataTag(), cpu_loss, gpu_loss, gpu_loss / std::max(cpu_loss, 1e-12),
          rms_difference(cpu, gpu));
    return gpu_loss <= 1.5 * cpu_loss + 1e-3;
}

#define VERIFY_FORMAT_LOSS(reference, cpu, gpu)                                                    \
    QVERIFY2(format_loss_is_the_cpus(reference, cpu, gpu),                                         \
             "the GPU's logits are further from f32 than 1.5 times the CPU's in this format")

} // namespace

class TestCudaBackend : public QObject {
    Q_OBJECT

private slots:
    void initTestCase();
    void tiny_model_matches_the_cpu_data();
    void tiny_model_matches_the_cpu();
    void batched_sequences_match_the_cpu_data();
    void batched_sequences_match_the_cpu();
    void tiled_prefill_matches_per_token_prefill();
    void real_model_teacher_forced_agrees_with_the_cpu_data();
    void real_model_teacher_forced_agrees_with_the_cpu();
    void real_model_greedy_matches_the_cpu();
    void captured_attention_matches_the_cpu_data();
    void captured_attention_matches_the_cpu();
    void copy_slots_then_decoding_matches_the_cpu_data();
    void copy_slots_then_decoding_matches_the_cpu();
    void blocks_moved_out_and_in_match_the_cpu_data();
    void blocks_moved_out_and_in_match_the_cpu();
    void ops_are_timed_on_the_host_clock();
    void recorded_decodes_replay_graphs_with_their_op_times();
    void device_memory_is_accounted();
    void decode_graphs_replay_the_eager_logits();
    void overlapped_steps_match_steps_in_turn();
    void sampling_on_the_device_picks_by_the_host_rule();
    void bad_batches_are_refused();
    void tiny_architectures_match_the_cpu_data();
    void tiny_architectures_match_the_cpu();
    void tiny_architectures_match_transformers_data();
    void tiny_architectures_match_transformers();
    void gemma3_270m_long_prompt_matches_the_cpu();

private:
    std::shared_ptr<const model::LlamaModel> tiny_;
    std::shared_ptr<const model::LlamaModel> real_; // null without the golden model
    QString real_problem_;
    QJsonObject golden_;
};

void TestCudaBackend::initTestCase() {
    const GpuInventory gpus = query_gpu_devices();
    if (gpus.devices.empty()) {
        QSKIP(qPrintable("no CUDA GPU here (" + QString::fromStdString(gpus.unavailable_reason) +
                         "): CUDA backend tests skipped"));
    }
    qInfo("device: %s (sm_%d%d)", gpus.devices.front().name.c_str(),
          gpus.devices.front().compute_major, gpus.devices.front().compute_minor);
    tiny_ = model::LlamaModel::load(tiny_model_path());
    golden_ = test::load_golden();
    real_problem_ = golden_.isEmpty() ? "tests/engine/data/golden_smollm2.json is missing"
                                      : test::golden_model_problem(golden_);
    if (real_problem_.isEmpty()) {
        real_ = model::LlamaModel::load(test::golden_model_path());
    }
}

void TestCudaBackend::tiny_model_matches_the_cpu_data() {
    add_format_rows();
}

void TestCudaBackend::tiny_model_matches_the_cpu() {
    QFETCH(kv::KvFormat, key);
    QFETCH(kv::KvFormat, value);
    // 600 tokens: a 37-token prefill, decodes, chunks of 100 and 5; the
    // attention's splits as cuda::attention_split_length plans them for
    // each step (short ones for steps of few tokens). Block size 16, blocks
    // left over.
    const std::vector<std::int32_t> ids = random_ids(600, tiny_->config().vocab, 7);
    const std::vector<int> chunks{37, 1, 1, 1, 100, 5};
    auto cpu = make_cpu(tiny_, 48, 16, {key, value});
    auto gpu = make_cuda(tiny_, 48, 16, {key, value});
    const std::vector<float> expected = logits_in_chunks(*cpu, ids, chunks);
    const std::vector<float> got = logits_in_chunks(*gpu, ids, chunks);
    if (coarse_format(key, value)) {
        auto f32 = make_cpu(tiny_, 48, 16, {F::f32, F::f32});
        VERIFY_FORMAT_LOSS(logits_in_chunks(*f32, ids, chunks), expected, got);
        return;
    }
    const double tolerance = tiny_tolerance(key, value);
    const Agreement a = compare(expected, got, tiny_->config().vocab, 2 * tolerance);
    qInfo("%s: max |logit difference| %.3g, KL mean %.3g max %.3g, top-1 %.4f (%d close calls)",
          QTest::currentDataTag(), a.max_abs, a.kl_mean, a.kl_max, a.top1, a.close_calls);
    QVERIFY2(a.max_abs <= tolerance, qPrintable(QString("max |difference| %1").arg(a.max_abs)));
    QCOMPARE(a.clear_disagreements, 0);
}

void TestCudaBackend::batched_sequences_match_the_cpu_data() {
    add_format_rows();
}

void TestCudaBackend::batched_sequences_match_the_cpu() {
    // Three sequences in one batch: one prefilling a chunk, two decoding, in
    // blocks interleaved in the pool (block size 8, so blocks fill often).
    QFETCH(kv::KvFormat, key);
    QFETCH(kv::KvFormat, value);
    const int vocab = tiny_->config().vocab;
    const std::vector<std::int32_t> ids = random_ids(300, vocab, 11);
    // The CPU, the GPU, and for a coarse format the CPU in f32.
    const int runs = coarse_format(key, value) ? 3 : 2;
    std::vector<float> outputs[3];
    for (int which = 0; which < runs; ++which) {
        auto backend = which == 0   ? make_cpu(tiny_, 64, 8, {key, value})
                       : which == 1 ? make_cuda(tiny_, 64, 8, {key, value})
                                    : make_cpu(tiny_, 64, 8, {F::f32, F::f32});
        kv::BlockAllocator allocator(backend->num_blocks());
        std::vector<kv::SequenceBlocks> seqs(3);
        const std::vector<std::size_t> starts{0, 100, 200};
        const std::vector<std::size_t> lengths{90, 40, 70};
        std::vector<std::size_t> done{0, 0, 0};
        while (done != lengths) {
            std::vector<runner::SequenceStep> steps;
            std::vector<std::size_t> which_sequence;
            for (std::size_t s = 0; s < 3; ++s) {
                if (done[s] == lengths[s]) {
                    continue;
                }
                const std::size_t n = (s == 0 && done[s] == 0) ? 30 : 1;
                QVERIFY(kv::reserve(seqs[s], static_cast<std::int32_t>(done[s] + n), 8, allocator));
                steps.push_back({&seqs[s], std::span(ids).subspan(starts[s] + done[s], n), true});
                which_sequence.push_back(s);
            }
            const runner::ForwardBatch batch = runner::build_forward_batch(steps, 8);
            std::vector<float> out(batch.logit_tokens.size() * static_cast<std::size_t>(vocab));
            backend->forward(batch, out.data());
            outputs[which].insert(outputs[which].end(), out.begin(), out.end());
            for (std::size_t i = 0; i < steps.size(); ++i) {
                const std::size_t s = which_sequence[i];
                seqs[s].length += static_cast<std::int32_t>(steps[i].tokens.size());
                done[s] += steps[i].tokens.size();
            }
        }
        if (which == 1) {
            // The decodes of three (then two, then one) replayed graphs, with
            // padding rows beside them (KIVI's included: its spare block).
            const auto* cuda_backend = dynamic_cast<const cuda::CudaBackend*>(backend.get());
            QVERIFY(cuda_backend->decode_graph_replays() > 0);
        }
    }
    if (runs == 3) {
        VERIFY_FORMAT_LOSS(outputs[2], outputs[0], outputs[1]);
        return;
    }
    const double tolerance = tiny_tolerance(key, value);
    const Agreement a = compare(outputs[0], outputs[1], vocab, 2 * tolerance);
    qInfo("%s: max |logit difference| %.3g, top-1 %.4f", QTest::currentDataTag(), a.max_abs,
          a.top1);
    QVERIFY2(a.max_abs <= tolerance, qPrintable(QString("max |difference| %1").arg(a.max_abs)));
    QCOMPARE(a.clear_disagreements, 0);
}

void TestCudaBackend::tiled_prefill_matches_per_token_prefill() {
    // A prompt prefilled in chunks of 100 (contexts past several attention
    // splits) while another sequence decodes beside it, with the attention
    // over query tiles on tensor cores (kernels/tile_attention.cuh) and per
    // token on the vector path: the same logits, to the rounding of Q and P
    // to fp16 for the tensor cores.
    const int vocab = tiny_->config().vocab;
    const std::vector<std::int32_t> ids = random_ids(400, vocab, 21);
    std::vector<float> outputs[2];
    for (int which = 0; which < 2; ++which) {
        cuda::CudaBackendOptions options = cuda_options(64, 16, {F::f16, F::f16});
        options.tile_prefill = which == 1;
        cuda::CudaBackend backend(tiny_, options);
        kv::BlockAllocator allocator(backend.num_blocks());
        std::vector<kv::SequenceBlocks> seqs(2);
        const auto run =
            [&](const std::vector<std::pair<std::size_t, std::span<const std::int32_t>>>& work) {
                std::vector<runner::SequenceStep> steps;
                for (const auto& [s, tokens] : work) {
                    QVERIFY(kv::reserve(seqs[s],
                                        seqs[s].length + static_cast<std::int32_t>(tokens.size()),
                                        16, allocator));
                    steps.push_back({&seqs[s], tokens, true});
                }
                const runner::ForwardBatch batch = runner::build_forward_batch(steps, 16);
                std::vector<float> out(batch.logit_tokens.size() * static_cast<std::size_t>(vocab));
                backend.forward(batch, out.data());
                outputs[which].insert(outputs[which].end(), out.begin(), out.end());
                for (const auto& [s, tokens] : work) {
                    seqs[s].length += static_cast<std::int32_t>(tokens.size());
                }
            };
        const std::span<const std::int32_t> all(ids);
        run({{1, all.subspan(300, 10)}});
        for (std::size_t chunk = 0; chunk < 3; ++chunk) {
            run({{0, all.subspan(100 * chunk, 100)}, {1, all.subspan(310 + chunk, 1)}});
        }
        for (std::size_t step = 0; step < 4; ++step) {
            run({{0, all.subspan(320 + step, 1)}, {1, all.subspan(330 + step, 1)}});
        }
        // The prefill steps ran over tiles, the decodes per token; a run
        // without tiles says so in its description.
        QCOMPARE(backend.tiled_steps(), std::int64_t{which == 1 ? 4 : 0});
        QCOMPARE(backend.activation_overflows(), std::int64_t{0}); // none counted by mistake
        QCOMPARE(session::describe_backend(backend).find("prefill attention per token") !=
                     std::string::npos,
                 which == 0);
    }
    const Agreement a = compare(outputs[0], outputs[1], vocab, 0.1);
    qInfo("tiles against per token: max |logit difference| %.3g, KL mean %.3g, top-1 %.4f",
          a.max_abs, a.kl_mean, a.top1);
    QVERIFY2(a.max_abs <= 0.05, qPrintable(QString("max |difference| %1").arg(a.max_abs)));
    QCOMPARE(a.clear_disagreements, 0);
}

void TestCudaBackend::real_model_teacher_forced_agrees_with_the_cpu_data() {
    QTest::addColumn<kv::KvFormat>("key");
    QTest::addColumn<kv::KvFormat>("value");
    QTest::newRow("f16") << F::f16 << F::f16;
    QTest::newRow("q8_0") << F::q8_0 << F::q8_0;
    QTest::newRow("q4_0") << F::q4_0 << F::q4_0;
    QTest::newRow("kivi4") << F::kivi4 << F::kivi4;
}

void TestCudaBackend::real_model_teacher_forced_agrees_with_the_cpu() {
    if (!real_) {
        QSKIP(qPrintable("needs the SmolLM2 model: " + real_problem_));
    }
    QFETCH(kv::KvFormat, key);
    QFETCH(kv::KvFormat, value);
    // The 306-token text: a 64-token prefill, then token by token, so most
    // positions read K/V back from the cache in the format under test.
    const std::vector<std::int32_t> ids =
        to_ids(golden_.value("teacher_forced").toObject().value("ids"));
    auto cpu = make_cpu(real_, 64, 16, {key, value});
    auto gpu = make_cuda(real_, 64, 16, {key, value});
    const std::vector<float> expected = logits_in_chunks(*cpu, ids, {64, 1});
    const std::vector<float> got = logits_in_chunks(*gpu, ids, {64, 1});
    if (key != F::f16 || value != F::f16) {
        // Both against the CPU in f32: the GPU may lose a little more to the
        // format than the CPU (coarse_format), not much more. On the real
        // model q8_0 too: over 30 layers a code moved by rounding changes the
        // next layer's K, and on an H100 (2026-11-24) the two backends' q8_0
        // agreed on 97.4% of top-1s (KL 4.3e-4), against 99.4% in f16.
        auto f32 = make_cpu(real_, 64, 16, {F::f32, F::f32});
        const std::vector<float> reference = logits_in_chunks(*f32, ids, {64, 1});
        const Agreement on_cpu =
            compare(reference, expected, real_->config().vocab, test::kNearTieMargin);
        const Agreement on_gpu =
            compare(reference, got, real_->config().vocab, test::kNearTieMargin);
        qInfo("%s against f32 over %zu positions: CPU top-1 %.4f KL mean %.3g; CUDA top-1 %.4f KL "
              "mean %.3g",
              QTest::currentDataTag(), ids.size(), on_cpu.top1, on_cpu.kl_mean, on_gpu.top1,
              on_gpu.kl_mean);
        QVERIFY2(
            on_gpu.top1 >= on_cpu.top1 - 0.05,
            qPrintable(
                QString("top-1 against f32 %1, the CPU's %2").arg(on_gpu.top1).arg(on_cpu.top1)));
        QVERIFY2(on_gpu.kl_mean <= 1.5 * on_cpu.kl_mean + 0.01,
                 qPrintable(QString("KL mean against f32 %1, the CPU's %2")
                                .arg(on_gpu.kl_mean)
                                .arg(on_cpu.kl_mean)));
        return;
    }
    const Agreement a = compare(expected, got, real_->config().vocab, test::kNearTieMargin);
    qInfo("%s: CUDA against the CPU in the same format over %zu positions: top-1 %.4f, KL mean "
          "%.3g max %.3g, max |logit difference| %.3g",
          QTest::currentDataTag(), ids.size(), a.top1, a.kl_mean, a.kl_max, a.max_abs);
    QVERIFY2(a.top1 >= 0.99, qPrintable(QString("top-1 agreement %1").arg(a.top1)));
    // fp16 weights and activations against fp32: far below what a broken
    // cache does (KL of 0.1 and more, tst_cpu_forward).
    QVERIFY2(a.kl_mean <= 0.01, qPrintable(QString("KL mean %1").arg(a.kl_mean)));
}

void TestCudaBackend::real_model_greedy_matches_the_cpu() {
    if (!real_) {
        QSKIP(qPrintable("needs the SmolLM2 model: " + real_problem_));
    }
    // Token for token until the CPU itself had a close call: fp16 rounding
    // may legitimately pick the other token of a near-tie, and everything
    // after it then differs.
    constexpr float kCloseCall = 0.25f;
    auto cpu = make_cpu(real_, 64, 16, {F::f16, F::f16});
    auto gpu = make_cuda(real_, 64, 16, {F::f16, F::f16});
    for (const QJsonValue& entry : golden_.value("greedy").toArray()) {
        const QJsonObject c = entry.toObject();
        const std::vector<std::int32_t> prompt = to_ids(c.value("prompt_ids"));
        const std::size_t count = static_cast<std::size_t>(c.value("tokens").toArray().size());
        std::vector<float> margins;
        const std::vector<std::int32_t> expected = greedy(*cpu, prompt, count, &margins);
        const std::vector<std::int32_t> got = greedy(*gpu, prompt, count);
        std::size_t pinned = 0;
        while (pinned < margins.size() && margins[pinned] >= kCloseCall) {
            ++pinned;
        }
        std::size_t same = 0;
        while (same < count && got[same] == expected[same]) {
            ++same;
        }
        qInfo("'%s': %zu of %zu greedy tokens identical to the CPU's; %zu before its first close "
              "call must be",
              qPrintable(c.value("prompt").toString()), same, count, pinned);
        if (same < pinned) {
            QFAIL(qPrintable(QString("token %1 is %2, the CPU's %3 (its margin %4)")
                                 .arg(same)
                                 .arg(got[same])
                                 .arg(expected[same])
                                 .arg(margins[same])));
        }
    }
}

void TestCudaBackend::captured_attention_matches_the_cpu_data() {
    add_format_rows();
}

void TestCudaBackend::captured_attention_matches_the_cpu() {
    QFETCH(kv::KvFormat, key);
    QFETCH(kv::KvFormat, value);
    // Two sequences, block size 4: A prefills 40 tokens capturing from
    // position 30, B 23 tokens capturing none; then both decode capturing
    // everything (the H2O pattern), then one plain step.
    const int vocab = tiny_->config().vocab;
    const std::vector<std::int32_t> ids = random_ids(80, vocab, 5);
    std::vector<std::vector<float>> captured[2];
    for (int which = 0; which < 2; ++which) {
        auto backend = which == 0 ? make_cpu(tiny_, 40, 4, {key, value})
                                  : make_cuda(tiny_, 40, 4, {key, value});
        kv::BlockAllocator allocator(backend->num_blocks());
        kv::SequenceBlocks a;
        kv::SequenceBlocks b;
        const auto run = [&](std::size_t a_from, std::size_t a_count, std::size_t b_from,
                             std::size_t b_count, std::int32_t a_capture, std::int32_t b_capture) {
            QVERIFY(kv::reserve(a, a.length + static_cast<std::int32_t>(a_count), 4, allocator));
            QVERIFY(kv::reserve(b, b.length + static_cast<std::int32_t>(b_count), 4, allocator));
            runner::SequenceStep steps[2] = {{&a, std::span(ids).subspan(a_from, a_count), false},
                                             {&b, std::span(ids).subspan(b_from, b_count), false}};
            steps[0].capture_attention_from = a_capture;
            steps[1].capture_attention_from = b_capture;
            const runner::ForwardBatch batch = runner::build_forward_batch(steps, 4);
            std::vector<float> logits(batch.logit_tokens.size() * static_cast<std::size_t>(vocab));
            backend->forward(batch, logits.data());
            for (std::size_t s = 0; s < 2; ++s) {
                const std::span<const float> sums = backend->captured_attention(s);
                captured[which].emplace_back(sums.begin(), sums.end());
            }
            a.length += static_cast<std::int32_t>(a_count);
            b.length += static_cast<std::int32_t>(b_count);
        };
        run(0, 40, 40, 23, 30, INT32_MAX);
        run(63, 1, 64, 1, 0, 0);
        run(65, 1, 66, 1, INT32_MAX, INT32_MAX);
    }
    QCOMPARE(captured[1].size(), captured[0].size());
    const double coarse = tiny_tolerance(key, value) > 0.05 ? 3.0 : 1.0;
    int compared = 0;
    for (std::size_t i = 0; i < captured[0].size(); ++i) {
        const std::vector<float>& expected = captured[0][i];
        const std::vector<float>& got = captured[1][i];
        QCOMPARE(got.size(), expected.size());
        for (std::size_t e = 0; e < expected.size(); ++e) {
            // Probabilities summed over layers, heads and tokens: rounding
            // of fp16 activations moves them by a little, relatively.
            const double allowed = coarse * (2e-3 + 2e-2 * std::abs(expected[e]));
            QVERIFY2(std::abs(got[e] - expected[e]) <= allowed,
                     qPrintable(QString("capture %1, entry %2: %3, the CPU's %4")
                                    .arg(i)
                                    .arg(e)
                                    .arg(got[e])
                                    .arg(expected[e])));
            ++compared;
        }
    }
    QVERIFY(compared > 0);
    // What was asked for: A's sums in the first step (B's entries there, all
    // zero), both in the second, none in the third.
    const auto nonzero = [](const std::vector<float>& sums) {
        return std::any_of(sums.begin(), sums.end(), [](float x) { return x != 0.0f; });
    };
    QCOMPARE(captured[1][0].size(), std::size_t{40});
    QVERIFY(nonzero(captured[1][0]));
    QCOMPARE(captured[1][1].size(), std::size_t{23});
    QVERIFY(!nonzero(captured[1][1]));
    QVERIFY(nonzero(captured[1][2]) && nonzero(captured[1][3]));
    QVERIFY(captured[1][4].empty() && captured[1][5].empty());
}

void TestCudaBackend::copy_slots_then_decoding_matches_the_cpu_data() {
    add_format_rows();
    QTest::newRow("K f16, V kivi2") << F::f16 << F::kivi2;
}

void TestCudaBackend::copy_slots_then_decoding_matches_the_cpu() {
    QFETCH(kv::KvFormat, key);
    QFETCH(kv::KvFormat, value);
    // Token eviction's compaction, as sched::compact_sequence does it: 23
    // entries in blocks of 4, entries 2, 9 and 10 dropped; the kept entries
    // rewritten from the start of the block holding the first moved one, the
    // block no longer needed released; then three decodes whose RoPE
    // positions continue from 23 while their cache entries follow 20.
    const int bs = 4;
    const int vocab = tiny_->config().vocab;
    const std::vector<std::int32_t> ids = random_ids(26, vocab, 3);
    const std::set<std::int32_t> dropped{2, 9, 10};
    std::vector<float> outputs[2];
    for (int which = 0; which < 2; ++which) {
        auto backend = which == 0 ? make_cpu(tiny_, 16, bs, {key, value})
                                  : make_cuda(tiny_, 16, bs, {key, value});
        kv::BlockAllocator allocator(backend->num_blocks());
        // Another sequence's block first, so the copied one is not block 0.
        kv::SequenceBlocks other;
        QVERIFY(kv::reserve(other, 1, bs, allocator));
        kv::SequenceBlocks seq;
        QVERIFY(kv::reserve(seq, 23, bs, allocator));
        {
            const runner::SequenceStep step{&seq, std::span(ids).subspan(0, 23), false};
            std::vector<float> logits(static_cast<std::size_t>(vocab));
            backend->forward(runner::build_forward_batch(std::span(&step, 1), bs), logits.data());
            seq.length = 23;
        }
        std::vector<std::int32_t> kept;
        for (std::int32_t e = 0; e < 23; ++e) {
            if (!dropped.contains(e)) {
                kept.push_back(e);
            }
        }
        const auto slot_of = [&](std::int32_t entry) {
            return seq.block_table[static_cast<std::size_t>(entry / bs)] * bs + entry % bs;
        };
        std::vector<std::int32_t> from;
        std::vector<std::int32_t> to;
        for (std::int32_t i = 0; i < static_cast<std::int32_t>(kept.size()); ++i) {
            from.push_back(slot_of(kept[static_cast<std::size_t>(i)]));
            to.push_back(slot_of(i));
        }
        backend->copy_slots(from, to);
        const auto new_length = static_cast<std::int32_t>(kept.size()); // 20: five blocks
        std::vector<kv::BlockId> released(seq.block_table.begin() + (new_length + bs - 1) / bs,
                                          seq.block_table.end());
        seq.block_table.resize(static_cast<std::size_t>((new_length + bs - 1) / bs));
        for (const kv::BlockId block : released) {
            allocator.free(block);
        }
        backend->release_blocks(released);
        seq.length = new_length;
        for (int i = 0; i < 3; ++i) {
            QVERIFY(kv::reserve(seq, seq.length + 1, bs, allocator));
            runner::SequenceStep step{&seq, std::span(ids).subspan(23 + i, 1), false};
            step.first_position = 23 + i;
            std::vector<float> logits(static_cast<std::size_t>(vocab));
            backend->forward(runner::build_forward_batch(std::span(&step, 1), bs), logits.data());
            outputs[which].insert(outputs[which].end(), logits.begin(), logits.end());
            seq.length += 1;
        }
    }
    const double tolerance = tiny_tolerance(key, value);
    const Agreement a = compare(outputs[0], outputs[1], vocab, 2 * tolerance);
    qInfo("%s: max |logit difference| %.3g after the compaction", QTest::currentDataTag(),
          a.max_abs);
    QVERIFY2(a.max_abs <= tolerance, qPrintable(QString("max |difference| %1").arg(a.max_abs)));
    QCOMPARE(a.clear_disagreements, 0);
}

void TestCudaBackend::blocks_moved_out_and_in_match_the_cpu_data() {
    add_format_rows();
    QTest::newRow("f32") << F::f32 << F::f32;
}

void TestCudaBackend::blocks_moved_out_and_in_match_the_cpu() {
    QFETCH(kv::KvFormat, key);
    QFETCH(kv::KvFormat, value);
    // The offload tier's copies: a 12-token prompt fills blocks 0-2 (of 4
    // tokens); their bytes go out and come back into blocks 8-10, and a
    // decode from the copies must give what one from the originals gives.
    // The CPU's bytes loaded into the GPU's pool must decode as the CPU
    // does: both backends lay a block's bytes out alike.
    const int bs = 4;
    const int vocab = tiny_->config().vocab;
    const std::vector<std::int32_t> ids = random_ids(13, vocab, 5);
    auto cpu = make_cpu(tiny_, 16, bs, {key, value});
    auto gpu = make_cuda(tiny_, 16, bs, {key, value});
    QCOMPARE(gpu->block_bytes(), cpu->block_bytes());
    QVERIFY(gpu->block_bytes() > 0);
    const auto bytes_per_block = static_cast<std::size_t>(gpu->block_bytes());
    const auto prefill = [&](runner::Backend& backend) {
        kv::SequenceBlocks seq;
        seq.block_table = {0, 1, 2, 3};
        const runner::SequenceStep step{&seq, std::span(ids).subspan(0, 12), false};
        std::vector<float> logits(static_cast<std::size_t>(vocab));
        backend.forward(runner::build_forward_batch(std::span(&step, 1), bs), logits.data());
    };
    // Decodes token 12 from the 12 entries in `table`'s first three blocks.
    const auto decode = [&](runner::Backend& backend, std::vector<kv::BlockId> table) {
        kv::SequenceBlocks seq;
        seq.block_table = std::move(table);
        seq.length = 12;
        const runner::SequenceStep step{&seq, std::span(ids).subspan(12, 1), false};
        std::vector<float> logits(static_cast<std::size_t>(vocab));
        backend.forward(runner::build_forward_batch(std::span(&step, 1), bs), logits.data());
        return logits;
    };
    const auto copy_out = [&](const runner::Backend& backend) {
        std::vector<std::vector<std::byte>> blocks(3, std::vector<std::byte>(bytes_per_block));
        for (int b = 0; b < 3; ++b) {
            backend.read_block(b, blocks[static_cast<std::size_t>(b)]);
        }
        return blocks;
    };
    const auto copy_in = [](runner::Backend& backend,
                            const std::vector<std::vector<std::byte>>& blocks) {
        for (int b = 0; b < 3; ++b) {
            backend.write_block(8 + b, blocks[static_cast<std::size_t>(b)]);
        }
    };
    prefill(*cpu);
    prefill(*gpu);
    const std::vector<float> cpu_original = decode(*cpu, {0, 1, 2, 3});
    const std::vector<float> gpu_original = decode(*gpu, {0, 1, 2, 3});

    copy_in(*gpu, copy_out(*gpu));
    const std::vector<float> gpu_copy = decode(*gpu, {8, 9, 10, 11});
    const Agreement same = compare(gpu_original, gpu_copy, vocab, 0.0);
    qInfo("%s: GPU blocks copied out and in: max |logit difference| %.3g", QTest::currentDataTag(),
          same.max_abs);
    QVERIFY2(same.max_abs <= 1e-5, qPrintable(QString("max |difference| %1").arg(same.max_abs)));

    copy_in(*gpu, copy_out(*cpu));
    const std::vector<float> cpu_bytes_on_gpu = decode(*gpu, {8, 9, 10, 11});
    const double tolerance = tiny_tolerance(key, value);
    const Agreement a = compare(cpu_original, cpu_bytes_on_gpu, vocab, 2 * tolerance);
    qInfo("%s: the CPU's blocks on the GPU: max |logit difference| %.3g", QTest::currentDataTag(),
          a.max_abs);
    QVERIFY2(a.max_abs <= tolerance, qPrintable(QString("max |difference| %1").arg(a.max_abs)));
    QCOMPARE(a.clear_disagreements, 0);

    // Another block's bytes would not do: the test can tell.
    std::vector<std::byte> wrong(bytes_per_block);
    gpu->read_block(0, wrong);
    gpu->write_block(10, wrong);
    const Agreement moved = compare(gpu_original, decode(*gpu, {8, 9, 10, 11}), vocab, 0.0);
    QVERIFY2(moved.max_abs > 1e-3, qPrintable(QString("max |difference| %1").arg(moved.max_abs)));
    // Bad arguments are refused, on the host.
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, gpu->read_block(16, wrong));
    std::vector<std::byte> short_buffer(bytes_per_block - 1);
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, gpu->write_block(1, short_buffer));
}

void TestCudaBackend::ops_are_timed_on_the_host_clock() {
    auto gpu = make_cuda(tiny_, 16, 16, {F::f16, F::f16});
    RecordingObserver observer;
    gpu->set_op_observer(&observer);
    const std::vector<std::int32_t> ids = random_ids(20, tiny_->config().vocab, 9);
    const std::int64_t before = host_now_ns();
    logits_in_chunks(*gpu, ids, {20});
    const std::int64_t after = host_now_ns();
    const int layers = tiny_->config().layers;
    // The CPU backend's op names, per layer, plus the embedding and the head;
    // a 16-bit cache's RoPE and KV write are one kernel, so one op.
    const std::vector<std::string> per_layer{"attn_norm", "qkv",      "rope_kv_write", "attention",
                                             "attn_out",  "ffn_norm", "gate_up",       "down"};
    QCOMPARE(observer.ops.size(), per_layer.size() * static_cast<std::size_t>(layers) + 2);
    QCOMPARE(observer.ops.front().name, std::string("embedding"));
    QCOMPARE(observer.ops.back().name, std::string("lm_head"));
    QCOMPARE(observer.ops.back().layer, -1);
    std::int64_t last_end = before;
    for (std::size_t i = 0; i < observer.ops.size(); ++i) {
        const RecordingObserver::Op& op = observer.ops[i];
        if (i >= 1 && i + 1 < observer.ops.size()) {
            QCOMPARE(op.name, per_layer[(i - 1) % per_layer.size()]);
            QCOMPARE(op.layer, static_cast<int>((i - 1) / per_layer.size()));
        }
        // In stream order, within the call, each taking some time.
        QVERIFY2(op.begin_ns <= op.end_ns, op.name.c_str());
        QVERIFY2(op.begin_ns + 1000 >= last_end, op.name.c_str()); // 1 us of event resolution
        QVERIFY2(op.end_ns <= after, op.name.c_str());
        last_end = op.end_ns;
    }
    gpu->set_op_observer(nullptr);
    observer.ops.clear();
    logits_in_chunks(*gpu, ids, {20});
    QVERIFY(observer.ops.empty());
}

void TestCudaBackend::recorded_decodes_replay_graphs_with_their_op_times() {
    // Decodes recorded for a profile (op timing on) replay their decode
    // graph, the timing events inside it as event record nodes: the ops come
    // out step by step in stream order on the host clock, and the logits are
    // an unrecorded backend's, bit for bit.
    const std::vector<std::int32_t> ids = random_ids(24, tiny_->config().vocab, 13);
    const std::vector<int> chunks{20, 1, 1, 1, 1}; // a prefill, then four decodes
    auto plain = make_cuda(tiny_, 16, 16, {F::f16, F::f16});
    const std::vector<float> expected = logits_in_chunks(*plain, ids, chunks);
    auto recorded = make_cuda(tiny_, 16, 16, {F::f16, F::f16});
    RecordingObserver observer;
    recorded->set_op_observer(&observer);
    const std::int64_t before = host_now_ns();
    const std::vector<float> got = logits_in_chunks(*recorded, ids, chunks);
    const std::int64_t after = host_now_ns();
    recorded->set_op_observer(nullptr);
    QVERIFY(got == expected);
    const auto* gpu = dynamic_cast<const cuda::CudaBackend*>(recorded.get());
    QCOMPARE(gpu->decode_graph_replays(), std::int64_t{4}); // the first captured it
    const int layers = tiny_->config().layers;
    const std::vector<std::string> per_layer{"attn_norm", "qkv",      "rope_kv_write", "attention",
                                             "attn_out",  "ffn_norm", "gate_up",       "down"};
    const std::size_t per_step = per_layer.size() * static_cast<std::size_t>(layers) + 2;
    QCOMPARE(observer.ops.size(), 5 * per_step);
    std::int64_t last_end = before;
    for (std::size_t i = 0; i < observer.ops.size(); ++i) {
        const RecordingObserver::Op& op = observer.ops[i];
        const std::size_t at = i % per_step;
        if (at == 0) {
            QCOMPARE(op.name, std::string("embedding"));
        } else if (at + 1 == per_step) {
            QCOMPARE(op.name, std::string("lm_head"));
        } else {
            QCOMPARE(op.name, per_layer[(at - 1) % per_layer.size()]);
            QCOMPARE(op.layer, static_cast<int>((at - 1) / per_layer.size()));
        }
        QVERIFY2(op.begin_ns <= op.end_ns, op.name.c_str());
        QVERIFY2(op.begin_ns + 1000 >= last_end, op.name.c_str()); // 1 us of event resolution
        QVERIFY2(op.end_ns <= after, op.name.c_str());
        last_end = op.end_ns;
    }
}

void TestCudaBackend::device_memory_is_accounted() {
    auto gpu = make_cuda(tiny_, 32, 16, {F::kivi4, F::kivi4});
    const std::optional<runner::DeviceMemory> idle = gpu->device_memory();
    QVERIFY(idle.has_value());
    QVERIFY(idle->weights > 0);
    // No KIVI block open yet: the pool alone, its spare padding block included.
    QVERIFY(idle->kv_pool >= gpu->kv_cache_bytes());
    QCOMPARE(idle->kv_pool, gpu->kv_cache_bytes() / 32 * 33);
    QVERIFY(idle->free > 0 && idle->free <= idle->total);
    logits_in_chunks(*gpu, random_ids(40, tiny_->config().vocab, 1), {40});
    const std::optional<runner::DeviceMemory> busy = gpu->device_memory();
    QVERIFY(busy->activations > 0);
    QVERIFY(busy->kv_pool > gpu->kv_cache_bytes()); // the open block's fp32 copy
    QCOMPARE(busy->weights, idle->weights);
    // The CPU backend has no device.
    QVERIFY(!make_cpu(tiny_, 4, 16, {})->device_memory().has_value());
}

void TestCudaBackend::bad_batches_are_refused() {
    auto gpu = make_cuda(tiny_, 4, 16, {F::f16, F::f16});
    kv::BlockAllocator allocator(gpu->num_blocks());
    kv::SequenceBlocks seq;
    QVERIFY(kv::reserve(seq, 3, 16, allocator));
    const std::vector<std::int32_t> ids{1, 2, 3};
    const runner::SequenceStep step{&seq, ids, false};
    const runner::ForwardBatch good = runner::build_forward_batch(std::span(&step, 1), 16);
    std::vector<float> logits(static_cast<std::size_t>(gpu->vocab_size()));
    runner::ForwardBatch bad = good;
    bad.slot_mapping[1] = 4 * 16; // one past the pool
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, gpu->forward(bad, logits.data()));
    bad = good;
    bad.token_ids[0] = gpu->vocab_size();
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, gpu->forward(bad, logits.data()));
    bad = good;
    bad.block_tables[0] = 9;
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, gpu->forward(bad, logits.data()));
    bad = good;
    bad.cache_positions[2] = 16; // past the sequence's one block
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, gpu->forward(bad, logits.data()));
    // Still usable after refusing them.
    gpu->forward(good, logits.data());
    QVERIFY(std::all_of(logits.begin(), logits.end(), [](float x) { return std::isfinite(x); }));
    const std::vector<std::int32_t> from{0, 1};
    const std::vector<std::int32_t> to{2};
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, gpu->copy_slots(from, to));
    // A pool larger than the device is refused with the sizes, not a crash.
    const std::int64_t huge = std::int64_t{1} << 40;
    const std::int64_t per_block = gpu->kv_cache_bytes() / gpu->num_blocks();
    try {
        make_cuda(tiny_, static_cast<int>(std::min<std::int64_t>(huge / per_block, INT32_MAX / 16)),
                  16, {F::f16, F::f16});
        QFAIL("a 1 TiB KV pool was allocated");
    } catch (const std::runtime_error& e) {
        QVERIFY2(QString(e.what()).contains("does not fit"), e.what());
    }
}

// Plain decode steps replay captured graphs, padded to their bucket: the
// same logits as launching every kernel (to the rounding of cuBLAS picking
// other algorithms for other row counts), through batch sizes that change
// bucket and contexts that cross attention splits.
void TestCudaBackend::decode_graphs_replay_the_eager_logits() {
    const int vocab = tiny_->config().vocab;
    const std::vector<std::int32_t> ids = random_ids(2000, vocab, 21);
    std::vector<float> outputs[2];
    std::unique_ptr<runner::Backend> backends[2];
    // The graphed backend samples greedily on the device every third step:
    // graphs replayed by forward and forward_sampled alike, with row counts
    // that change within a bucket (4 then 3 sequences in bucket 4).
    std::vector<std::vector<std::int32_t>> sampled_steps;
    std::vector<std::vector<float>> eager_steps;
    for (int which = 0; which < 2; ++which) {
        backends[which] = make_cuda(tiny_, 256, 16, {F::f16, F::f16}, /*graphs=*/which == 1);
        runner::Backend& backend = *backends[which];
        kv::BlockAllocator allocator(backend.num_blocks());
        std::vector<kv::SequenceBlocks> seqs(5);
        std::vector<std::size_t> done(5, 0);
        // Prefill: 200 to 240 tokens each, so decodes cross 256 entries.
        for (std::size_t s = 0; s < seqs.size(); ++s) {
            const std::size_t n = 200 + 10 * s;
            QVERIFY(kv::reserve(seqs[s], static_cast<std::int32_t>(n), 16, allocator));
            const runner::SequenceStep step{&seqs[s], std::span(ids).subspan(300 * s, n)};
            std::vector<float> out(static_cast<std::size_t>(vocab));
            backend.forward(runner::build_forward_batch({&step, 1}, 16), out.data());
            seqs[s].length = static_cast<std::int32_t>(n);
            done[s] = n;
        }
        // 70 decode steps; sequence 4 stops after 20 (bucket 8 -> 4), 3 after 40.
        for (int step = 0; step < 70; ++step) {
            std::vector<runner::SequenceStep> steps;
            std::vector<std::size_t> active;
            for (std::size_t s = 0; s < seqs.size(); ++s) {
                if ((s == 4 && step >= 20) || (s == 3 && step >= 40)) {
                    continue;
                }
                QVERIFY(kv::reserve(seqs[s], seqs[s].length + 1, 16, allocator));
                steps.push_back({&seqs[s], std::span(ids).subspan(300 * s + done[s], 1)});
                active.push_back(s);
            }
            const runner::ForwardBatch batch = runner::build_forward_batch(steps, 16);
            std::vector<float> out(steps.size() * static_cast<std::size_t>(vocab));
            if (which == 1 && step % 3 == 2) {
                std::vector<runner::RowSampling> greedy(steps.size());
                std::vector<std::int32_t> picked(steps.size(), -1);
                backend.forward_sampled(batch, greedy, picked.data());
                sampled_steps.push_back(picked);
            } else {
                backend.forward(batch, out.data());
                if (which == 0 && step % 3 == 2) {
                    eager_steps.push_back(out);
                } else {
                    outputs[which].insert(outputs[which].end(), out.begin(), out.end());
                }
            }
            for (const std::size_t s : active) {
                seqs[s].length += 1;
                done[s] += 1;
            }
        }
    }
    const auto* eager = dynamic_cast<const cuda::CudaBackend*>(backends[0].get());
    const auto* graphed = dynamic_cast<const cuda::CudaBackend*>(backends[1].get());
    QCOMPARE(eager->decode_graph_replays(), std::int64_t{0});
    QCOMPARE(graphed->decode_graph_replays(), std::int64_t{70});
    // The device's greedy picks are the eager logits' argmax wherever the
    // top two are clearly apart.
    QCOMPARE(sampled_steps.size(), eager_steps.size());
    int checked = 0;
    for (std::size_t i = 0; i < sampled_steps.size(); ++i) {
        for (std::size_t r = 0; r < sampled_steps[i].size(); ++r) {
            const float* row = eager_steps[i].data() + r * static_cast<std::size_t>(vocab);
            std::vector<float> sorted(row, row + vocab);
            std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
            if (sorted[0] - sorted[1] < 0.02f) {
                continue;
            }
            QCOMPARE(sampled_steps[i][r],
                     static_cast<std::int32_t>(std::max_element(row, row + vocab) - row));
            ++checked;
        }
    }
    QVERIFY(checked > 20);
    // Buckets 8 (5 sequences) and 4 (4 and 3), each over growing launch
    // contexts.
    QVERIFY2(graphed->decode_graph_count() >= 3,
             qPrintable(QString::number(graphed->decode_graph_count())));
    const Agreement a = compare(outputs[0], outputs[1], vocab, 0.02);
    qInfo("graphs vs eager: max |logit difference| %.3g, top-1 %.4f", a.max_abs, a.top1);
    QVERIFY(a.max_abs <= 0.01);
    QCOMPARE(a.clear_disagreements, 0);
}

// Steps whose kernels start while the one before ends (overlapped launches)
// give the logits of steps whose kernels run strictly in turn, bit for bit,
// replayed from graphs and launched one by one, and the same greedy tokens
// sampled on the device: on Llama, Qwen2 (QKV bias) and Gemma 3 (post-norms,
// GeGLU, windows).
void TestCudaBackend::overlapped_steps_match_steps_in_turn() {
    if (!kernels::device_overlaps_launches(0)) {
        QSKIP("this GPU (or this build's targets) cannot overlap launches: nothing to compare");
    }
    struct Variant {
        const char* name;
        bool graphs;
        bool overlap;
        kernels::WideRowFetch rows = kernels::WideRowFetch::registers;
    };
    // The last: 16-bit K and V rows through the attention's shared-memory
    // ring (wide_row_fetch.h), which computes the same values in the same
    // order (these contexts, 72 entries at most, take the same splits).
    const Variant variants[] = {
        {"in turn", true, false},
        {"overlapped", true, true},
        {"overlapped, eager", false, true},
        {"overlapped, rows through the ring", true, true, kernels::WideRowFetch::ring}};
    std::vector<std::shared_ptr<const model::LlamaModel>> models{tiny_};
    for (const char* file : {"tiny_qwen2.gguf", "tiny_gemma3.gguf"}) {
        models.push_back(model::LlamaModel::load(test::engine_data_path(file).toStdString()));
    }
    for (const std::shared_ptr<const model::LlamaModel>& model : models) {
        const int vocab = model->config().vocab;
        const std::vector<std::int32_t> ids = random_ids(600, vocab, 23);
        std::vector<float> outputs[std::size(variants)];
        std::vector<std::int32_t> sampled[std::size(variants)];
        for (std::size_t which = 0; which < std::size(variants); ++which) {
            const Variant& variant = variants[which];
            // A plain cache (one table a sequence; Gemma's windows still apply).
            cuda::CudaBackendOptions options =
                cuda_options(128, 16, {F::f16, F::f16}, variant.graphs, /*hybrid=*/false);
            options.overlap_launches = variant.overlap;
            options.wide_row_fetch = variant.rows;
            cuda::CudaBackend backend(model, options);
            kv::BlockAllocator allocator(backend.num_blocks());
            std::vector<kv::SequenceBlocks> seqs(3);
            // Prefill 40 tokens each (past the GEMV's 8 tokens: cuBLAS), then
            // 24 decode steps of 3 tokens and 8 of 2 (sequence 2 done), every
            // fourth sampled greedily on the device (the argmax kernel).
            for (std::size_t s = 0; s < seqs.size(); ++s) {
                QVERIFY(kv::reserve(seqs[s], 40, 16, allocator));
                const runner::SequenceStep step{&seqs[s], std::span(ids).subspan(100 * s, 40)};
                std::vector<float> out(static_cast<std::size_t>(vocab));
                backend.forward(runner::build_forward_batch({&step, 1}, 16), out.data());
                seqs[s].length = 40;
            }
            for (int step = 0; step < 32; ++step) {
                std::vector<runner::SequenceStep> steps;
                for (std::size_t s = 0; s < (step < 24 ? 3u : 2u); ++s) {
                    QVERIFY(kv::reserve(seqs[s], seqs[s].length + 1, 16, allocator));
                    steps.push_back({&seqs[s], std::span(ids).subspan(100 * s + 40 + step, 1)});
                }
                const runner::ForwardBatch batch = runner::build_forward_batch(steps, 16);
                if (step % 4 == 3) {
                    const std::vector<runner::RowSampling> greedy(steps.size());
                    std::vector<std::int32_t> picked(steps.size(), -1);
                    backend.forward_sampled(batch, greedy, picked.data());
                    sampled[which].insert(sampled[which].end(), picked.begin(), picked.end());
                } else {
                    std::vector<float> out(steps.size() * static_cast<std::size_t>(vocab));
                    backend.forward(batch, out.data());
                    outputs[which].insert(outputs[which].end(), out.begin(), out.end());
                }
                for (std::size_t s = 0; s < steps.size(); ++s) {
                    seqs[s].length += 1;
                }
            }
            QCOMPARE(backend.decode_graph_replays(), std::int64_t{variant.graphs ? 32 : 0});
        }
        const std::string name = model->config().architecture;
        for (std::size_t which = 1; which < std::size(variants); ++which) {
            qInfo("%s, %s: %s", name.c_str(), variants[which].name,
                  outputs[which] == outputs[0] && sampled[which] == sampled[0]
                      ? "the same logits and tokens as in turn"
                      : "differs from in turn");
            QVERIFY2(outputs[which] == outputs[0], name.c_str());
            QVERIFY2(sampled[which] == sampled[0], name.c_str());
        }
    }
}

// forward_sampled on the GPU picks what sampling::pick_token picks from the
// GPU's own logits with the same draws (rows whose draw sits within fp32
// rounding of a boundary aside), greedy rows included, in one batch.
void TestCudaBackend::sampling_on_the_device_picks_by_the_host_rule() {
    auto gpu = make_cuda(tiny_, 64, 16, {F::f16, F::f16});
    QVERIFY(gpu->samples_on_device());
    const int vocab = tiny_->config().vocab;
    kv::BlockAllocator allocator(gpu->num_blocks());
    std::vector<kv::SequenceBlocks> seqs(6);
    const std::vector<std::int32_t> ids = random_ids(600, vocab, 31);
    std::vector<runner::SequenceStep> steps;
    for (std::size_t s = 0; s < seqs.size(); ++s) {
        QVERIFY(kv::reserve(seqs[s], 40, 16, allocator));
        steps.push_back({&seqs[s], std::span(ids).subspan(100 * s, 20 + 3 * s)});
    }
    const runner::ForwardBatch batch = runner::build_forward_batch(steps, 16);
    std::vector<float> logits(batch.logit_tokens.size() * static_cast<std::size_t>(vocab));
    gpu->forward(batch, logits.data());
    std::vector<runner::RowSampling> rows;
    const float temperatures[] = {0.0f, 0.7f, 1.0f, 1.5f, 0.9f, 0.0f};
    for (std::size_t r = 0; r < seqs.size(); ++r) {
        rows.push_back({temperatures[r], r == 2 ? 0 : 40, r == 3 ? 0.9f : 1.0f,
                        r == 4 ? 0.05f : 0.0f, 0.13 + 0.15 * static_cast<double>(r)});
    }
    std::vector<std::int32_t> tokens(rows.size(), -1);
    gpu->forward_sampled(batch, rows, tokens.data()); // the same K/V again, then sampling
    int compared = 0;
    for (std::size_t r = 0; r < rows.size(); ++r) {
        const std::span<const float> row(logits.data() + r * static_cast<std::size_t>(vocab),
                                         static_cast<std::size_t>(vocab));
        sampling::SamplingParams p;
        p.temperature = rows[r].temperature;
        p.top_k = rows[r].top_k;
        p.top_p = rows[r].top_p;
        p.min_p = rows[r].min_p;
        const std::int32_t expected = sampling::pick_token(row, p, rows[r].uniform);
        if (sampling::pick_token(row, p, rows[r].uniform - 2e-4) != expected ||
            sampling::pick_token(row, p, rows[r].uniform + 2e-4) != expected) {
            continue;
        }
        QCOMPARE(tokens[r], expected);
        ++compared;
    }
    QVERIFY(compared >= 4);
}

// The architectures beyond Llama on their tiny random-weight files (QKV
// bias, QK norms, Gemma's post-norms, GELU gate, scaled embedding, NEOX
// RoPE, per-layer windows and RoPE bases): the same batches through the CPU
// and the GPU. Gemma's window of 8 slides over blocks of 4, so with the
// hybrid cache its sliding groups let blocks go (kNoBlock in their tables)
// during the prefill, the decodes (graphed or not) and the chunks.
void TestCudaBackend::tiny_architectures_match_the_cpu_data() {
    QTest::addColumn<QString>("file");
    QTest::addColumn<bool>("hybrid");
    QTest::addColumn<bool>("graphs");
    QTest::addColumn<kv::KvFormat>("key");
    QTest::addColumn<kv::KvFormat>("value");
    for (const char* file : {"tiny_qwen2.gguf", "tiny_qwen3.gguf", "tiny_gemma3.gguf"}) {
        const QString name = QString(file).chopped(5);
        // Qwen has one KV group either way: one row for it.
        const std::vector<bool> hybrids =
            name == "tiny_gemma3" ? std::vector<bool>{true, false} : std::vector<bool>{true};
        for (const bool hybrid : hybrids) {
            for (const bool graphs : {true, false}) {
                for (const F format : {F::f16, F::q8_0}) {
                    QTest::addRow("%s %s %s %s", qPrintable(name), hybrid ? "hybrid" : "plain",
                                  graphs ? "graphs" : "eager", kv::kv_format_name(format).data())
                        << QString(file) << hybrid << graphs << format << format;
                }
            }
        }
        // KIVI on a plain cache, its decodes replaying graphs (the blocks a
        // step fills, every fourth step at block size 4, counted on the
        // device) and eager.
        for (const bool graphs : {true, false}) {
            QTest::addRow("%s plain %s kivi4", qPrintable(name), graphs ? "graphs" : "eager")
                << QString(file) << false << graphs << F::kivi4 << F::kivi4;
        }
    }
}

void TestCudaBackend::tiny_architectures_match_the_cpu() {
    QFETCH(QString, file);
    QFETCH(bool, hybrid);
    QFETCH(bool, graphs);
    QFETCH(kv::KvFormat, key);
    QFETCH(kv::KvFormat, value);
    const auto model = model::LlamaModel::load(test::engine_data_path(file).toStdString());
    const int vocab = model->config().vocab;
    // Block size 4: Gemma's window of 8 spans blocks, and several leave it.
    // Room for the hybrid cache's six groups.
    constexpr int kBlocks = 128;
    constexpr int kBlock = 4;
    auto cpu = make_cpu(model, kBlocks, kBlock, {key, value}, hybrid);
    auto gpu = make_cuda(model, kBlocks, kBlock, {key, value}, graphs, hybrid);

    // The same grouping of layers, so one KV manager's tables serve both.
    const kv::KvGroupLayout cpu_groups = cpu->kv_groups();
    const kv::KvGroupLayout gpu_groups = gpu->kv_groups();
    QCOMPARE(gpu_groups.group_count(), cpu_groups.group_count());
    QCOMPARE(gpu_groups.windows(), cpu_groups.windows());
    QCOMPARE(gpu_groups.group_of, cpu_groups.group_of);
    QCOMPARE(gpu_groups.slot_of, cpu_groups.slot_of);
    QCOMPARE(gpu_groups.layers_per_block, cpu_groups.layers_per_block);
    QCOMPARE(cpu_groups.hybrid(), hybrid && model->config().hybrid());

    // 60 tokens: a 20-token prefill, 12 decodes, 4 chunks of 5, 8 decodes.
    const std::vector<std::int32_t> ids = random_ids(60, vocab, 17);
    std::vector<int> chunks{20};
    chunks.insert(chunks.end(), 12, 1);
    chunks.insert(chunks.end(), 4, 5);
    chunks.insert(chunks.end(), 8, 1);
    const std::int64_t decodes = std::count(chunks.begin(), chunks.end(), 1);

    // The CPU, the GPU, and for a coarse format the CPU in f32.
    std::unique_ptr<runner::Backend> f32;
    std::vector<runner::Backend*> backends{cpu.get(), gpu.get()};
    if (coarse_format(key, value)) {
        f32 = make_cpu(model, kBlocks, kBlock, {F::f32, F::f32}, hybrid);
        backends.push_back(f32.get());
    }
    std::vector<std::vector<float>> outputs(backends.size());
    const int let_go = lockstep_in_chunks(
        backends, ids, chunks,
        [&outputs](std::size_t, const std::vector<std::vector<float>>& logits) {
            for (std::size_t b = 0; b < logits.size(); ++b) {
                outputs[b].insert(outputs[b].end(), logits[b].begin(), logits[b].end());
            }
        });
    if (cpu_groups.hybrid()) {
        QVERIFY2(let_go > 10, qPrintable(QString("the windows let %1 blocks go").arg(let_go)));
    } else {
        QCOMPARE(let_go, 0);
    }
    const auto* cuda_backend = dynamic_cast<const cuda::CudaBackend*>(gpu.get());
    // KIVI's decodes too: the blocks a step fills are counted on the device.
    QCOMPARE(cuda_backend->decode_graph_replays(), graphs ? decodes : std::int64_t{0});

    if (coarse_format(key, value)) {
        VERIFY_FORMAT_LOSS(outputs[2], outputs[0], outputs[1]);
        return;
    }
    const double tolerance = tiny_tolerance(key, value);
    const Agreement a = compare(outputs[0], outputs[1], vocab, 2 * tolerance);
    qInfo("%s: %d blocks let go; max |logit difference| %.3g, KL mean %.3g max %.3g, top-1 %.4f "
          "(%d close calls)",
          QTest::currentDataTag(), let_go, a.max_abs, a.kl_mean, a.kl_max, a.top1, a.close_calls);
    QVERIFY2(a.max_abs <= tolerance, qPrintable(QString("max |difference| %1").arg(a.max_abs)));
    QCOMPARE(a.clear_disagreements, 0);
}

void TestCudaBackend::tiny_architectures_match_transformers_data() {
    test::add_tiny_arch_rows();
}

// tst_architectures' comparison with transformers in fp32, on the GPU (with
// its default hybrid cache, in f16), as one pass, token by token (the
// decode graphs) and in chunks of 5.
void TestCudaBackend::tiny_architectures_match_transformers() {
    QFETCH(QString, file);
    QFETCH(QList<int>, chunks);
    const QJsonObject golden = test::tiny_arch_golden(file);
    QVERIFY2(!golden.isEmpty(), qPrintable("no golden logits for " + file));
    const auto model = model::LlamaModel::load(test::engine_data_path(file).toStdString());
    const std::vector<std::int32_t> ids = to_ids(golden["ids"]);
    auto gpu = make_cuda(model, 64, 4, {F::f16, F::f16});
    const std::vector<float> ours =
        logits_in_chunks(*gpu, ids, std::vector<int>(chunks.begin(), chunks.end()));
    const int vocab = gpu->vocab_size();
    const QJsonArray rows = golden["logits"].toArray();
    QCOMPARE(static_cast<std::size_t>(rows.size()), ids.size());
    std::vector<float> reference;
    for (const QJsonValue& row : rows) {
        QCOMPARE(row.toArray().size(), vocab);
        for (const QJsonValue& logit : row.toArray()) {
            reference.push_back(static_cast<float>(logit.toDouble()));
        }
    }
    // The CPU in fp32 is within 2e-3 of transformers (tst_architectures);
    // the GPU's fp16 weights, activations and cache add the rounding it
    // shows against the CPU (tiny_tolerance), and a little more. A wrong
    // step (a missing norm, the other RoPE pairing, an unmasked window)
    // moves logits by tenths or more.
    const double tolerance = tiny_tolerance(F::f16, F::f16) + 0.01;
    const Agreement a = compare(reference, ours, vocab, 2 * tolerance);
    qInfo("%s: max |logit - transformers| %.3g, KL mean %.3g max %.3g, top-1 %.4f (%d close calls)",
          QTest::currentDataTag(), a.max_abs, a.kl_mean, a.kl_max, a.top1, a.close_calls);
    QVERIFY2(a.max_abs <= tolerance, qPrintable(QString("max |difference| %1").arg(a.max_abs)));
    QCOMPARE(a.clear_disagreements, 0);
}

// The real Gemma 3 270M with its hybrid cache in f16: the golden text of
// tst_gemma3_forward (638 tokens), in chunks of 64 up to its 512-token
// window and then token by token (the decode graphs) past it, while its
// sliding groups let go of what the window left. Teacher-forced, as
// real_model_teacher_forced_agrees_with_the_cpu does for SmolLM2.
void TestCudaBackend::gemma3_270m_long_prompt_matches_the_cpu() {
    const QJsonObject golden = test::load_golden("golden_gemma3.json");
    if (golden.isEmpty()) {
        QSKIP("tests/engine/data/golden_gemma3.json is missing");
    }
    const ModelPath path = test::gemma3_model_path();
    if (const QString problem = test::golden_model_problem(golden, path); !problem.isEmpty()) {
        QSKIP(qPrintable("needs the Gemma 3 270M model: " + problem));
    }
    const auto gemma = model::LlamaModel::load(path.path);
    QVERIFY(gemma->config().hybrid());
    const std::vector<std::int32_t> ids =
        to_ids(golden.value("teacher_forced").toObject().value("ids"));
    const int window = gemma->config().sliding_window;
    QVERIFY2(static_cast<int>(ids.size()) > window + 64, "the text must pass the window");

    const int block_size = 16;
    const int groups = model::kv_group_layout(gemma->config()).group_count();
    const int num_blocks = (static_cast<int>(ids.size()) / block_size + 2) * groups;
    auto cpu = make_cpu(gemma, num_blocks, block_size, {F::f16, F::f16});
    auto gpu = make_cuda(gemma, num_blocks, block_size, {F::f16, F::f16});
    QCOMPARE(gpu->kv_groups().group_count(), cpu->kv_groups().group_count());
    QCOMPARE(gpu->kv_groups().windows(), cpu->kv_groups().windows());
    QVERIFY(cpu->kv_groups().hybrid());
    const int vocab = cpu->vocab_size();

    const int prefill = window / 64 * 64;
    std::vector<int> chunks(static_cast<std::size_t>(window / 64), 64);
    chunks.insert(chunks.end(), ids.size() - static_cast<std::size_t>(prefill), 1);

    // Scored as the chunks come (all at once would be 638 x 262,144 floats
    // a backend): shares of the rows, weighted by rows.
    struct Tally {
        double rows = 0, top1 = 0, kl_mean = 0, kl_max = 0, max_abs = 0;
        int close_calls = 0, clear_disagreements = 0;
        void add(const Agreement& a, std::size_t n) {
            rows += double(n);
            top1 += a.top1 * double(n);
            kl_mean += a.kl_mean * double(n);
            kl_max = std::max(kl_max, a.kl_max);
            max_abs = std::max(max_abs, a.max_abs);
            close_calls += a.close_calls;
            clear_disagreements += a.clear_disagreements;
        }
        double share(double sum) const { return rows > 0 ? sum / rows : 0; }
    };
    Tally all;
    Tally past_window;
    std::vector<runner::Backend*> backends{cpu.get(), gpu.get()};
    const int let_go = lockstep_in_chunks(
        backends, ids, chunks,
        [&](std::size_t first, const std::vector<std::vector<float>>& logits) {
            const std::size_t n = logits[0].size() / static_cast<std::size_t>(vocab);
            const Agreement a = compare(logits[0], logits[1], vocab, test::kNearTieMargin);
            all.add(a, n);
            if (static_cast<int>(first) >= window) {
                past_window.add(a, n);
            }
        });
    const auto* cuda_backend = dynamic_cast<const cuda::CudaBackend*>(gpu.get());
    qInfo("CUDA against the CPU, hybrid f16, %zu positions (%d blocks let go, %lld decodes "
          "replayed): top-1 %.4f, KL mean %.3g max %.3g, max |logit difference| %.3g, %d close "
          "calls; past the window (%.0f positions): top-1 %.4f, KL mean %.3g max %.3g",
          ids.size(), let_go, static_cast<long long>(cuda_backend->decode_graph_replays()),
          all.share(all.top1), all.share(all.kl_mean), all.kl_max, all.max_abs, all.close_calls,
          past_window.rows, past_window.share(past_window.top1),
          past_window.share(past_window.kl_mean), past_window.kl_max);
    QVERIFY2(let_go > 0, "the sliding groups should have let blocks go");
    QCOMPARE(cuda_backend->decode_graph_replays(), static_cast<std::int64_t>(ids.size()) - prefill);
    QVERIFY(past_window.rows > 0);
    const double top1 = all.share(all.top1);
    const double top1_past = past_window.share(past_window.top1);
    QVERIFY2(top1 >= 0.99, qPrintable(QString("top-1 agreement %1").arg(top1)));
    QVERIFY2(top1_past >= 0.99, qPrintable(QString("top-1 past the window %1").arg(top1_past)));
    // fp16 weights and activations against fp32, as for SmolLM2: far below
    // what a wrong window or a block read after it was let go does.
    QVERIFY2(all.share(all.kl_mean) <= 0.01,
             qPrintable(QString("KL mean %1").arg(all.share(all.kl_mean))));
    QVERIFY2(
        past_window.share(past_window.kl_mean) <= 0.01,
        qPrintable(
            QString("KL mean past the window %1").arg(past_window.share(past_window.kl_mean))));
}

QTEST_GUILESS_MAIN(TestCudaBackend)
#include "tst_cuda_backend.moc"
