#include "app/cli/engine_options.h"

#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/matmul.h"
#include "engine/model_path.h"

#include <cstdio>
#include <iostream>
#include <stdexcept>

namespace kvscope::cli {
namespace {

std::string readable_bytes(std::int64_t bytes) {
    char text[32];
    if (bytes >= 1024 * 1024) {
        std::snprintf(text, sizeof text, "%.1f MiB",
                      static_cast<double>(bytes) / (1024.0 * 1024.0));
    } else {
        std::snprintf(text, sizeof text, "%.1f KiB", static_cast<double>(bytes) / 1024.0);
    }
    return text;
}

} // namespace

void EngineOptions::add_to(CLI::App& app) {
    app.add_option("-m,--model", model_path,
                   "GGUF model file (default: $KVSCOPE_MODEL, else the model setup.sh fetched)")
        ->check(CLI::ExistingFile);
    app.add_option("-t,--threads", threads, "CPU threads (default: all)")
        ->check(CLI::NonNegativeNumber);
    app.add_option("--block-size", block_size, "Tokens per KV-cache block")
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
    format_option("--cache-type-k", cache_format.key, "K");
    format_option("--cache-type-v", cache_format.value, "V");
    app.add_option("--cache-tokens", cache_tokens,
                   "KV-cache capacity in tokens (default: what the run needs)")
        ->check(CLI::NonNegativeNumber);
}

std::shared_ptr<const model::LlamaModel> EngineOptions::load_model() const {
    ModelPath path = resolve_model_path();
    if (!model_path.empty()) {
        path = {model_path, false};
    }
    if (const std::string problem = model_path_problem(path); !problem.empty()) {
        throw std::runtime_error(problem);
    }
    auto model = model::LlamaModel::load(path.path);
    const model::LlamaConfig& c = model->config();
    std::cerr << "model: " << path.path.string() << " ("
              << (c.name.empty() ? c.architecture : c.name) << ", " << c.layers << " layers, "
              << c.hidden << " wide, " << c.heads << "/" << c.kv_heads << " heads, "
              << readable_bytes(model->weights().total_bytes()) << " of weights)\n";
    return model;
}

std::unique_ptr<runner::Backend>
EngineOptions::make_backend(std::shared_ptr<const model::LlamaModel> model,
                            int default_cache_tokens, bool announce) const {
    const int tokens = cache_tokens > 0 ? cache_tokens : default_cache_tokens;
    cpu::CpuBackendOptions options;
    options.block_size = block_size;
    options.num_blocks = (tokens + block_size - 1) / block_size;
    options.threads = threads;
    options.cache_format = cache_format;
    auto backend = std::make_unique<cpu::CpuBackend>(std::move(model), options);
    if (!announce) {
        return backend;
    }
    std::cerr << "backend: cpu, " << backend->threads() << " threads, " << cpu::matmul_kernel_name()
              << " kernels; KV cache " << options.num_blocks << " blocks x " << block_size
              << " tokens (" << readable_bytes(backend->kv_cache_bytes()) << ", "
              << cache_format.describe() << ", " << backend->kv_store().bytes_per_token()
              << " B/token)\n";
    return backend;
}

} // namespace kvscope::cli
