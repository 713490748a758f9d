// The AVX2 attention segment kernel (engine/cpu/attention_avx2.cpp) against
// the portable one, on what the forward passes give it: f32 and f16 K and V,
// every GQA group size up to nine (the kernel takes query heads four at a
// time), head widths 32 to 256, and segments that start and end inside
// blocks of a scattered table.
#include "engine/cpu/attention_kernels.h"
#include "engine/util/cpu_features.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include <QTest>

using namespace kvscope;
using kv::KvFormat;

class TestAttentionKernels : public QObject {
    Q_OBJECT

private slots:
    void avx2_matches_the_portable_kernel_data();
    void avx2_matches_the_portable_kernel();
};

void TestAttentionKernels::avx2_matches_the_portable_kernel_data() {
    QTest::addColumn<KvFormat>("key");
    QTest::addColumn<KvFormat>("value");
    QTest::addColumn<int>("head_dim");
    QTest::addColumn<int>("group");
    for (const KvFormat key : {KvFormat::f32, KvFormat::f16}) {
        for (const KvFormat value : {KvFormat::f32, KvFormat::f16}) {
            for (const int head_dim : {32, 64, 256}) {
                for (const int group : {1, 2, 3, 4, 5, 8, 9}) {
                    QTest::addRow("%s/%s d%d g%d", kv::kv_format_name(key).data(),
                                  kv::kv_format_name(value).data(), head_dim, group)
                        << key << value << head_dim << group;
                }
            }
        }
    }
}

void TestAttentionKernels::avx2_matches_the_portable_kernel() {
#if !defined(__x86_64__)
    QSKIP("the AVX2 kernels are built on x86-64 only");
#else
    if (!cpu_has_avx2_kernels()) {
        QSKIP("this CPU has no AVX2, FMA and F16C");
    }
    QFETCH(KvFormat, key);
    QFETCH(KvFormat, value);
    QFETCH(int, head_dim);
    QFETCH(int, group);
    const int kv_heads = 2;
    const int block_size = 16;
    const int tokens = 100;
    cpu::KvStore store({1, kv_heads, head_dim, block_size, 8}, {key, value});
    // Positions live in blocks 5, 2, 7, 0, 3, 6, 1 in turn.
    const std::vector<kv::BlockId> table{5, 2, 7, 0, 3, 6, 1};
    runner::ForwardBatch batch;
    batch.block_size = block_size;
    std::mt19937 rng(static_cast<unsigned>(head_dim * 31 + group));
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (int t = 0; t < tokens; ++t) {
        batch.token_ids.push_back(0);
        batch.slot_mapping.push_back(table[static_cast<std::size_t>(t / block_size)] * block_size +
                                     t % block_size);
    }
    std::vector<float> k(static_cast<std::size_t>(tokens) * kv_heads * head_dim);
    std::vector<float> v(k.size());
    for (float& x : k) {
        x = normal(rng);
    }
    for (float& x : v) {
        x = normal(rng);
    }
    store.write(0, batch, k.data(), v.data());
    const cpu::LayerKvView cache = store.layer(0);
    const cpu::detail::SegmentKernel avx2 = cpu::detail::avx2_segment_kernel(key, value, head_dim);
    QVERIFY(avx2 != nullptr);

    std::vector<float> q(static_cast<std::size_t>(group) * head_dim);
    for (float& x : q) {
        x = normal(rng);
    }
    // A segment inside one block, one across several, and one to the end.
    for (const auto& [begin, end] : {std::pair{3, 11}, std::pair{13, 70}, std::pair{0, tokens}}) {
        struct Result {
            std::vector<float> scores, tile, max, sum, out;
        };
        const auto run = [&](cpu::detail::SegmentKernel kernel) {
            Result r;
            r.scores.resize(static_cast<std::size_t>(group) * (end - begin));
            r.tile.resize(static_cast<std::size_t>(block_size) * head_dim);
            r.max.resize(static_cast<std::size_t>(group));
            r.sum.resize(r.max.size());
            r.out.resize(q.size());
            cpu::detail::SegmentWork work;
            work.cache = &cache;
            work.kv_head = 1;
            work.table = table.data();
            work.begin = begin;
            work.end = end;
            work.q = q.data();
            work.group = group;
            work.scale = 0.125f;
            work.scores = r.scores.data();
            work.tile = r.tile.data();
            work.max_out = r.max.data();
            work.sum_out = r.sum.data();
            work.out = r.out.data();
            kernel(work);
            return r;
        };
        const Result expected = run(cpu::detail::attend_segment_portable);
        const Result got = run(avx2);
        for (int g = 0; g < group; ++g) {
            const auto at = static_cast<std::size_t>(g);
            QVERIFY2(std::abs(got.max[at] - expected.max[at]) <=
                         1e-5f * std::abs(expected.max[at]) + 1e-6f,
                     qPrintable(QString("max of head %1: %2 against %3")
                                    .arg(g)
                                    .arg(got.max[at])
                                    .arg(expected.max[at])));
            QVERIFY(std::abs(got.sum[at] - expected.sum[at]) <= 1e-5f * expected.sum[at]);
        }
        float scale = 0.0f;
        for (const float x : expected.out) {
            scale = std::max(scale, std::abs(x));
        }
        for (std::size_t i = 0; i < expected.out.size(); ++i) {
            QVERIFY2(std::abs(got.out[i] - expected.out[i]) <= 1e-5f * scale,
                     qPrintable(QString("segment [%1, %2), value %3: %4 against %5")
                                    .arg(begin)
                                    .arg(end)
                                    .arg(i)
                                    .arg(got.out[i])
                                    .arg(expected.out[i])));
        }
    }
#endif
}

QTEST_GUILESS_MAIN(TestAttentionKernels)
#include "tst_attention_kernels.moc"
