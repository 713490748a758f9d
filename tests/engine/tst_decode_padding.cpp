// The padding of decode steps to a CUDA graph's bucket (engine/cuda/
// decode_padding.h), which needs no GPU: which steps qualify, the buckets,
// and that a padded batch gives the real rows the logits of the unpadded one
// when the CPU backend runs both over a pool with the spare block.
#include "engine/cpu/cpu_backend.h"
#include "engine/cuda/decode_padding.h"
#include "engine/kv/block_allocator.h"
#include "engine/model/llama_model.h"
#include "engine/runner/forward_batch.h"
#include "tests/support/tiny_model.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include <QTest>

using namespace kvscope;

class TestDecodePadding : public QObject {
    Q_OBJECT

private slots:
    void buckets();
    void attention_splits_shorten_for_few_tokens();
    void only_plain_decodes_qualify();
    void padded_rows_leave_real_logits_unchanged_data();
    void padded_rows_leave_real_logits_unchanged();
};

void TestDecodePadding::buckets() {
    QCOMPARE(cuda::decode_bucket(1), std::optional(1));
    QCOMPARE(cuda::decode_bucket(3), std::optional(4));
    QCOMPARE(cuda::decode_bucket(128), std::optional(128));
    QCOMPARE(cuda::decode_bucket(129), std::optional(256));
    QCOMPARE(cuda::decode_bucket(512), std::optional(512));
    QCOMPARE(cuda::decode_bucket(513), std::optional<int>());
    QCOMPARE(cuda::split_bucket(1, 256), 1);
    QCOMPARE(cuda::split_bucket(256, 256), 1);
    QCOMPARE(cuda::split_bucket(257, 256), 2);
    QCOMPARE(cuda::split_bucket(769, 256), 4);
    QCOMPARE(cuda::split_bucket(4096, 256), 16);
}

void TestDecodePadding::attention_splits_shorten_for_few_tokens() {
    // An H100's 132 multiprocessors want 264 blocks of tokens x KV heads x
    // splits; splits from 256 entries down to 32.
    const auto length = [](int tokens, int context) {
        return cuda::attention_split_length(tokens, 3, context, 132, 256, 32);
    };
    QCOMPARE(length(1, 1024), 32);   // 96 blocks even at the shortest
    QCOMPARE(length(8, 1024), 64);   // 8 x 3 x 16 = 384
    QCOMPARE(length(32, 1024), 256); // 32 x 3 x 4 = 384 already
    QCOMPARE(length(32, 4096), 256);
    QCOMPARE(length(1024, 1024), 256); // a prefill chunk
    QCOMPARE(length(1, 0), 32);
    QCOMPARE(cuda::attention_split_length(1, 3, 1024, 0, 256, 32), 256); // 2 blocks wanted
    QCOMPARE(cuda::attention_split_length(4, 8, 300, 16, 256, 32), 256); // 4 x 8 x 2 = 64 >= 32
    // The vector path: splits of 64 to 2048 entries, 528 blocks wanted (4
    // a multiprocessor, SmolLM2's kernel on an H100).
    const auto vector_length = [](int tokens, int context) {
        return cuda::attention_split_length(tokens, 3, context, 132, 2048, 64, 4);
    };
    QCOMPARE(vector_length(128, 4096), 2048);  // 128 x 3 x 2 = 768
    QCOMPARE(vector_length(32, 4096), 512);    // 32 x 3 x 8 = 768; 1024 gives 384
    QCOMPARE(vector_length(128, 1024), 512);   // 128 x 3 x 2 = 768
    QCOMPARE(vector_length(32, 1024), 128);    // 32 x 3 x 8 = 768
    QCOMPARE(vector_length(1, 1024), 64);      // 48 blocks even at the shortest
    QCOMPARE(vector_length(1024, 1024), 2048); // a prefill chunk: one split a token
}

void TestDecodePadding::only_plain_decodes_qualify() {
    kv::BlockAllocator allocator(64);
    std::vector<kv::SequenceBlocks> sequences(3);
    for (kv::SequenceBlocks& s : sequences) {
        QVERIFY(kv::reserve(s, 40, 16, allocator));
        s.length = 30;
    }
    const std::vector<std::int32_t> one{5};
    const std::vector<std::int32_t> three{5, 6, 7};
    const auto batch = [&](std::vector<runner::SequenceStep> steps) {
        return runner::build_forward_batch(steps, 16);
    };
    QVERIFY(cuda::is_plain_decode(batch({{&sequences[0], one}, {&sequences[1], one}})));
    QVERIFY(!cuda::is_plain_decode(batch({{&sequences[0], three}}))); // a prefill chunk
    QVERIFY(!cuda::is_plain_decode(batch({{&sequences[0], one}, {&sequences[1], three}})));
    runner::SequenceStep silent{&sequences[0], one};
    silent.skip_logits = true;
    QVERIFY(!cuda::is_plain_decode(batch({silent})));
    runner::SequenceStep capturing{&sequences[0], one};
    capturing.capture_attention_from = 0;
    QVERIFY(!cuda::is_plain_decode(batch({capturing})));
    QVERIFY(!cuda::is_plain_decode(runner::ForwardBatch{}));
}

void TestDecodePadding::padded_rows_leave_real_logits_unchanged_data() {
    QTest::addColumn<int>("sequences");
    QTest::addColumn<int>("bucket");
    QTest::newRow("1 in 1") << 1 << 1;
    QTest::newRow("3 in 4") << 3 << 4;
    QTest::newRow("5 in 8") << 5 << 8;
    QTest::newRow("2 in 16") << 2 << 16;
}

void TestDecodePadding::padded_rows_leave_real_logits_unchanged() {
    QFETCH(int, sequences);
    QFETCH(int, bucket);
    const auto model = model::LlamaModel::load(tiny_model_path());
    const int num_blocks = 40;
    cpu::CpuBackendOptions options;
    options.num_blocks = num_blocks + 1; // the spare, as the CUDA pool has
    options.block_size = 16;
    options.threads = 2;
    options.cache_format = {kv::KvFormat::f32, kv::KvFormat::f32};
    cpu::CpuBackend backend(model, options);
    const int vocab = backend.vocab_size();

    // Prefill each sequence with a different prompt, then decode one step.
    kv::BlockAllocator allocator(num_blocks); // never hands out the spare
    std::vector<kv::SequenceBlocks> blocks(static_cast<std::size_t>(sequences));
    std::mt19937 rng(static_cast<unsigned>(sequences * 31 + bucket));
    std::uniform_int_distribution<std::int32_t> token(3, vocab - 1);
    std::vector<float> logits;
    for (int s = 0; s < sequences; ++s) {
        std::vector<std::int32_t> prompt(static_cast<std::size_t>(10 + 7 * s));
        for (std::int32_t& t : prompt) {
            t = token(rng);
        }
        kv::SequenceBlocks& b = blocks[static_cast<std::size_t>(s)];
        QVERIFY(kv::reserve(b, static_cast<std::int32_t>(prompt.size()) + 1, 16, allocator));
        const runner::SequenceStep step{&b, prompt};
        const runner::ForwardBatch fb = runner::build_forward_batch({&step, 1}, 16);
        logits.resize(static_cast<std::size_t>(vocab));
        backend.forward(fb, logits.data());
        b.length = static_cast<std::int32_t>(prompt.size());
    }
    std::vector<std::vector<std::int32_t>> next(static_cast<std::size_t>(sequences));
    std::vector<runner::SequenceStep> steps;
    for (int s = 0; s < sequences; ++s) {
        next[static_cast<std::size_t>(s)] = {token(rng)};
        steps.push_back({&blocks[static_cast<std::size_t>(s)], next[static_cast<std::size_t>(s)]});
    }
    const runner::ForwardBatch decode = runner::build_forward_batch(steps, 16);
    QVERIFY(cuda::is_plain_decode(decode));
    const runner::ForwardBatch padded = cuda::pad_decode_batch(decode, bucket, num_blocks);
    QCOMPARE(padded.token_count(), std::int64_t{bucket});
    QVERIFY(cuda::is_plain_decode(padded));
    for (std::int64_t t = sequences; t < bucket; ++t) {
        QCOMPARE(padded.slot_mapping[static_cast<std::size_t>(t)] / 16, num_blocks);
    }

    // The decode twice over the same cache: its K/V go to the same slots
    // both times, the padding's into the spare block only.
    std::vector<float> plain(static_cast<std::size_t>(sequences) * vocab);
    backend.forward(decode, plain.data());
    std::vector<float> with_padding(static_cast<std::size_t>(bucket) * vocab);
    backend.forward(padded, with_padding.data());
    // The CPU's matrix kernels may sum in another order for another batch
    // size: equal to rounding, against the logits' scale. A padding row that
    // reached a real row's cache would change its logits wholesale.
    float scale = 0.0f;
    float worst = 0.0f;
    for (std::size_t i = 0; i < plain.size(); ++i) {
        scale = std::max(scale, std::fabs(plain[i]));
        worst = std::max(worst, std::fabs(plain[i] - with_padding[i]));
    }
    QVERIFY2(
        worst <= 1e-3f * scale,
        qPrintable(
            QString("largest difference %1 of scale %2").arg(double(worst)).arg(double(scale))));
    for (std::size_t i = plain.size(); i < with_padding.size(); ++i) {
        QVERIFY(std::isfinite(with_padding[i]));
    }
}

QTEST_GUILESS_MAIN(TestDecodePadding)
#include "tst_decode_padding.moc"
