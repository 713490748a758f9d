#include "engine/session/backend_factory.h"

#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/matmul.h"
#include "engine/runner/throttled_backend.h"
#include "engine/session/cache_size.h"

#include <sstream>
#include <stdexcept>

namespace kvscope::session {

std::string_view backend_kind_name(BackendKind kind) {
    switch (kind) {
    case BackendKind::automatic:
        return "auto";
    case BackendKind::cpu:
        return "cpu";
    case BackendKind::cuda:
        return "cuda";
    }
    return "auto";
}

std::optional<BackendKind> parse_backend_kind(std::string_view name) {
    for (const BackendKind kind : {BackendKind::automatic, BackendKind::cpu, BackendKind::cuda}) {
        if (name == backend_kind_name(kind)) {
            return kind;
        }
    }
    return std::nullopt;
}

std::string backend_kind_names() {
    return "auto, cpu, cuda";
}

BackendKind resolve_backend_kind(BackendKind kind) {
    switch (kind) {
    case BackendKind::cpu:
        return BackendKind::cpu;
    case BackendKind::cuda:
        // Said plainly rather than falling back: a user who asked for the GPU
        // must not get CPU numbers without knowing.
        throw std::runtime_error("this build has no CUDA backend yet (it is being written); "
                                 "use --backend cpu or auto");
    case BackendKind::automatic:
        return BackendKind::cpu; // the CUDA backend joins here when it lands
    }
    return BackendKind::cpu;
}

std::int64_t backend_memory_bytes(BackendKind resolved) {
    (void)resolved; // only the CPU today; the CUDA backend asks cudaMemGetInfo
    return available_host_memory_bytes();
}

std::unique_ptr<runner::Backend> make_backend(const BackendSpec& spec,
                                              std::shared_ptr<const model::LlamaModel> model,
                                              const KvCacheSpec& cache) {
    std::unique_ptr<runner::Backend> backend;
    switch (resolve_backend_kind(spec.kind)) {
    case BackendKind::automatic:
    case BackendKind::cpu:
    case BackendKind::cuda: {
        cpu::CpuBackendOptions options;
        options.block_size = cache.block_size;
        options.num_blocks = cache.num_blocks;
        options.threads = spec.threads;
        options.cache_format = cache.format;
        backend = std::make_unique<cpu::CpuBackend>(std::move(model), options);
        break;
    }
    }
    if (spec.throttle_ms > 0) {
        backend = std::make_unique<runner::ThrottledBackend>(std::move(backend), spec.throttle_ms);
    }
    return backend;
}

std::string describe_backend(const runner::Backend& backend) {
    const runner::Backend* inner = &backend;
    std::string throttle;
    if (const auto* throttled = dynamic_cast<const runner::ThrottledBackend*>(inner)) {
        inner = &throttled->inner();
        throttle = ", throttled";
    }
    std::string text = inner->name();
    if (const auto* cpu_backend = dynamic_cast<const cpu::CpuBackend*>(inner)) {
        text += ", " + std::to_string(cpu_backend->threads()) + " threads, " +
                cpu::matmul_kernel_name() + " kernels";
    }
    // Per token as the pool holds it (block-level scales included).
    const double per_token = static_cast<double>(backend.kv_cache_bytes()) /
                             static_cast<double>(std::max<std::int64_t>(
                                 1, std::int64_t{backend.num_blocks()} * backend.block_size()));
    std::ostringstream out;
    out << text << throttle << "; KV cache " << backend.num_blocks() << " blocks x "
        << backend.block_size() << " tokens (" << readable_bytes(backend.kv_cache_bytes()) << ", "
        << backend.cache_format().describe() << ", " << per_token << " B/token)";
    return out.str();
}

} // namespace kvscope::session
