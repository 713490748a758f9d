// Speculative decoding: prompt lookup proposes what followed the longest
// earlier match; the verification rule keeps the target's distribution
// whatever the drafter's (checked by frequency, with the check shown to
// catch a wrong rule); the engine's sampled output follows the target
// model's exact distribution with a self-draft; and on the real model,
// greedy output with either drafter equals plain decoding's token for
// token, on the golden prompts served together.
#include "engine/cpu/cpu_backend.h"
#include "engine/model/llama_model.h"
#include "engine/sched/llm_engine.h"
#include "engine/spec/ngram_proposer.h"
#include "engine/spec/rejection_sampling.h"
#include "engine/spec/speculative_config.h"
#include "tests/support/golden.h"

#include <cmath>
#include <map>
#include <random>

#include <QJsonArray>
#include <QTest>

using namespace kvscope;

namespace {

// Pearson's chi-square of observed counts against expected probabilities.
double chi_square(const std::map<std::int32_t, double>& counts,
                  const std::map<std::int32_t, double>& expected, double draws) {
    double chi2 = 0;
    for (const auto& [token, p] : expected) {
        const auto it = counts.find(token);
        const double observed = it == counts.end() ? 0.0 : it->second;
        chi2 += (observed - p * draws) * (observed - p * draws) / (p * draws);
    }
    for (const auto& [token, observed] : counts) {
        if (expected.count(token) == 0 && observed > 0) {
            return INFINITY; // a token the target never gives
        }
    }
    return chi2;
}

// Chi-square's 1 - 1e-6 quantile for `df` degrees of freedom (Wilson-
// Hilferty): seeded runs, so this bounds nothing random, but a correct rule
// sits far below it and a wrong one far above.
double chi_square_limit(int df) {
    const double z = 4.753; // standard normal's 1 - 1e-6 quantile
    const double a = 2.0 / (9.0 * df);
    return df * std::pow(1.0 - a + z * std::sqrt(a), 3.0);
}

// A model over four tokens whose next-token logits depend on the last token
// only (a Markov chain), with a self-draft (a pass of fewer layers) that
// believes in another chain: the engine's output distribution is known
// exactly, and drafts are often wrong.
constexpr int kVocab = 4;
constexpr double kTarget[kVocab][kVocab] = {{0.10, 0.20, 0.30, 0.40},
                                            {0.50, 0.25, 0.15, 0.10},
                                            {0.25, 0.25, 0.25, 0.25},
                                            {0.05, 0.05, 0.60, 0.30}};
constexpr double kDraft[kVocab][kVocab] = {{0.40, 0.30, 0.20, 0.10},
                                           {0.10, 0.60, 0.20, 0.10},
                                           {0.70, 0.10, 0.10, 0.10},
                                           {0.25, 0.25, 0.25, 0.25}};

class MarkovBackend final : public runner::Backend {
public:
    // `draft`: a draft model's backend, every pass the other chain.
    explicit MarkovBackend(bool draft = false, int blocks = 256)
        : draft_(draft)
        , blocks_(blocks) {}
    std::string name() const override { return "markov"; }
    int vocab_size() const override { return kVocab; }
    int block_size() const override { return 4; }
    int num_blocks() const override { return blocks_; }
    int layers() const override { return 2; }
    kv::KvCacheFormat cache_format() const override { return {}; }
    std::int64_t kv_cache_bytes() const override { return 256; }
    void release_blocks(std::span<const kv::BlockId>) override {}
    void copy_slots(std::span<const std::int32_t>, std::span<const std::int32_t>) override {}
    void forward(const runner::ForwardBatch& batch, float* logits) override {
        const auto& table = batch.layers > 0 || draft_ ? kDraft : kTarget;
        for (std::size_t r = 0; r < batch.logit_tokens.size(); ++r) {
            const std::int32_t last =
                batch.token_ids[static_cast<std::size_t>(batch.logit_tokens[r])];
            for (int t = 0; t < kVocab; ++t) {
                logits[r * kVocab + static_cast<std::size_t>(t)] =
                    static_cast<float>(std::log(table[last][t]));
            }
        }
    }

private:
    bool draft_;
    int blocks_;
};

} // namespace

class TestSpeculative : public QObject {
    Q_OBJECT

private slots:
    void prompt_lookup_proposes_what_followed_the_longest_match();
    void the_command_line_form_parses_and_refuses_nonsense();
    void verification_keeps_the_target_distribution_data();
    void verification_keeps_the_target_distribution();
    void engine_sampling_follows_the_target_model_data();
    void engine_sampling_follows_the_target_model();
    void drafts_take_only_what_no_request_needs();
    void real_model_greedy_output_is_unchanged_by_speculation_data();
    void real_model_greedy_output_is_unchanged_by_speculation();
};

void TestSpeculative::prompt_lookup_proposes_what_followed_the_longest_match() {
    using V = std::vector<std::int32_t>;
    // "7 8" occurred before, followed by 9 10 11; "8" alone later by 5.
    const V tokens{1, 7, 8, 9, 10, 11, 8, 5, 2, 7, 8};
    QCOMPARE(spec::propose_ngram(tokens, 1, 3, 3), (V{9, 10, 11}));
    QCOMPARE(spec::propose_ngram(tokens, 1, 3, 2), (V{9, 10}));
    // Only single tokens allowed: the latest earlier 8 is followed by 5, 2.
    QCOMPARE(spec::propose_ngram(tokens, 1, 1, 2), (V{5, 2}));
    // A continuation cut short by the end of the sequence.
    QCOMPARE(spec::propose_ngram(V{4, 6, 4}, 1, 2, 5), (V{6, 4}));
    QCOMPARE(spec::propose_ngram(V{1, 2, 3}, 1, 3, 4), V{});       // nothing repeats
    QCOMPARE(spec::propose_ngram(V{}, 1, 3, 4), V{});              // nothing at all
    QCOMPARE(spec::propose_ngram(V{3, 3}, 2, 3, 4), V{});          // too short for n = 2
    QCOMPARE(spec::propose_ngram(V{3, 3, 3}, 1, 3, 0), V{});       // no slots
    QCOMPARE(spec::propose_ngram(V{5, 5, 5, 5}, 1, 3, 2), (V{5})); // "5 5 5" at 0, then one token
}

void TestSpeculative::the_command_line_form_parses_and_refuses_nonsense() {
    std::string error;
    const auto ngram = spec::parse_speculative("ngram:6", 0, error);
    QVERIFY(ngram);
    QCOMPARE(ngram->method, spec::DraftMethod::ngram);
    QCOMPARE(ngram->draft_tokens, 6);
    const auto draft = spec::parse_speculative("draft", 12, error);
    QVERIFY(draft);
    QCOMPARE(draft->method, spec::DraftMethod::layers);
    QCOMPARE(draft->draft_tokens, 4);
    QCOMPARE(draft->draft_layers, 12);
    QCOMPARE(draft->problem(30), std::string());
    QVERIFY(draft->problem(12).find("fewer than the model's 12 layers") != std::string::npos);
    QVERIFY(!spec::parse_speculative("off", 0, error)->enabled());
    for (const char* bad : {"ngram:x", "ngram:0", "ngram:99", "medusa:3", "ngram:3junk"}) {
        error.clear();
        QVERIFY2(!spec::parse_speculative(bad, 0, error), bad);
        QVERIFY2(!error.empty(), bad);
    }
    error.clear();
    QVERIFY(!spec::parse_speculative("draft:3", 0, error));
    QVERIFY(error.find("--draft-layers") != std::string::npos);
}

void TestSpeculative::verification_keeps_the_target_distribution_data() {
    QTest::addColumn<QList<double>>("p");
    QTest::addColumn<QList<double>>("q"); // empty: a certain draft of token 0
    QTest::newRow("draft unlike the target")
        << QList<double>{0.1, 0.2, 0.3, 0.4} << QList<double>{0.4, 0.3, 0.2, 0.1};
    QTest::newRow("draft sure of one token")
        << QList<double>{0.5, 0.25, 0.125, 0.125} << QList<double>{};
    QTest::newRow("draft outside the target's support")
        << QList<double>{0.0, 0.5, 0.5, 0.0} << QList<double>{0.25, 0.25, 0.25, 0.25};
    QTest::newRow("draft equal to the target")
        << QList<double>{0.3, 0.3, 0.2, 0.2} << QList<double>{0.3, 0.3, 0.2, 0.2};
}

void TestSpeculative::verification_keeps_the_target_distribution() {
    QFETCH(QList<double>, p);
    QFETCH(QList<double>, q);
    const auto as_distribution = [](const QList<double>& probabilities) {
        sampling::Distribution d;
        for (qsizetype t = 0; t < probabilities.size(); ++t) {
            if (probabilities[t] > 0) {
                d.push_back({static_cast<std::int32_t>(t), probabilities[t]});
            }
        }
        return d;
    };
    const sampling::Distribution target = as_distribution(p);
    const sampling::Distribution drafter = as_distribution(q);
    std::map<std::int32_t, double> expected;
    for (const sampling::TokenProbability& t : target) {
        expected[t.token] = t.probability;
    }
    std::mt19937_64 rng(7);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    const int draws = 200000;
    std::map<std::int32_t, double> out;
    std::map<std::int32_t, double> drafts; // what keeping every draft would give
    int accepted = 0;
    for (int i = 0; i < draws; ++i) {
        const std::int32_t x = drafter.empty() ? 0 : sampling::draw_from(drafter, u(rng));
        const spec::DraftCheck check = spec::check_draft(target, drafter, x, u(rng), u(rng));
        out[check.token] += 1;
        drafts[x] += 1;
        accepted += check.accepted ? 1 : 0;
        QVERIFY(!check.accepted || check.token == x);
    }
    const double chi2 = chi_square(out, expected, draws);
    const double limit = chi_square_limit(static_cast<int>(expected.size()) - 1);
    qInfo("chi-square %.2f (limit %.2f), %.1f%% of drafts kept", chi2, limit,
          100.0 * accepted / draws);
    QVERIFY2(chi2 < limit, "verified tokens do not follow the target distribution");
    // The check has the power to see a wrong rule: keeping every draft
    // gives the drafter's distribution, far from the target's.
    if (p != q) {
        QVERIFY(chi_square(drafts, expected, draws) > 10 * limit);
    } else {
        QCOMPARE(accepted, draws); // nothing to correct
    }
}

void TestSpeculative::engine_sampling_follows_the_target_model_data() {
    QTest::addColumn<int>("method");
    QTest::newRow("self-draft") << int(spec::DraftMethod::layers);
    QTest::newRow("draft model") << int(spec::DraftMethod::model);
}

void TestSpeculative::engine_sampling_follows_the_target_model() {
    QFETCH(int, method);
    // Four sampled tokens after the prompt [1]: the first comes from the
    // prompt's pass, the other three from verified drafts of two tokens
    // (kept ones, replacements and bonus tokens), and their 64 sequences
    // have exact probabilities the chain gives.
    MarkovBackend backend;
    MarkovBackend draft_model(true);
    sched::EngineConfig config;
    config.speculative.method = static_cast<spec::DraftMethod>(method);
    config.draft_backend = &draft_model;
    config.speculative.draft_tokens = 2;
    config.speculative.draft_layers = 1;
    config.scheduler.max_num_seqs = 64;
    config.scheduler.max_num_batched_tokens = 256;
    sched::LlmEngine engine(backend, config);
    const int requests = 24000;
    std::map<std::int32_t, double> counts;
    std::int64_t drafted = 0;
    std::int64_t accepted = 0;
    for (int i = 0; i < requests; ++i) {
        sched::RequestSpec spec;
        spec.prompt = {1};
        spec.max_tokens = 4;
        spec.sampling.temperature = 1.0f;
        spec.sampling.top_k = 0;
        spec.sampling.top_p = 1.0f;
        spec.sampling.min_p = 0.0f;
        spec.sampling.seed = static_cast<std::uint64_t>(i) + 1;
        engine.add_request(spec);
        if (i % 64 == 63) {
            while (engine.has_unfinished()) {
                engine.step();
                QVERIFY(engine.check_invariants().empty());
            }
            for (const std::int64_t id : engine.request_ids()) {
                const sched::Request& r = engine.request(id);
                QCOMPARE(static_cast<int>(r.tokens.size()), 5);
                counts[r.tokens[2] * 16 + r.tokens[3] * 4 + r.tokens[4]] += 1;
                drafted += r.accounting.drafted_tokens;
                accepted += r.accounting.accepted_tokens;
                engine.forget(id);
            }
        }
    }
    std::map<std::int32_t, double> expected;
    for (int first = 0; first < kVocab; ++first) {
        for (int a = 0; a < kVocab; ++a) {
            for (int b = 0; b < kVocab; ++b) {
                for (int c = 0; c < kVocab; ++c) {
                    expected[a * 16 + b * 4 + c] +=
                        kTarget[1][first] * kTarget[first][a] * kTarget[a][b] * kTarget[b][c];
                }
            }
        }
    }
    const double chi2 = chi_square(counts, expected, requests);
    const double limit = chi_square_limit(63);
    qInfo("chi-square %.1f (limit %.1f); %lld drafted, %lld kept", chi2, limit,
          static_cast<long long>(drafted), static_cast<long long>(accepted));
    QVERIFY2(drafted > 0 && accepted > 0 && accepted < drafted,
             "the self-draft never drafted, or verification never judged");
    QVERIFY2(chi2 < limit, "speculative sampling changed the output distribution");
}

void TestSpeculative::drafts_take_only_what_no_request_needs() {
    // Three requests that need 4 blocks each at most, in a pool of 12: plain
    // decoding never runs out. Drafts get slots only from free blocks left
    // once every request has its token, so speculation never preempts.
    MarkovBackend backend(false, 12);
    MarkovBackend draft_model(true, 12);
    sched::EngineConfig config;
    config.speculative.method = spec::DraftMethod::model;
    config.speculative.draft_tokens = 4;
    config.draft_backend = &draft_model;
    config.prefix_caching = false;
    sched::LlmEngine engine(backend, config);
    for (int i = 0; i < 3; ++i) {
        sched::RequestSpec spec;
        spec.prompt = {1, 2, 3, 0, 1, 2, static_cast<std::int32_t>(i)};
        spec.max_tokens = 9; // 7 + 9 = 16 tokens: 4 blocks
        spec.sampling.temperature = 0;
        engine.add_request(spec);
    }
    std::int64_t drafted = 0;
    while (engine.has_unfinished()) {
        drafted += engine.step().drafted_tokens;
        QVERIFY(engine.check_invariants().empty());
    }
    for (const std::int64_t id : engine.request_ids()) {
        QCOMPARE(engine.request(id).accounting.preemptions, 0);
        QCOMPARE(engine.request(id).generated, 9);
    }
    QVERIFY2(drafted > 0, "no draft got a slot: the test shows nothing");
}

void TestSpeculative::real_model_greedy_output_is_unchanged_by_speculation_data() {
    QTest::addColumn<QString>("method");
    QTest::addColumn<int>("block_size");
    QTest::newRow("ngram:4") << "ngram:4" << 16;
    QTest::newRow("ngram:3, 4-token blocks") << "ngram:3" << 4;
    QTest::newRow("draft:3 from 16 layers") << "draft:3" << 16;
    // The target drafting for itself: every greedy draft must be kept, which
    // holds only if the draft model's own pool is filled right (prompt
    // caught up, rollbacks forgotten).
    QTest::newRow("draft:4 by itself as the draft model") << "model:4" << 16;
}

void TestSpeculative::real_model_greedy_output_is_unchanged_by_speculation() {
    QFETCH(QString, method);
    QFETCH(int, block_size);
    const QJsonObject golden = test::load_golden();
    if (const QString problem = test::golden_model_problem(golden); !problem.isEmpty()) {
        QSKIP(qPrintable("needs the SmolLM2 model: " + problem));
    }
    static const auto model = model::LlamaModel::load(test::golden_model_path());
    const QJsonArray cases = golden.value("greedy").toArray();
    QVERIFY(!cases.isEmpty());
    std::int64_t drafted = 0;
    const auto serve = [&](const spec::SpeculativeConfig& speculative, std::int64_t* accepted) {
        cpu::CpuBackendOptions options;
        options.block_size = block_size;
        options.num_blocks = 512 / block_size;
        options.cache_format = {kv::KvFormat::f32, kv::KvFormat::f32};
        cpu::CpuBackend backend(model, options);
        cpu::CpuBackend draft(model, options);
        sched::EngineConfig config;
        config.scheduler.max_num_batched_tokens = 64;
        config.speculative = speculative;
        config.draft_backend = &draft;
        sched::LlmEngine engine(backend, config);
        std::vector<std::int64_t> ids;
        for (const QJsonValue& c : cases) {
            sched::RequestSpec spec;
            for (const QJsonValue& v : c.toObject().value("prompt_ids").toArray()) {
                spec.prompt.push_back(v.toInt());
            }
            spec.max_tokens = static_cast<int>(c.toObject().value("tokens").toArray().size());
            spec.ignore_eos = true;
            spec.sampling.temperature = 0;
            ids.push_back(engine.add_request(spec));
        }
        while (engine.has_unfinished()) {
            engine.step();
            const std::string problem = engine.check_invariants();
            if (!problem.empty()) {
                throw std::runtime_error(problem);
            }
        }
        std::vector<std::vector<std::int32_t>> outputs;
        for (const std::int64_t id : ids) {
            const sched::Request& r = engine.request(id);
            outputs.emplace_back(r.tokens.begin() + r.prompt_length(), r.tokens.end());
            *accepted += r.accounting.accepted_tokens;
            drafted += r.accounting.drafted_tokens;
        }
        return outputs;
    };
    std::string error;
    const bool by_model = method.startsWith("model:");
    const std::optional<spec::SpeculativeConfig> speculative = spec::parse_speculative(
        by_model ? "draft:" + method.mid(6).toStdString() : method.toStdString(), 16, error,
        by_model);
    QVERIFY2(speculative, error.c_str());
    std::int64_t ignored = 0;
    std::int64_t accepted = 0;
    const auto plain = serve({}, &ignored);
    const auto sped = serve(*speculative, &accepted);
    qInfo("%lld draft tokens kept", static_cast<long long>(accepted));
    QVERIFY2(accepted > 0, "no draft was ever kept: the test would not see a rollback's effect");
    if (by_model) {
        // Near-ties may flip between a 1-token and a 5-token pass; nothing else may.
        qInfo("%lld of %lld drafted tokens kept", static_cast<long long>(accepted),
              static_cast<long long>(drafted));
        QVERIFY2(accepted >= drafted * 98 / 100, "the draft model's own K/V went wrong");
    }
    for (std::size_t i = 0; i < plain.size(); ++i) {
        QVERIFY2(sped[i] == plain[i],
                 qPrintable(QString("golden prompt %1: speculative output differs").arg(i)));
        const QString mismatch =
            test::greedy_mismatch(cases[static_cast<qsizetype>(i)].toObject(), sped[i]);
        QVERIFY2(mismatch.isEmpty(), qPrintable(mismatch));
    }
}

QTEST_GUILESS_MAIN(TestSpeculative)
#include "tst_speculative.moc"
