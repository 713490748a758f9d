// `kvscope eval`: what a KV format and an eviction policy cost in quality.
// Each evaluation text is scored teacher-forced against a full f32 cache
// (quality::measure_kv_quality). Reports KL divergence of the next-token
// distributions (mean, p99), top-1 agreement, perplexity and its change, and
// bytes per cached token.
#include "app/cli/command.h"
#include "app/cli/engine_options.h"
#include "app/cli/eviction_options.h"
#include "engine/quality/kv_quality.h"
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

nlohmann::json evaluate(const EvalOptions& options, const kv::EvictionConfig& eviction,
                        std::shared_ptr<const model::LlamaModel> model,
                        const workload::EvalText& text) {
    std::vector<std::int32_t> tokens = model->tokenizer().encode_sequence(text.text, false);
    if (options.max_tokens > 0 && static_cast<int>(tokens.size()) > options.max_tokens) {
        tokens.resize(static_cast<std::size_t>(options.max_tokens));
    }
    quality::QualityOptions measure;
    measure.format = options.engine.config.cache_format;
    measure.eviction = eviction;
    measure.block_size = options.engine.config.block_size;
    measure.backend = options.engine.config.backend;
    measure.prompt_tokens = options.prompt_tokens;
    measure.chunk = options.chunk;
    const quality::QualityResult r = quality::measure_kv_quality(model, tokens, measure);
    const kv::KvCacheFormat format = options.engine.config.cache_format;
    return {
        {"text", text.name},
        {"tokens", r.tokens},
        {"positions", r.positions},
        {"cache_type_k", kv::kv_format_name(format.key)},
        {"cache_type_v", kv::kv_format_name(format.value)},
        {"eviction", kv::eviction_kind_name(eviction.kind)},
        {"kv_budget", eviction.enabled() ? eviction.budget : 0},
        {"kl_mean", r.kl_mean},
        {"kl_p99", r.kl_p99},
        {"top1_agreement", r.top1_agreement},
        {"ppl", r.ppl},
        {"ppl_reference", r.ppl_reference},
        {"ppl_delta", r.ppl - r.ppl_reference},
        {"bytes_per_token", r.bytes_per_token},
        {"evicted_tokens", r.evicted_tokens},
        {"mean_cache_tokens", r.mean_cache_tokens},
    };
}

int run_eval(EvalOptions& options) {
    if (const std::string problem = options.engine.resolve(); !problem.empty()) {
        std::cerr << "kvscope eval: " << problem << "\n";
        return exit_usage;
    }
    if (const std::string problem = options.eviction.resolve(options.engine.config.block_size);
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
