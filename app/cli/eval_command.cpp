// `kvscope eval`: what a KV format and an eviction policy cost in quality.
// An evaluation text is scored teacher-forced twice, side by side: once with
// a full f32 cache (the reference) and once with the cache under test, with
// the same chunking so that f32 without eviction matches the reference
// exactly. Reports KL divergence of the next-token distributions (mean, p99),
// top-1 agreement, perplexity and its change, and bytes per cached token.
#include "app/cli/command.h"
#include "app/cli/engine_options.h"
#include "app/cli/eviction_options.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/kv/kv_manager.h"
#include "engine/sched/token_eviction.h"
#include "engine/workload/eval_texts.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

namespace kvscope::cli {
namespace {

struct EvalOptions {
    EngineOptions engine;
    EvictionOptions eviction;
    std::string text = "all";
    int max_tokens = 0; // 0: the whole text
    int prompt_tokens = 512;
    int chunk = 32;
    bool json = false;
};

// One sequence on one backend: its blocks, and the attention it captured.
struct Lane {
    std::unique_ptr<cpu::CpuBackend> backend;
    std::unique_ptr<kv::KvManager> kv;
    kv::SequenceBlocks blocks;
    std::vector<float> attention;
    std::int64_t evicted = 0;
    std::int64_t entries_sum = 0; // cache entries held, summed over chunks
    std::int64_t chunks = 0;
};

struct Scores {
    std::vector<double> kl;
    std::int64_t agree = 0;
    double nll = 0;
    double reference_nll = 0;
    std::int64_t positions = 0;
};

void log_softmax(const float* logits, int vocab, std::vector<double>& out) {
    const float top = *std::max_element(logits, logits + vocab);
    double sum = 0;
    for (int i = 0; i < vocab; ++i) {
        sum += std::exp(static_cast<double>(logits[i]) - top);
    }
    const double lse = top + std::log(sum);
    out.resize(static_cast<std::size_t>(vocab));
    for (int i = 0; i < vocab; ++i) {
        out[static_cast<std::size_t>(i)] = static_cast<double>(logits[i]) - lse;
    }
}

// Runs tokens [begin, end) on `lane`, writing their logits to `logits`.
void run_chunk(Lane& lane, const std::vector<std::int32_t>& tokens, std::int32_t begin,
               std::int32_t end, std::int32_t capture_from, std::vector<float>& logits) {
    const std::int32_t n = end - begin;
    if (!lane.kv->grow(0, lane.blocks, lane.blocks.length + n)) {
        throw std::runtime_error("the evaluation's KV cache is too small");
    }
    runner::SequenceStep step{&lane.blocks,
                              std::span<const std::int32_t>(tokens).subspan(
                                  static_cast<std::size_t>(begin), static_cast<std::size_t>(n)),
                              true};
    step.first_position = begin;
    step.capture_attention_from = capture_from;
    logits.resize(static_cast<std::size_t>(n) *
                  static_cast<std::size_t>(lane.backend->vocab_size()));
    lane.backend->forward(runner::build_forward_batch(std::span(&step, 1), lane.kv->block_size()),
                          logits.data());
    lane.blocks.length += n;
}

nlohmann::json evaluate(const EvalOptions& options, const kv::EvictionConfig& eviction,
                        std::shared_ptr<const model::LlamaModel> model,
                        const workload::EvalText& text) {
    std::vector<std::int32_t> tokens = model->tokenizer().encode(text.text, false);
    if (options.max_tokens > 0 && static_cast<int>(tokens.size()) > options.max_tokens) {
        tokens.resize(static_cast<std::size_t>(options.max_tokens));
    }
    const auto total = static_cast<std::int32_t>(tokens.size());
    const int block_size = options.engine.block_size;
    const int blocks = (total + block_size - 1) / block_size + 2;
    const auto make_lane = [&](const kv::KvCacheFormat& format) {
        Lane lane;
        cpu::CpuBackendOptions backend_options;
        backend_options.block_size = block_size;
        backend_options.num_blocks = blocks;
        backend_options.threads = options.engine.threads;
        backend_options.cache_format = format;
        lane.backend = std::make_unique<cpu::CpuBackend>(model, backend_options);
        lane.kv = std::make_unique<kv::KvManager>(blocks, block_size, false);
        return lane;
    };
    Lane reference = make_lane({kv::KvFormat::f32, kv::KvFormat::f32});
    Lane test = make_lane(options.engine.cache_format);
    const int vocab = model->config().vocab;

    Scores scores;
    std::vector<float> reference_logits;
    std::vector<float> test_logits;
    std::vector<double> p;
    std::vector<double> q;
    const std::int32_t prompt = std::min(options.prompt_tokens, total);
    bool compressed = false;
    for (std::int32_t begin = 0; begin < total;) {
        const std::int32_t end =
            begin == 0 ? prompt : std::min(total, begin + std::max(1, options.chunk));
        std::int32_t capture_from = INT32_MAX;
        if (eviction.kind == kv::EvictionKind::h2o) {
            capture_from = 0;
        } else if (eviction.kind == kv::EvictionKind::snapkv && begin == 0) {
            capture_from = std::max(0, prompt - eviction.snapkv_window);
        }
        run_chunk(reference, tokens, begin, end, INT32_MAX, reference_logits);
        run_chunk(test, tokens, begin, end, capture_from, test_logits);
        // Score every position whose next token is known.
        for (std::int32_t t = begin; t < end && t + 1 < total; ++t) {
            const std::size_t row =
                static_cast<std::size_t>(t - begin) * static_cast<std::size_t>(vocab);
            log_softmax(reference_logits.data() + row, vocab, p);
            log_softmax(test_logits.data() + row, vocab, q);
            double kl = 0;
            for (int i = 0; i < vocab; ++i) {
                const double lp = p[static_cast<std::size_t>(i)];
                kl += std::exp(lp) * (lp - q[static_cast<std::size_t>(i)]);
            }
            scores.kl.push_back(std::max(0.0, kl));
            const auto next = static_cast<std::size_t>(tokens[static_cast<std::size_t>(t + 1)]);
            scores.nll -= q[next];
            scores.reference_nll -= p[next];
            scores.agree += std::max_element(p.begin(), p.end()) - p.begin() ==
                            std::max_element(q.begin(), q.end()) - q.begin();
            ++scores.positions;
        }
        // Eviction between chunks, as the serving loop does between steps.
        if (eviction.enabled()) {
            const std::span<const float> captured = test.backend->captured_attention(0);
            test.attention.resize(static_cast<std::size_t>(test.blocks.length), 0.0f);
            for (std::size_t j = 0; j < captured.size() && j < test.attention.size(); ++j) {
                test.attention[j] += captured[j];
            }
            std::vector<std::int32_t> kept;
            if (eviction.kind == kv::EvictionKind::snapkv) {
                if (!compressed) {
                    kept = kv::select_kept(eviction, test.blocks.length, test.attention);
                    compressed = true;
                }
            } else if (test.blocks.length > eviction.budget) {
                kept = kv::select_kept(eviction, test.blocks.length, test.attention);
            }
            if (!kept.empty()) {
                test.evicted += sched::compact_sequence(0, kept, test.blocks, test.attention,
                                                        *test.kv, *test.backend)
                                    .evicted_tokens;
            }
        }
        test.entries_sum += test.blocks.length;
        ++test.chunks;
        begin = end;
    }

    std::vector<double> sorted = scores.kl;
    std::sort(sorted.begin(), sorted.end());
    const auto n = static_cast<double>(std::max<std::int64_t>(1, scores.positions));
    double kl_sum = 0;
    for (const double kl : scores.kl) {
        kl_sum += kl;
    }
    const double ppl = std::exp(scores.nll / n);
    const double reference_ppl = std::exp(scores.reference_nll / n);
    const kv::KvCacheFormat format = options.engine.cache_format;
    const model::LlamaConfig& c = model->config();
    return {
        {"text", text.name},
        {"tokens", total},
        {"positions", scores.positions},
        {"cache_type_k", kv::kv_format_name(format.key)},
        {"cache_type_v", kv::kv_format_name(format.value)},
        {"eviction", kv::eviction_kind_name(eviction.kind)},
        {"kv_budget", eviction.enabled() ? eviction.budget : 0},
        {"kl_mean", kl_sum / n},
        {"kl_p99",
         sorted.empty()
             ? 0.0
             : sorted[std::min(sorted.size() - 1, static_cast<std::size_t>(
                                                      0.99 * static_cast<double>(sorted.size())))]},
        {"top1_agreement", static_cast<double>(scores.agree) / n},
        {"ppl", ppl},
        {"ppl_reference", reference_ppl},
        {"ppl_delta", ppl - reference_ppl},
        {"bytes_per_token",
         kv::kv_bytes_per_token(format, c.layers, c.kv_heads, c.head_dim, block_size)},
        {"evicted_tokens", test.evicted},
        {"mean_cache_tokens",
         test.chunks > 0 ? static_cast<double>(test.entries_sum) / static_cast<double>(test.chunks)
                         : 0.0},
    };
}

int run_eval(EvalOptions& options) {
    if (const std::string problem = options.eviction.resolve(options.engine.block_size);
        !problem.empty()) {
        std::cerr << "kvscope eval: " << problem << "\n";
        return exit_usage;
    }
    std::vector<const workload::EvalText*> texts;
    if (options.text == "all") {
        for (const workload::EvalText& t : workload::eval_texts()) {
            texts.push_back(&t);
        }
    } else if (const workload::EvalText* t = workload::find_eval_text(options.text)) {
        texts.push_back(t);
    } else {
        std::string names;
        for (const workload::EvalText& known : workload::eval_texts()) {
            names += (names.empty() ? "" : ", ") + std::string(known.name);
        }
        std::cerr << "kvscope eval: no evaluation text '" << options.text << "' (have: " << names
                  << ", or all)\n";
        return exit_usage;
    }
    if (texts.empty()) {
        std::cerr << "kvscope eval: this build has no evaluation texts\n";
        return exit_failure;
    }
    const auto model = options.engine.load_model();
    nlohmann::json results = nlohmann::json::array();
    for (const workload::EvalText* text : texts) {
        std::fprintf(stderr, "evaluating on %s ...\n", std::string(text->name).c_str());
        results.push_back(evaluate(options, options.eviction.config, model, *text));
    }
    // Over several texts, position-weighted means (p99: the worst text's).
    nlohmann::json overall = results.size() == 1 ? results[0] : nlohmann::json::object();
    if (results.size() > 1) {
        double positions = 0, kl = 0, top1 = 0, nll = 0, ref_nll = 0, p99 = 0;
        for (const auto& r : results) {
            const double n = r["positions"].get<double>();
            positions += n;
            kl += n * r["kl_mean"].get<double>();
            top1 += n * r["top1_agreement"].get<double>();
            nll += n * std::log(r["ppl"].get<double>());
            ref_nll += n * std::log(r["ppl_reference"].get<double>());
            p99 = std::max(p99, r["kl_p99"].get<double>());
        }
        overall = results[0];
        overall["text"] = "all";
        overall["positions"] = positions;
        overall["kl_mean"] = kl / positions;
        overall["kl_p99"] = p99;
        overall["top1_agreement"] = top1 / positions;
        overall["ppl"] = std::exp(nll / positions);
        overall["ppl_reference"] = std::exp(ref_nll / positions);
        overall["ppl_delta"] = std::exp(nll / positions) - std::exp(ref_nll / positions);
        overall["texts"] = results;
    }
    if (options.json) {
        std::cout << overall.dump() << "\n";
        return exit_ok;
    }
    std::printf("%-40s %7s %10s %10s %7s %8s %8s %9s\n", "text", "tokens", "KL mean", "KL p99",
                "top-1", "ppl", "ppl diff", "B/token");
    for (const auto& r : results) {
        std::printf("%-40s %7lld %10.3g %10.3g %7.4f %8.3f %+8.3f %9.0f\n",
                    r["text"].get<std::string>().c_str(), r["tokens"].get<long long>(),
                    r["kl_mean"].get<double>(), r["kl_p99"].get<double>(),
                    r["top1_agreement"].get<double>(), r["ppl"].get<double>(),
                    r["ppl_delta"].get<double>(), r["bytes_per_token"].get<double>());
    }
    std::printf("(K %s, V %s, %s; against an f32 cache without eviction)\n",
                overall["cache_type_k"].get<std::string>().c_str(),
                overall["cache_type_v"].get<std::string>().c_str(),
                options.eviction.config.describe().c_str());
    return exit_ok;
}

} // namespace

Command add_eval_command(CLI::App& app) {
    auto options = std::make_shared<EvalOptions>();
    CLI::App* parser = app.add_subcommand(
        "eval", "Measure what a KV format and eviction policy cost in quality against a full "
                "f32 cache (KL, top-1, perplexity)");
    parser
        ->add_option("--text", options->text,
                     "Evaluation text by name, or all (see resources/eval)")
        ->capture_default_str();
    parser
        ->add_option("-n,--max-tokens", options->max_tokens,
                     "Evaluate at most this many tokens of each text (default: all)")
        ->check(CLI::Range(2, 1 << 20));
    parser
        ->add_option("--prompt-tokens", options->prompt_tokens,
                     "Tokens prefilled at once before the teacher-forced chunks (SnapKV "
                     "compresses these)")
        ->check(CLI::Range(1, 1 << 20))
        ->capture_default_str();
    parser->add_option("--chunk", options->chunk, "Tokens per teacher-forced step")
        ->check(CLI::Range(1, 4096))
        ->capture_default_str();
    parser->add_flag("--json", options->json, "Print one JSON object");
    options->engine.add_to(*parser);
    options->eviction.add_to(*parser);
    return {parser, [options] {
                return run_eval(*options);
            }};
}

} // namespace kvscope::cli
