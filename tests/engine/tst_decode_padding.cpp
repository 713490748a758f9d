// The padding of decode steps to a CUDA graph's bucket (engine/cuda/
// decode_padding.h), which needs no GPU: which steps qualify, the buckets,
// the group-major layout of a hybrid cache's padded batch, and that a padded
// batch gives the real rows the logits of the unpadded one when the CPU
// backend runs both over a pool with the spare block (a plain cache, and the
// tiny Gemma 3's hybrid one with blocks its windows let go).
#include "engine/cpu/cpu_backend.h"
#include "engine/cuda/decode_padding.h"
#include "engine/kv/block_allocator.h"
#include "engine/kv/kv_groups.h"
#include "engine/kv/kv_manager.h"
#include "engine/model/llama_model.h"
#include "engine/runner/forward_batch.h"
#include "tests/support/tiny_model.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include <QTest>

using namespace kvscope;

namespace {

// Empty when the real rows of `with_padding` ((bucket, vocab)) have the
// logits of `plain` ((sequences, vocab)) and the padding rows are finite.
// The CPU's matrix kernels may sum in another order for another batch size:
// equal to rounding, against the logits' scale. A padding row that reached a
// real row's cache would change its logits wholesale.
QString padded_logits_problem(const std::vector<float>& plain,
                              const std::vector<float>& with_padding) {
    float scale = 0.0f;
    float worst = 0.0f;
    for (std::size_t i = 0; i < plain.size(); ++i) {
        scale = std::max(scale, std::fabs(plain[i]));
        worst = std::max(worst, std::fabs(plain[i] - with_padding[i]));
    }
    if (worst > 1e-3f * scale) {
        return QString("largest difference %1 of scale %2").arg(double(worst)).arg(double(scale));
    }
    for (std::size_t i = plain.size(); i < with_padding.size(); ++i) {
        if (!std::isfinite(with_padding[i])) {
            return QString("padding logit %1 is %2").arg(i).arg(double(with_padding[i]));
        }
    }
    return {};
}

} // namespace

class TestDecodePadding : public QObject {
    Q_OBJECT

private slots:
    void buckets();
    void attention_splits_fill_the_waves();
    void only_plain_decodes_qualify();
    void padded_rows_leave_real_logits_unchanged_data();
    void padded_rows_leave_real_logits_unchanged();
    void padding_keeps_the_group_major_layout();
    void padded_hybrid_rows_leave_real_logits_unchanged();
};

void TestDecodePadding::buckets() {
    QCOMPARE(cuda::decode_bucket(1), std::optional(1));
    QCOMPARE(cuda::decode_bucket(3), std::optional(4));
    QCOMPARE(cuda::decode_bucket(128), std::optional(128));
    QCOMPARE(cuda::decode_bucket(129), std::optional(256));
    QCOMPARE(cuda::decode_bucket(512), std::optional(512));
    QCOMPARE(cuda::decode_bucket(513), std::optional<int>());
    QCOMPARE(cuda::split_bucket(1, 256), 1);
    QCOMPARE(cuda::split_bucket(0, 256), 1);
    QCOMPARE(cuda::split_bucket(256, 256), 1);
    QCOMPARE(cuda::split_bucket(257, 256), 2);
    QCOMPARE(cuda::split_bucket(769, 256), 4);
    QCOMPARE(cuda::split_bucket(4096, 256), 16);
    QCOMPARE(cuda::split_bucket(1025, 32), 40);  // 33 splits; not 64
    QCOMPARE(cuda::split_bucket(2304, 256), 10); // 9 splits
    // Every count: at least the splits needed, not far over, at most three
    // significant bits, and never fewer for a longer context.
    int previous = 0;
    for (int context = 1; context <= 40000; ++context) {
        const int splits = (context + 31) / 32;
        const int bucket = cuda::split_bucket(context, 32);
        // Up to 8 splits a power of two (under twice the count), past that
        // at most a quarter over.
        QVERIFY(bucket >= splits && (splits <= 8 ? bucket < 2 * splits : 4 * bucket <= 5 * splits));
        int bits = bucket;
        while (bits % 2 == 0) {
            bits /= 2;
        }
        QVERIFY(bits < 8);
        QVERIFY(bucket >= previous);
        previous = bucket;
    }
}

void TestDecodePadding::attention_splits_fill_the_waves() {
    // A wave is what the GPU holds at once: 264 blocks of tokens x KV heads
    // x splits on an H100's 132 multiprocessors at 2 each; splits from 256
    // entries down to 32, multiples of 32. Fill: blocks over the slots of
    // the waves they take.
    const auto length = [](int tokens, int context) {
        return cuda::attention_split_length(tokens, 3, context, 132, 256, 32);
    };
    QCOMPARE(length(1, 1024), 32);     // 96 blocks even at the shortest: the fullest there is
    QCOMPARE(length(8, 1024), 96);     // 24 x 11 = 264, one full wave (128: 192, 73%)
    QCOMPARE(length(32, 1024), 224);   // 96 x 5 = 480, 91% (256: 384 in 2 waves, 73%)
    QCOMPARE(length(32, 4096), 256);   // 96 x 16 = 1536 in 6 waves, 97%
    QCOMPARE(length(1024, 1024), 256); // a prefill chunk: 3072 x 4, 99%
    QCOMPARE(length(1, 0), 32);
    // A wave of 2 blocks (no multiprocessor count): 4 splits of 256 fill it.
    QCOMPARE(cuda::attention_split_length(1, 3, 1024, 0, 256, 32), 256);
    // 32 rows a wave: 2 splits fill it exactly, the evenest being 160 + 140.
    QCOMPARE(cuda::attention_split_length(4, 8, 300, 16, 256, 32), 160);
    // The vector path: splits of 64 to 2048 entries, 528 blocks a wave (4 a
    // multiprocessor, SmolLM2's kernel on an H100). Halving lengths gave
    // each of the four targets' grids 768 blocks, 1.45 waves.
    const auto vector_length = [](int tokens, int context) {
        return cuda::attention_split_length(tokens, 3, context, 132, 2048, 64, 4);
    };
    QCOMPARE(vector_length(128, 4096), 1024);  // 384 x 4 = 1536 in 3 waves, 97%
    QCOMPARE(vector_length(32, 4096), 832);    // 96 x 5 = 480 in one, 91%
    QCOMPARE(vector_length(128, 1024), 256);   // 384 x 4, 97%
    QCOMPARE(vector_length(32, 1024), 224);    // 96 x 5, 91%
    QCOMPARE(vector_length(1, 1024), 64);      // 48 blocks even at the shortest
    QCOMPARE(vector_length(1024, 1024), 1024); // a prefill chunk: one split a token
    // The chosen length gives the fewest splits within 85% of the fullest
    // fill, and is the shortest giving that many (the evenest cut).
    for (const int tokens : {1, 3, 8, 17, 32, 100, 128, 512}) {
        for (const int context : {1, 100, 1000, 1024, 1025, 3000, 4096, 20000}) {
            const int chosen = vector_length(tokens, context);
            QVERIFY(chosen >= 64 && chosen <= 2048 && chosen % cuda::kSplitLengthStep == 0);
            const auto fill = [&](int split_length) {
                return cuda::wave_fill(
                    std::int64_t{tokens} * 3 * ((context + split_length - 1) / split_length), 528);
            };
            double fullest = 0.0;
            for (int other = 64; other <= 2048; other += 32) {
                fullest = std::max(fullest, fill(other));
            }
            const int splits = (context + chosen - 1) / chosen;
            QVERIFY(fill(chosen) >= 0.85 * fullest);
            for (int other = 64; other <= 2048; other += 32) {
                const int other_splits = (context + other - 1) / other;
                QVERIFY(other_splits >= splits || fill(other) < 0.85 * fullest);
                QVERIFY(other >= chosen || other_splits > splits);
            }
        }
    }
    QCOMPARE(cuda::wave_fill(528, 528), 1.0);
    QCOMPARE(cuda::wave_fill(768, 528), 768.0 / 1056.0);
    QCOMPARE(cuda::wave_fill(0, 528), 1.0 / 528.0);
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
    const QString problem = padded_logits_problem(plain, with_padding);
    QVERIFY2(problem.isEmpty(), qPrintable(problem));
}

void TestDecodePadding::padding_keeps_the_group_major_layout() {
    // A decode of three sequences over two KV groups (a global one and a
    // sliding one that let go of its first blocks), blocks of 4, built by
    // hand in ForwardBatch's layout: slot_mapping (groups, tokens),
    // block_tables (groups, offsets.back()).
    constexpr int kBlock = 4;
    constexpr kv::BlockId kSpare = 20;
    constexpr kv::BlockId kNo = kv::kNoBlock;
    runner::ForwardBatch batch;
    batch.block_size = kBlock;
    batch.kv_groups = 2;
    batch.token_ids = {11, 12, 13};
    batch.positions = {5, 8, 2};
    batch.cache_positions = {5, 8, 2};
    batch.sequence_of = {0, 1, 2};
    batch.context_lengths = {6, 9, 3};
    batch.block_table_offsets = {0, 2, 5, 6};
    // Group 0: {5, 7}, {1, 2, 3}, {0}; group 1: {-, 8}, {-, 4, 9}, {6}.
    batch.block_tables = {5, 7, 1, 2, 3, 0, kNo, 8, kNo, 4, 9, 6};
    // Entry 5 is block 1 offset 1, entry 8 block 2 offset 0, entry 2 block 0
    // offset 2, in each group's table.
    batch.slot_mapping = {7 * kBlock + 1, 3 * kBlock, 0 * kBlock + 2,
                          8 * kBlock + 1, 9 * kBlock, 6 * kBlock + 2};
    batch.capture_attention_from = {INT32_MAX, INT32_MAX, INT32_MAX};
    batch.logit_tokens = {0, 1, 2};
    QVERIFY(cuda::is_plain_decode(batch));
    QCOMPARE(batch.group_slots(1)[1], 9 * kBlock);
    QCOMPARE(batch.group_table(1, 1)[2], 9);

    constexpr int kBucket = 8;
    const runner::ForwardBatch padded = cuda::pad_decode_batch(batch, kBucket, kSpare);
    QVERIFY(cuda::is_plain_decode(padded));
    QCOMPARE(padded.kv_groups, 2);
    QCOMPARE(padded.block_size, kBlock);
    QCOMPARE(padded.token_count(), std::int64_t{kBucket});
    QCOMPARE(padded.sequence_count(), std::int64_t{kBucket});
    QCOMPARE(padded.positions.size(), std::size_t{kBucket});
    QCOMPARE(padded.cache_positions.size(), std::size_t{kBucket});
    QCOMPARE(padded.capture_attention_from.size(), std::size_t{kBucket});
    QVERIFY(!padded.captures_attention());
    QCOMPARE(padded.logit_tokens.size(), std::size_t{kBucket});

    // Slots: each group's real slots, then one spare slot per padded row.
    const int real = 3;
    QCOMPARE(padded.slot_mapping.size(), std::size_t{2 * kBucket});
    for (int g = 0; g < 2; ++g) {
        for (int t = 0; t < kBucket; ++t) {
            const std::int32_t expected =
                t < real ? batch.slot_mapping[static_cast<std::size_t>(g * real + t)]
                         : kSpare * kBlock;
            QCOMPARE(padded.slot_mapping[static_cast<std::size_t>(g * kBucket + t)], expected);
            QCOMPARE(padded.group_slots(g)[static_cast<std::size_t>(t)], expected);
        }
        QCOMPARE(padded.group_slots(g).size(), std::size_t{kBucket});
    }

    // Tables: the offsets grow by one spare block per padded row; each
    // group's real tables, then its padded rows' spare blocks.
    QCOMPARE(padded.block_table_offsets.size(), std::size_t{kBucket + 1});
    for (int s = 0; s <= kBucket; ++s) {
        QCOMPARE(padded.block_table_offsets[static_cast<std::size_t>(s)],
                 s <= real ? batch.block_table_offsets[static_cast<std::size_t>(s)]
                           : 6 + (s - real));
    }
    const int per_group = padded.block_table_offsets.back();
    QCOMPARE(per_group, 6 + (kBucket - real));
    QCOMPARE(padded.block_tables.size(), static_cast<std::size_t>(2 * per_group));
    for (int g = 0; g < 2; ++g) {
        for (int i = 0; i < per_group; ++i) {
            const kv::BlockId expected =
                i < 6 ? batch.block_tables[static_cast<std::size_t>(g * 6 + i)] : kSpare;
            QCOMPARE(padded.block_tables[static_cast<std::size_t>(g * per_group + i)], expected);
        }
        for (int s = 0; s < kBucket; ++s) {
            if (s < real) {
                const std::int32_t length = batch.block_table_offsets[std::size_t(s) + 1] -
                                            batch.block_table_offsets[std::size_t(s)];
                for (std::int32_t i = 0; i < length; ++i) {
                    QCOMPARE(padded.group_table(g, s)[i], batch.group_table(g, s)[i]);
                }
            } else {
                QCOMPARE(padded.group_table(g, s)[0], kSpare);
            }
        }
    }
    // The padded rows: token 0 at position 0, a context of one entry.
    for (int t = real; t < kBucket; ++t) {
        const auto i = static_cast<std::size_t>(t);
        QCOMPARE(padded.token_ids[i], 0);
        QCOMPARE(padded.positions[i], 0);
        QCOMPARE(padded.cache_positions[i], 0);
        QCOMPARE(padded.sequence_of[i], t);
        QCOMPARE(padded.context_lengths[i], 1);
        QCOMPARE(padded.logit_tokens[i], t);
    }

    // A full bucket changes nothing.
    const runner::ForwardBatch same = cuda::pad_decode_batch(batch, real, kSpare);
    QCOMPARE(same.kv_groups, 2);
    QCOMPARE(same.slot_mapping, batch.slot_mapping);
    QCOMPARE(same.block_tables, batch.block_tables);
    QCOMPARE(same.block_table_offsets, batch.block_table_offsets);
}

void TestDecodePadding::padded_hybrid_rows_leave_real_logits_unchanged() {
    // The tiny Gemma 3 (a window of 8 in five layers of six) with its hybrid
    // cache, blocks of 4: three sequences prefilled through a KV manager
    // whose sliding groups let go of what their windows left (kNoBlock in
    // their tables), then one decode step plain and padded to 8.
    const auto model =
        model::LlamaModel::load(KVSCOPE_SOURCE_DIR "/tests/engine/data/tiny_gemma3.gguf");
    constexpr int kBlock = 4;
    constexpr int kBucket = 8;
    const int num_blocks = 120;
    cpu::CpuBackendOptions options;
    options.num_blocks = num_blocks + 1; // the spare, as the CUDA pool has
    options.block_size = kBlock;
    options.threads = 2;
    options.cache_format = {kv::KvFormat::f32, kv::KvFormat::f32};
    options.hybrid_kv = true;
    cpu::CpuBackend backend(model, options);
    const kv::KvGroupLayout groups = backend.kv_groups();
    QVERIFY(groups.hybrid());
    const int vocab = backend.vocab_size();
    kv::KvManager manager(num_blocks, kBlock, false, kv::CachePolicy::lru, groups.windows());

    std::mt19937 rng(5);
    std::uniform_int_distribution<std::int32_t> token(3, vocab - 1);
    std::vector<kv::SequenceBlocks> blocks(3);
    std::vector<float> logits(static_cast<std::size_t>(vocab));
    for (std::size_t s = 0; s < blocks.size(); ++s) {
        std::vector<std::int32_t> prompt(10 + 9 * s);
        for (std::int32_t& t : prompt) {
            t = token(rng);
        }
        kv::SequenceBlocks& b = blocks[s];
        QVERIFY(manager.grow(static_cast<std::int64_t>(s), b,
                             static_cast<std::int32_t>(prompt.size())));
        const runner::SequenceStep step{&b, prompt};
        backend.forward(runner::build_forward_batch({&step, 1}, kBlock), logits.data());
        b.length = static_cast<std::int32_t>(prompt.size());
        backend.release_blocks(manager.release_outside_window(static_cast<std::int64_t>(s), b));
    }
    std::vector<std::vector<std::int32_t>> next(blocks.size());
    std::vector<runner::SequenceStep> steps;
    for (std::size_t s = 0; s < blocks.size(); ++s) {
        QVERIFY(manager.grow(static_cast<std::int64_t>(s), blocks[s], blocks[s].length + 1));
        next[s] = {token(rng)};
        steps.push_back({&blocks[s], next[s]});
    }
    const runner::ForwardBatch decode = runner::build_forward_batch(steps, kBlock);
    QVERIFY(cuda::is_plain_decode(decode));
    QCOMPARE(decode.kv_groups, groups.group_count());
    QVERIFY2(std::count(decode.block_tables.begin(), decode.block_tables.end(), kv::kNoBlock) > 0,
             "the windows should have let blocks go");
    const runner::ForwardBatch padded = cuda::pad_decode_batch(decode, kBucket, num_blocks);
    QCOMPARE(padded.kv_groups, groups.group_count());
    QCOMPARE(padded.slot_mapping.size(),
             static_cast<std::size_t>(groups.group_count()) * std::size_t{kBucket});
    for (int g = 0; g < groups.group_count(); ++g) {
        for (std::int64_t t = 3; t < kBucket; ++t) {
            QCOMPARE(padded.group_slots(g)[static_cast<std::size_t>(t)] / kBlock, num_blocks);
            QCOMPARE(padded.group_table(g, t)[0], num_blocks);
        }
    }

    std::vector<float> plain(blocks.size() * static_cast<std::size_t>(vocab));
    backend.forward(decode, plain.data());
    std::vector<float> with_padding(std::size_t{kBucket} * static_cast<std::size_t>(vocab));
    backend.forward(padded, with_padding.data());
    const QString problem = padded_logits_problem(plain, with_padding);
    QVERIFY2(problem.isEmpty(), qPrintable(problem));
}

QTEST_GUILESS_MAIN(TestDecodePadding)
#include "tst_decode_padding.moc"
