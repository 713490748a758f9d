#include "app/cli/engine_options.h"

#include "app/cli/model_option.h"
#include "engine/session/backend_factory.h"
#include "engine/session/cache_size.h"
#include "engine/session/model_loading.h"

#include <iostream>

namespace kvscope::cli {

void EngineOptions::add_to(CLI::App& app) {
    app.add_option("-m,--model", config.model_path,
                   "GGUF model file, or a model setup.sh fetched by name (" + model_names() +
                       "; default: $KVSCOPE_MODEL, else smollm2)")
        ->check(model_file_or_name());
    app.add_option("--backend", backend,
                   "Where the model runs: auto (the GPU when this build can use one, else the "
                   "CPU), cpu or cuda")
        ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
        ->capture_default_str();
    app.add_option("-t,--threads", config.backend.threads, "CPU threads (default: all)")
        ->check(CLI::NonNegativeNumber);
    app.add_option("--block-size", config.block_size, "Tokens per KV-cache block")
        ->check(CLI::Range(1, 1024))
        ->capture_default_str();
    const auto format_option = [&app](const char* flags, kv::KvFormat& target, const char* what) {
        app.add_option_function<std::string>(
               flags,
               [&target](const std::string& name) {
                   target = *kv::parse_kv_format(name); // validated below
               },
               std::string(what) + " storage format: " + kv::kv_format_names() + " (default: f16)")
            ->type_name("FORMAT")
            ->check(
                [](const std::string& name) {
                    return kv::parse_kv_format(name) ? std::string()
                                                     : "unknown KV format '" + name + "'; one of " +
                                                           kv::kv_format_names();
                },
                "FORMAT");
    };
    format_option("--cache-type-k", config.cache_format.key, "K");
    format_option("--cache-type-v", config.cache_format.value, "V");
    app.add_flag("!--disable-hybrid-kv-cache-manager", config.hybrid_kv,
                 "Keep every layer's whole context in one block table, as a plain paged cache "
                 "does, instead of letting sliding-window layers (Gemma 3) free what their "
                 "window left");
    // The cache's size, one way at a time (session::CacheSize), vLLM's names.
    session::CacheSize& size = config.cache;
    app.add_option("--num-gpu-blocks-override", size.num_blocks,
                   "KV-cache capacity in blocks (on the CPU too)")
        ->check(CLI::Range(2, 1 << 30));
    app.add_option("--kv-cache-memory-bytes", size.memory_bytes,
                   "KV-cache capacity in bytes; units allowed (512MiB, 2GiB)")
        ->transform(CLI::AsSizeValue(false))
        ->type_name("SIZE");
    app.add_option("--gpu-memory-utilization", size.memory_utilization,
                   "KV-cache capacity as a share of free device memory on a GPU, of "
                   "--cpu-memory-budget on the CPU")
        ->check(CLI::Range(0.0001, 1.0));
    app.add_option("--cpu-memory-budget", size.budget_bytes,
                   "What --gpu-memory-utilization is a share of on the CPU (default: the "
                   "memory available now); units allowed")
        ->transform(CLI::AsSizeValue(false))
        ->type_name("SIZE");
    app.add_option("--cache-tokens", size.tokens,
                   "KV-cache capacity in tokens (default: what the run needs)")
        ->check(CLI::NonNegativeNumber);
    app.add_option("--max-model-len", config.max_model_len,
                   "Longest request, prompt and output: longer prompts are rejected, outputs "
                   "stop there (default: the model's context)")
        ->check(CLI::Range(1, 1 << 30));
}

std::string EngineOptions::resolve() {
    const std::optional<session::BackendKind> kind = session::parse_backend_kind(backend);
    if (!kind) {
        return "unknown backend '" + backend + "'; one of " + session::backend_kind_names();
    }
    config.backend.kind = *kind;
    return config.cache.problem();
}

std::shared_ptr<const model::LlamaModel> EngineOptions::load_model() const {
    const std::filesystem::path path = session::model_file(config.model_path);
    auto model = session::load_model(path);
    std::cerr << "model: " << path.string() << " (" << session::describe_model(*model) << ")\n";
    return model;
}

std::unique_ptr<runner::Backend>
EngineOptions::make_backend(std::shared_ptr<const model::LlamaModel> model,
                            std::int64_t default_tokens, bool announce) const {
    session::KvCacheSpec cache;
    cache.block_size = config.block_size;
    cache.format = config.cache_format;
    cache.hybrid = config.hybrid_kv;
    const session::ResolvedBackend resolved = session::resolve_backend_kind_with_reason(
        config.backend.kind, session::cuda_cache_problem(model->config(), cache));
    cache.num_blocks = session::resolve_num_blocks(
        config.cache, model->config(), cache.format, cache.block_size, default_tokens,
        session::backend_memory_bytes(resolved.kind), cache.hybrid);
    auto made = session::make_backend(config.backend, std::move(model), cache);
    if (announce) {
        if (!resolved.fallback_note.empty()) {
            std::cerr << resolved.fallback_note << "\n";
        }
        std::cerr << "backend: " << session::describe_backend(*made) << "\n";
    }
    return made;
}

} // namespace kvscope::cli
