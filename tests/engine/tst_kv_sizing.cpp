// KV cache sizing (engine/kv/kv_sizing.h) against hand-computed cases:
// Llama-3-70B's 8K tokens at bf16 are 2 x 80 x 8 x 128 x 8192 x 2 bytes;
// the same model as MHA, MQA and MLA; DeepSeek-V3's latent cache; quantised
// formats with their scales; what fits in a device's memory.
#include "engine/kv/kv_sizing.h"

#include <cmath>

#include <QTest>

using namespace kvscope::kv;

namespace {

const KvCacheFormat kBf16{KvFormat::bf16, KvFormat::bf16};

} // namespace

class TestKvSizing : public QObject {
    Q_OBJECT

private slots:
    void llama3_70b_at_8k_tokens() {
        const ModelShape shape = *find_model_shape("llama-3-70b");
        QCOMPARE(bytes_per_token(shape, kBf16), 2.0 * 80 * 8 * 128 * 2);
        const SizingAnswer a = answer(bytes_per_token(shape, kBf16), {.context_tokens = 8192,
                                                                      .batch = 4,
                                                                      .memory_bytes = 0,
                                                                      .utilization = 0.9,
                                                                      .weight_bytes = 0});
        QCOMPARE(a.per_request_bytes, 2.0 * 80 * 8 * 128 * 8192 * 2); // 2.5 GiB
        QCOMPARE(a.per_request_bytes, 2.5 * 1024 * 1024 * 1024);
        QCOMPARE(a.per_batch_bytes, 4 * a.per_request_bytes);
        QCOMPARE(a.tokens_fit, 0.0); // no memory given
    }

    void variantsOfOneModel() {
        const ModelShape shape = *find_model_shape("Llama-3-8B");
        const std::vector<VariantSize> v = attention_variants(shape, kBf16);
        QCOMPARE(v.size(), std::size_t{4});
        QCOMPARE(v[0].variant, AttentionVariant::mha);
        QCOMPARE(v[0].bytes_per_token, 2.0 * 32 * 32 * 128 * 2); // 512 KiB
        QCOMPARE(v[1].variant, AttentionVariant::gqa);
        QVERIFY(v[1].own && !v[0].own);
        QCOMPARE(v[1].bytes_per_token, 131072.0); // kvscope simulate's default
        QCOMPARE(v[2].variant, AttentionVariant::mqa);
        QCOMPARE(v[2].bytes_per_token, 2.0 * 32 * 1 * 128 * 2);
        // MLA with DeepSeek's proportions: 512 + 64 values a token and layer.
        QCOMPARE(v[3].variant, AttentionVariant::mla);
        QCOMPARE(v[3].bytes_per_token, 32.0 * 576 * 2);
        QVERIFY(!v[3].own);
    }

    void deepseekV3CachesALatent() {
        const ModelShape shape = *find_model_shape("DeepSeek-V3");
        // 61 layers x (512 latent + 64 RoPE key) x 2 bytes.
        QCOMPARE(bytes_per_token(shape, kBf16), 61.0 * 576 * 2);
        const std::vector<VariantSize> v = attention_variants(shape, kBf16);
        QCOMPARE(v.size(), std::size_t{3}); // MHA, MQA, its own MLA
        QCOMPARE(v[0].bytes_per_token, 61.0 * 128 * (192 + 128) * 2);
        QVERIFY(v[2].own && v[2].variant == AttentionVariant::mla);
        QVERIFY(v[0].bytes_per_token / v[2].bytes_per_token > 60); // MLA's point
    }

    void quantisedFormatsCountTheirScales() {
        const ModelShape shape = *find_model_shape("qwen2.5-7b");
        // q8_0: groups of 32 values as an fp16 scale + 32 bytes (34 bytes),
        // 4 groups a 128-value head row.
        const KvCacheFormat q8{KvFormat::q8_0, KvFormat::q8_0};
        QCOMPARE(bytes_per_token(shape, q8), 28.0 * 4 * 2 * (4 * 34));
        const KvCacheFormat mixed{KvFormat::f16, KvFormat::q4_0};
        QCOMPARE(bytes_per_token(shape, mixed), 28.0 * 4 * (128 * 2 + 4 * 18));
    }

    void hybridModelsKeepOnlyTheWindowInSlidingLayers();
    void whatFitsInMemory() {
        const SizingAnswer a = answer(131072.0, {.context_tokens = 8192,
                                                 .batch = 1,
                                                 .memory_bytes = 80.0 * (1 << 30),
                                                 .utilization = 0.9,
                                                 .weight_bytes = 16.0 * (1 << 30)});
        QCOMPARE(a.cache_budget_bytes, 56.0 * (1 << 30));
        QCOMPARE(a.tokens_fit, 56.0 * (1 << 30) / 131072);
        QCOMPARE(a.requests_fit, std::floor(a.tokens_fit / 8192));
        const SizingAnswer none = answer(131072.0, {.context_tokens = 8192,
                                                    .batch = 1,
                                                    .memory_bytes = 16.0 * (1 << 30),
                                                    .utilization = 0.9,
                                                    .weight_bytes = 16.0 * (1 << 30)});
        QVERIFY(none.cache_budget_bytes < 0);
        QCOMPARE(none.tokens_fit, 0.0);
        QVERIFY(!find_model_shape("gpt-5"));
    }
};

// Gemma 3 27B at 128k: 10 global layers keep the whole context, 52 sliding
// ones the window of 1,024 and the block it starts in (16 tokens), each
// layer 16 KV heads x (128 + 128) bf16 values a token.
void TestKvSizing::hybridModelsKeepOnlyTheWindowInSlidingLayers() {
    const ModelShape shape = *find_model_shape("gemma-3-27b");
    QVERIFY(shape.hybrid());
    QCOMPARE(shape.global_layers(), 10);
    const double per_layer = 16.0 * 256 * 2;
    QCOMPARE(bytes_per_token(shape, kBf16), 62 * per_layer);
    QCOMPARE(bytes_per_token_past_windows(shape, kBf16), 10 * per_layer); // its global layers
    const ModelShape plain = *find_model_shape("llama-3-8b");
    QCOMPARE(bytes_per_token_past_windows(plain, kBf16), bytes_per_token(plain, kBf16));
    const std::int64_t context = 131072;
    QCOMPARE(request_bytes(shape, kBf16, context), per_layer * (10.0 * context + 52.0 * 1040));
    // Short requests fit the window: every layer keeps every token.
    QCOMPARE(request_bytes(shape, kBf16, 800), 62 * per_layer * 800);
    const SizingAnswer a =
        answer(shape, kBf16, {.context_tokens = context, .batch = 2, .memory_bytes = 0});
    QCOMPARE(a.per_request_bytes, request_bytes(shape, kBf16, context));
    QCOMPARE(a.per_batch_bytes, 2 * a.per_request_bytes);
    // The table: the model's own GQA with its windows, and without them.
    const std::vector<VariantSize> v = attention_variants(shape, kBf16);
    QCOMPARE(v.back().variant, AttentionVariant::global);
    QVERIFY(!v.back().shape.hybrid());
    const double global_only =
        answer(v.back().shape, kBf16, {.context_tokens = context}).per_request_bytes;
    QCOMPARE(global_only, 62 * per_layer * context); // 62 GiB against 10.4
    QVERIFY(a.per_request_bytes < 0.17 * global_only);
    // What fits: requests of 128k in 80 GiB x 0.9 less the bf16 weights.
    const SizingAnswer fit = answer(shape, kBf16,
                                    {.context_tokens = context,
                                     .batch = 1,
                                     .memory_bytes = 80.0 * (1 << 30),
                                     .utilization = 0.9,
                                     .weight_bytes = shape.weight_bytes});
    QCOMPARE(fit.requests_fit, std::floor(fit.cache_budget_bytes / a.per_request_bytes));
}

QTEST_GUILESS_MAIN(TestKvSizing)
#include "tst_kv_sizing.moc"
