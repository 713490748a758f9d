// Each architecture kvscope runs (llama, qwen2, qwen3, gemma3) against
// transformers in fp32 on a tiny random-weight GGUF of it
// (tests/engine/data/make_tiny_llama_gguf.py, golden logits from
// scripts/reference/make_tiny_arch_golden.py): every position's logits, in
// one pass and token by token (which takes the decode path, and for Gemma 3
// slides the window of 8 over 32 tokens). Also what the loader makes of the
// files: head width, windows and RoPE bases per layer, and the message for an
// architecture it does not run.
#include "engine/cpu/cpu_backend.h"
#include "engine/gguf/gguf_file.h"
#include "engine/kv/eviction_policy.h"
#include "engine/model/llama_model.h"
#include "engine/session/backend_factory.h"
#include "engine/tokenizer/chat_template.h"
#include "tests/support/chunked_logits.h"
#include "tests/support/tiny_arch_golden.h"

#include <algorithm>
#include <cmath>

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QTest>

using namespace kvscope;

namespace {

constexpr kv::KvCacheFormat kF32Cache{kv::KvFormat::f32, kv::KvFormat::f32};

} // namespace

namespace {

// The bytes of tiny model `name` (tests/engine/data).
QByteArray tiny_model_bytes(const QString& name) {
    QFile source(test::engine_data_path(name));
    return source.open(QIODevice::ReadOnly) ? source.readAll() : QByteArray();
}

// `bytes` written as `name` in `dir`; its path.
QString write_file(const QTemporaryDir& dir, const QString& name, const QByteArray& bytes) {
    const QString path = dir.filePath(name);
    QFile out(path);
    if (out.open(QIODevice::WriteOnly)) {
        out.write(bytes);
    }
    return path;
}

// Why loading `path` was refused; empty when it loaded.
QString load_refusal(const QString& path) {
    try {
        model::LlamaModel::load(path.toStdString());
    } catch (const gguf::GgufError& error) {
        return QString::fromUtf8(error.what());
    }
    return {};
}

} // namespace

class TestArchitectures : public QObject {
    Q_OBJECT

private slots:
    void logits_match_transformers_data();
    void logits_match_transformers();
    void the_loader_reads_each_architectures_shape();
    void an_unknown_architecture_names_the_supported_ones();
    void a_bad_rope_divisor_is_refused();
    void eviction_refuses_sliding_windows();
    void the_cuda_backend_says_which_caches_it_cannot_hold();
    void prompts_start_with_bos_where_the_file_asks();
    void conversations_without_chatml_are_plain_text();
};

void TestArchitectures::logits_match_transformers_data() {
    test::add_tiny_arch_rows();
}

void TestArchitectures::logits_match_transformers() {
    QFETCH(QString, file);
    QFETCH(QList<int>, chunks);
    const QJsonObject golden = test::tiny_arch_golden(file);
    QVERIFY2(!golden.isEmpty(), qPrintable("no golden logits for " + file));
    const auto model = model::LlamaModel::load(test::engine_data_path(file).toStdString());
    std::vector<std::int32_t> ids;
    for (const QJsonValue& id : golden["ids"].toArray()) {
        ids.push_back(id.toInt());
    }
    // Block size 4: the window of 8 spans blocks, and so do sequences.
    // Gemma's hybrid cache has six groups, each needing room for a chunk.
    cpu::CpuBackend backend(model, {64, 4, 1, kF32Cache});
    const std::vector<float> ours =
        test::logits_in_chunks(backend, ids, std::vector<int>(chunks.begin(), chunks.end()));
    const QJsonArray rows = golden["logits"].toArray();
    QCOMPARE(static_cast<std::size_t>(rows.size()), ids.size());
    const int vocab = backend.vocab_size();
    double worst = 0;
    int worst_position = 0;
    for (qsizetype p = 0; p < rows.size(); ++p) {
        const QJsonArray row = rows[p].toArray();
        QCOMPARE(row.size(), vocab);
        for (int v = 0; v < vocab; ++v) {
            const double gap =
                std::abs(ours[static_cast<std::size_t>(p * vocab + v)] - row[v].toDouble());
            if (gap > worst) {
                worst = gap;
                worst_position = static_cast<int>(p);
            }
        }
    }
    qInfo("%s: max |logit - transformers| %.2e (position %d)", qPrintable(file), worst,
          worst_position);
    // Both dequantise the same q8_0 weights exactly and compute in fp32; the
    // golden file rounds to 1e-4. A wrong step (a missing norm, the other
    // RoPE pairing, an unmasked window) moves logits by tenths or more.
    QVERIFY2(
        worst < 2e-3,
        qPrintable(QString("logits differ by %1 at position %2").arg(worst).arg(worst_position)));
}

void TestArchitectures::the_loader_reads_each_architectures_shape() {
    const auto gemma =
        model::LlamaModel::load(test::engine_data_path("tiny_gemma3.gguf").toStdString());
    const model::LlamaConfig& g = gemma->config();
    QCOMPARE(g.architecture, std::string("gemma3"));
    QCOMPARE(g.head_dim, 32);
    QCOMPARE(g.sliding_window, 8);
    QVERIFY(g.hybrid());
    QCOMPARE(static_cast<int>(g.layer_attention.size()), 6);
    for (int l = 0; l < 6; ++l) {
        const model::LayerAttention& la = g.layer_attention[static_cast<std::size_t>(l)];
        // Every sixth layer is global, with the file's RoPE base.
        QCOMPARE(la.window, l == 5 ? 0 : 8);
        QCOMPARE(la.rope_base, l == 5 ? 1e6f : 1e4f);
    }
    QVERIFY(!gemma->weights().layers[0].post_ffn_norm.empty());

    const auto qwen3 =
        model::LlamaModel::load(test::engine_data_path("tiny_qwen3.gguf").toStdString());
    QCOMPARE(qwen3->config().head_dim, 128); // attention.key_length, not 64 / 2
    QVERIFY(!qwen3->config().hybrid());
    QVERIFY(qwen3->weights().layers[1].q_bias.empty());
    QCOMPARE(qwen3->weights().layers[1].q_norm.size(), std::size_t{128});

    const auto qwen2 =
        model::LlamaModel::load(test::engine_data_path("tiny_qwen2.gguf").toStdString());
    QCOMPARE(qwen2->weights().layers[0].k_bias.size(), std::size_t{32});
    QCOMPARE(qwen2->config().traits.rope, model::RopePairing::halves);

    // Llama 3's scaled RoPE: a divisor per pair, 1 for the fast pairs, the
    // factor (8) for the slow ones and a blend between; none elsewhere.
    const auto llama3 =
        model::LlamaModel::load(test::engine_data_path("tiny_llama3.gguf").toStdString());
    const std::vector<float>& divisors = llama3->config().rope_divisors;
    QCOMPARE(divisors.size(), std::size_t{16});
    QCOMPARE(divisors.front(), 1.0f);
    QCOMPARE(divisors.back(), 8.0f);
    QVERIFY(std::any_of(divisors.begin(), divisors.end(),
                        [](float d) { return d > 1.0f && d < 8.0f; }));
    QVERIFY(std::is_sorted(divisors.begin(), divisors.end()));
    QVERIFY(qwen2->config().rope_divisors.empty());
}

void TestArchitectures::a_bad_rope_divisor_is_refused() {
    // tiny_llama3.gguf with its first RoPE divisor made negative.
    std::uint64_t offset = 0;
    {
        const gguf::GgufFile file =
            gguf::GgufFile::open(test::engine_data_path("tiny_llama3.gguf").toStdString());
        offset = file.require_tensor("rope_freqs.weight").file_offset;
    }
    QByteArray bytes = tiny_model_bytes("tiny_llama3.gguf");
    QVERIFY(!bytes.isEmpty());
    const float negative = -1.0f;
    bytes.replace(static_cast<qsizetype>(offset), sizeof negative,
                  QByteArray(reinterpret_cast<const char*>(&negative), sizeof negative));
    QTemporaryDir dir;
    const QString refusal = load_refusal(write_file(dir, "bad_rope.gguf", bytes));
    QVERIFY2(!refusal.isEmpty(), "a negative RoPE divisor loaded");
    QVERIFY2(refusal.contains("must be positive and finite"), qPrintable(refusal));
}

void TestArchitectures::an_unknown_architecture_names_the_supported_ones() {
    // The tiny Llama with its architecture renamed (same length, so every
    // offset in the file stays valid).
    QByteArray bytes = tiny_model_bytes("tiny_llama.gguf");
    const QByteArray from = QByteArray("llama", 5);
    const qsizetype at = bytes.indexOf(QByteArray("general.architecture"));
    QVERIFY(at >= 0);
    const qsizetype value = bytes.indexOf(from, at + 20);
    QVERIFY(value > at);
    bytes.replace(value, from.size(), QByteArray("bloom"));
    QTemporaryDir dir;
    const QString message = load_refusal(write_file(dir, "bloom.gguf", bytes));
    QVERIFY2(!message.isEmpty(), "a bloom file loaded");
    QVERIFY2(message.contains("'bloom' is not supported"), qPrintable(message));
    QVERIFY2(message.contains("llama, mistral, qwen2, qwen3, gemma3"), qPrintable(message));
}

void TestArchitectures::the_cuda_backend_says_which_caches_it_cannot_hold() {
    // Every architecture runs on CUDA, but not KIVI in a hybrid cache: for
    // that `--backend auto` takes the CPU (saying this) and `cuda` refuses.
    const auto gemma =
        model::LlamaModel::load(test::engine_data_path("tiny_gemma3.gguf").toStdString());
    const auto llama =
        model::LlamaModel::load(test::engine_data_path("tiny_llama.gguf").toStdString());
    session::KvCacheSpec kivi;
    kivi.format = {kv::KvFormat::kivi4, kv::KvFormat::kivi4};
    const QString problem =
        QString::fromStdString(session::cuda_cache_problem(gemma->config(), kivi));
    QVERIFY2(problem.contains("KIVI") && problem.contains("--disable-hybrid-kv-cache-manager"),
             qPrintable(problem));
    kivi.hybrid = false;
    QVERIFY(session::cuda_cache_problem(gemma->config(), kivi).empty());
    kivi.hybrid = true; // one group: a plain cache
    QVERIFY(session::cuda_cache_problem(llama->config(), kivi).empty());
    QVERIFY(session::cuda_cache_problem(gemma->config(), {}).empty()); // f16
    // With no GPU here, auto falls back for that reason first; either way
    // it never resolves to a backend that would refuse the cache.
    QCOMPARE(session::resolve_backend_kind_with_reason(session::BackendKind::automatic,
                                                       problem.toStdString())
                 .kind,
             session::BackendKind::cpu);
}

void TestArchitectures::eviction_refuses_sliding_windows() {
    kv::EvictionConfig h2o;
    h2o.kind = kv::EvictionKind::h2o;
    h2o.budget = 64;
    QVERIFY(h2o.problem(16).empty());
    const QString problem = QString::fromStdString(h2o.problem(16, 512));
    QVERIFY2(problem.contains("sliding-window") && problem.contains("512"), qPrintable(problem));
    QVERIFY(kv::EvictionConfig{}.problem(16, 512).empty()); // no eviction: nothing to refuse
}

void TestArchitectures::prompts_start_with_bos_where_the_file_asks() {
    // Byte-level BPE without add_bos_token: none (llama.cpp's default).
    const auto bpe =
        model::LlamaModel::load(test::engine_data_path("tiny_llama.gguf").toStdString());
    QVERIFY(!bpe->tokenizer().adds_bos());
    QCOMPARE(bpe->tokenizer().encode_sequence("the", false), bpe->tokenizer().encode("the", false));
    // SentencePiece without add_bos_token: BOS first (llama.cpp's default).
    const auto spm = gguf::GgufFile::open(test::engine_data_path("tiny_spm.gguf").toStdString());
    const tokenizer::Tokenizer sp = tokenizer::Tokenizer::from_gguf(spm);
    QVERIFY(sp.adds_bos());
    const std::vector<std::int32_t> ids = sp.encode_sequence("hello", false);
    QCOMPARE(ids.front(), sp.bos_id());
    QCOMPARE(std::vector<std::int32_t>(ids.begin() + 1, ids.end()), sp.encode("hello", false));
}

void TestArchitectures::conversations_without_chatml_are_plain_text() {
    const auto chatml =
        model::LlamaModel::load(test::engine_data_path("tiny_llama.gguf").toStdString());
    const std::vector<tokenizer::ChatMessage> turns{
        {"user", "Hi"}, {"assistant", "Hello"}, {"user", "Bye"}};
    QVERIFY(tokenizer::speaks_chatml(chatml->tokenizer()));
    // No chat template in the file: no default system prompt either.
    QCOMPARE(tokenizer::default_system_prompt(chatml->tokenizer()), std::string());
    QCOMPARE(tokenizer::render_conversation(chatml->tokenizer(), turns),
             tokenizer::render_chatml(turns, true, ""));
    const auto spm = gguf::GgufFile::open(test::engine_data_path("tiny_spm.gguf").toStdString());
    const tokenizer::Tokenizer sp = tokenizer::Tokenizer::from_gguf(spm);
    QVERIFY(!tokenizer::speaks_chatml(sp));
    QCOMPARE(tokenizer::render_conversation(sp, turns), std::string("Hi\n\nHello\n\nBye"));
}

QTEST_GUILESS_MAIN(TestArchitectures)
#include "tst_architectures.moc"
