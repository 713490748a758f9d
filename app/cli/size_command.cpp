// `kvscope size`: what a KV cache weighs and how much fits, for a GGUF's own
// metadata or a well-known model's configuration, beside the same model as
// MHA, GQA, MQA and MLA (engine/kv/kv_sizing.h).
#include "app/cli/command.h"
#include "app/cli/model_option.h"
#include "engine/kv/kv_sizing.h"
#include "engine/session/model_loading.h"

#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

namespace kvscope::cli {
namespace {

struct SizeOptions {
    std::string model_path;
    std::string preset;
    bool list = false;
    std::int64_t context = 8192;
    int batch = 1;
    std::string key_format = "f16";
    std::string value_format = "f16";
    std::int64_t memory_bytes = 0;
    double utilization = 0.9;
    std::int64_t weight_bytes = -1; // -1: the model's
    bool json = false;
};

int run_size(const SizeOptions& o) {
    if (o.list) {
        for (const kv::ModelShape& s : kv::known_model_shapes()) {
            std::printf("%-12s %3d layers, %3d query heads, %3d KV heads, K %d / V %d per head%s\n",
                        s.name.c_str(), s.layers, s.heads, s.kv_heads, s.key_dim, s.value_dim,
                        s.mla_latent > 0 ? (", MLA latent " + std::to_string(s.mla_latent)).c_str()
                                         : "");
        }
        return exit_ok;
    }
    kv::ModelShape shape;
    if (!o.preset.empty()) {
        const std::optional<kv::ModelShape> known = kv::find_model_shape(o.preset);
        if (!known) {
            std::cerr << "kvscope size: no built-in model '" << o.preset
                      << "' (kvscope size --list shows them)\n";
            return exit_usage;
        }
        shape = *known;
    } else {
        shape = session::model_shape(session::model_file(o.model_path));
    }
    const kv::KvCacheFormat format{*kv::parse_kv_format(o.key_format),
                                   *kv::parse_kv_format(o.value_format)};
    for (const int dim : {shape.key_dim, shape.value_dim}) {
        if (const std::string problem = kv::kv_format_problem(format.key, dim); !problem.empty()) {
            std::cerr << "kvscope size: " << problem << "\n";
            return exit_usage;
        }
    }
    kv::SizingQuestion question;
    question.context_tokens = o.context;
    question.batch = o.batch;
    question.memory_bytes = static_cast<double>(o.memory_bytes);
    question.utilization = o.utilization;
    question.weight_bytes =
        o.weight_bytes >= 0 ? static_cast<double>(o.weight_bytes) : shape.weight_bytes;

    const std::vector<kv::VariantSize> variants = kv::attention_variants(shape, format);
    if (o.json) {
        nlohmann::json rows = nlohmann::json::array();
        for (const kv::VariantSize& v : variants) {
            const kv::SizingAnswer a = kv::answer(v.shape, format, question);
            rows.push_back({{"attention", v.label},
                            {"own", v.own},
                            {"kv_heads", v.shape.mla_latent > 0 ? 0 : v.shape.kv_heads},
                            {"bytes_per_token", v.bytes_per_token},
                            {"bytes_per_token_past_windows",
                             kv::bytes_per_token_past_windows(v.shape, format)},
                            {"bytes_per_request", a.per_request_bytes},
                            {"bytes_per_batch", a.per_batch_bytes},
                            {"tokens_fit", a.tokens_fit},
                            {"requests_fit", a.requests_fit}});
        }
        const kv::SizingAnswer own = kv::answer(shape, format, question);
        std::cout << nlohmann::json{{"model", shape.name},
                                    {"layers", shape.layers},
                                    {"sliding_layers", shape.hybrid() ? shape.sliding_layers : 0},
                                    {"sliding_window", shape.hybrid() ? shape.sliding_window : 0},
                                    {"heads", shape.heads},
                                    {"kv_heads", shape.kv_heads},
                                    {"cache_type_k", kv::kv_format_name(format.key)},
                                    {"cache_type_v", kv::kv_format_name(format.value)},
                                    {"context_tokens", o.context},
                                    {"batch", o.batch},
                                    {"memory_bytes", question.memory_bytes},
                                    {"gpu_memory_utilization", o.utilization},
                                    {"weight_bytes", question.weight_bytes},
                                    {"cache_budget_bytes", own.cache_budget_bytes},
                                    {"variants", rows}}
                         .dump(2)
                  << "\n";
        return exit_ok;
    }
    const std::string windows = shape.hybrid()
                                    ? " (" + std::to_string(shape.sliding_layers) +
                                          " over a sliding window of " +
                                          std::to_string(shape.sliding_window) + " tokens)"
                                    : "";
    std::printf("%s: %d layers%s, %d query heads, %d KV heads%s; K %s, V %s\n", shape.name.c_str(),
                shape.layers, windows.c_str(), shape.heads, shape.kv_heads,
                shape.mla_latent > 0 ? " (MLA: one latent a token and layer)" : "",
                std::string(kv::kv_format_name(format.key)).c_str(),
                std::string(kv::kv_format_name(format.value)).c_str());
    const kv::SizingAnswer own = kv::answer(shape, format, question);
    if (question.memory_bytes > 0) {
        std::printf("Memory: %s x %.2f - %s of weights = %s for the cache%s\n",
                    kv::size_text(question.memory_bytes).c_str(), o.utilization,
                    kv::size_text(question.weight_bytes).c_str(),
                    kv::size_text(own.cache_budget_bytes).c_str(),
                    own.cache_budget_bytes <= 0 ? " (the weights do not fit)" : "");
    }
    std::printf("%-42s %12s %14s %14s", "attention", "per token",
                ("a request (" + std::to_string(o.context) + " t)").c_str(),
                ("batch of " + std::to_string(o.batch)).c_str());
    if (question.memory_bytes > 0) {
        std::printf(" %14s %10s", "tokens fit", "requests");
    }
    std::printf("\n");
    for (const kv::VariantSize& v : variants) {
        const kv::SizingAnswer a = kv::answer(v.shape, format, question);
        std::printf("%-42s %12s %14s %14s", (v.label + (v.own ? " *" : "")).c_str(),
                    kv::size_text(v.bytes_per_token).c_str(),
                    kv::size_text(a.per_request_bytes).c_str(),
                    kv::size_text(a.per_batch_bytes).c_str());
        if (question.memory_bytes > 0) {
            std::printf(" %14.0f %10.0f", a.tokens_fit, a.requests_fit);
        }
        std::printf("\n");
    }
    std::printf("* the model's own attention\n");
    if (shape.hybrid()) {
        // Its per-token figure counts a token while it is in every window.
        std::printf("  per token of the model's own attention: a token inside the windows; one "
                    "past them keeps %s (its %d global layer%s)\n",
                    kv::size_text(kv::bytes_per_token_past_windows(shape, format)).c_str(),
                    shape.global_layers(), shape.global_layers() == 1 ? "" : "s");
    }
    return exit_ok;
}

} // namespace

Command add_size_command(CLI::App& app) {
    auto options = std::make_shared<SizeOptions>();
    CLI::App* sub = app.add_subcommand(
        "size", "What the KV cache weighs per token, request and batch, and how much fits in a "
                "device's memory; the same model as MHA, GQA, MQA and MLA side by side");
    CLI::Option* model =
        sub->add_option("--model", options->model_path,
                        "A GGUF model, sized from its metadata: a file or a name (" +
                            model_names() + "; default: $KVSCOPE_MODEL, or smollm2)")
            ->check(model_file_or_name());
    sub->add_option("--preset", options->preset,
                    "A built-in model instead: Llama-3-8B, Llama-3-70B, Mistral-7B, Qwen2.5-7B, "
                    "Gemma-3-27B, "
                    "DeepSeek-V3 (--list shows their shapes)")
        ->excludes(model);
    sub->add_flag("--list", options->list, "List the built-in models");
    sub->add_option("--context", options->context, "Tokens a request holds, prompt and output")
        ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 30))
        ->capture_default_str();
    sub->add_option("--batch", options->batch, "Requests held at once")
        ->check(CLI::Range(1, 1 << 20))
        ->capture_default_str();
    const auto formats = CLI::IsMember([] {
        std::vector<std::string> names;
        for (const kv::KvFormat f : kv::all_kv_formats()) {
            names.emplace_back(kv::kv_format_name(f));
        }
        return names;
    }());
    sub->add_option("--cache-type-k", options->key_format, "K's format")
        ->check(formats)
        ->capture_default_str();
    sub->add_option("--cache-type-v", options->value_format, "V's format")
        ->check(formats)
        ->capture_default_str();
    sub->add_option("--memory", options->memory_bytes,
                    "The device's memory (80GiB, 141GB): also say how many tokens and requests "
                    "fit")
        ->transform(CLI::AsSizeValue(false));
    sub->add_option("--gpu-memory-utilization", options->utilization,
                    "The share of --memory the server may use (vLLM's)")
        ->check(CLI::Range(0.01, 1.0))
        ->capture_default_str();
    sub->add_option("--weight-bytes", options->weight_bytes,
                    "The weights' bytes (default: the GGUF's size, or the built-in model's at "
                    "bf16; DeepSeek-V3 at fp8)")
        ->transform(CLI::AsSizeValue(false));
    sub->add_flag("--json", options->json, "Print the sizes as JSON");
    return {sub, [options] {
                return run_size(*options);
            }};
}

} // namespace kvscope::cli
