#include "engine/session/backend_factory.h"

#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/kernel_set.h"
#include "engine/cuda/cuda_cache_support.h"
#include "engine/gpu_devices.h"
#include "engine/runner/throttled_backend.h"
#include "engine/session/cache_size.h"

#if KVSCOPE_HAVE_CUDA
#include "engine/cuda/cuda_backend.h"
#include "kernels/cuda_check.cuh"

#include <cuda_runtime_api.h>
#endif

#include <cstdlib>
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

#if KVSCOPE_HAVE_CUDA
namespace {

// The device a CUDA backend runs on: the first the process sees
// (CUDA_VISIBLE_DEVICES picks which that is).
constexpr int kCudaDevice = 0;

} // namespace
#endif

std::string cuda_unavailable_reason() {
#if KVSCOPE_HAVE_CUDA
    const GpuInventory gpus = query_gpu_devices();
    if (!gpus.devices.empty()) {
        return {};
    }
    return "no usable CUDA GPU: " + gpus.unavailable_reason;
#else
    return "not compiled with CUDA (this build was configured with KVSCOPE_CUDA=OFF or "
           "without nvcc)";
#endif
}

std::string cuda_cache_problem(const model::LlamaConfig& model, const KvCacheSpec& cache) {
    return cuda::cache_problem(model::kv_group_layout(model, cache.hybrid), cache.format);
}

ResolvedBackend resolve_backend_kind_with_reason(BackendKind kind,
                                                 const std::string& cuda_problem) {
    switch (kind) {
    case BackendKind::cpu:
        return {BackendKind::cpu, {}};
    case BackendKind::cuda:
        // Said plainly rather than falling back: a user who asked for the GPU
        // must not get CPU numbers without knowing.
        if (const std::string reason = cuda_unavailable_reason(); !reason.empty()) {
            throw std::runtime_error("the CUDA backend cannot run: " + reason +
                                     "; use --backend cpu or auto");
        }
        if (!cuda_problem.empty()) {
            throw std::runtime_error(cuda_problem + "; or use --backend cpu or auto");
        }
        return {BackendKind::cuda, {}};
    case BackendKind::automatic:
        if (const std::string reason = cuda_unavailable_reason(); !reason.empty()) {
            return {BackendKind::cpu, "backend auto: running on the CPU, the CUDA backend " +
                                          std::string("cannot run here (") + reason + ")"};
        }
        if (!cuda_problem.empty()) {
            return {BackendKind::cpu, "backend auto: running on the CPU (" + cuda_problem + ")"};
        }
        return {BackendKind::cuda, {}};
    }
    return {BackendKind::cpu, {}};
}

BackendKind resolve_backend_kind(BackendKind kind) {
    return resolve_backend_kind_with_reason(kind).kind;
}

std::int64_t backend_memory_bytes(BackendKind resolved) {
#if KVSCOPE_HAVE_CUDA
    if (resolved == BackendKind::cuda) {
        KVSCOPE_CUDA_CHECK(cudaSetDevice(kCudaDevice));
        std::size_t free_bytes = 0;
        std::size_t total_bytes = 0;
        KVSCOPE_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
        return static_cast<std::int64_t>(free_bytes);
    }
#endif
    (void)resolved;
    return available_host_memory_bytes();
}

std::unique_ptr<runner::Backend> make_backend(const BackendSpec& spec,
                                              std::shared_ptr<const model::LlamaModel> model,
                                              const KvCacheSpec& cache) {
    std::unique_ptr<runner::Backend> backend;
    const std::string cuda_problem = model ? cuda_cache_problem(model->config(), cache) : "";
    switch (resolve_backend_kind_with_reason(spec.kind, cuda_problem).kind) {
    case BackendKind::cuda: {
#if KVSCOPE_HAVE_CUDA
        cuda::CudaBackendOptions options;
        options.block_size = cache.block_size;
        options.num_blocks = cache.num_blocks;
        options.cache_format = cache.format;
        options.device = kCudaDevice;
        options.hybrid_kv = cache.hybrid;
        // KVSCOPE_CUDA_GRAPHS=0 runs every step eagerly (to compare, or to
        // rule graphs out when something looks wrong).
        if (const char* graphs = std::getenv("KVSCOPE_CUDA_GRAPHS")) {
            options.cuda_graphs = std::string_view(graphs) != "0";
        }
        // KVSCOPE_CUDA_OVERLAP=0 launches each kernel only after the one
        // before has ended (the same two uses).
        if (const char* overlap = std::getenv("KVSCOPE_CUDA_OVERLAP")) {
            options.overlap_launches = std::string_view(overlap) != "0";
        }
        // KVSCOPE_CUDA_WIDE_ROWS=ring reads 16-bit K and V rows through the
        // attention's shared-memory ring (wide_row_fetch.h), to compare.
        if (const char* rows = std::getenv("KVSCOPE_CUDA_WIDE_ROWS")) {
            options.wide_row_fetch = std::string_view(rows) == "ring"
                                         ? kernels::WideRowFetch::ring
                                         : kernels::WideRowFetch::registers;
        }
        // KVSCOPE_CUDA_TILE_PREFILL=0 runs prefill attention per token on
        // the vector path instead of over query tiles on tensor cores.
        if (const char* tiles = std::getenv("KVSCOPE_CUDA_TILE_PREFILL")) {
            options.tile_prefill = std::string_view(tiles) != "0";
        }
        // KVSCOPE_CUDA_TILE_GEMM=0 runs the linear layers of 9 to 64 tokens
        // through cuBLAS instead of the tensor-core kernel of our own.
        if (const char* gemm = std::getenv("KVSCOPE_CUDA_TILE_GEMM")) {
            options.tile_gemm = std::string_view(gemm) != "0";
        }
        backend = std::make_unique<cuda::CudaBackend>(std::move(model), options);
        break;
#else
        // resolve_backend_kind() refused it already; kept for the switch.
        throw std::runtime_error("the CUDA backend cannot run: " + cuda_unavailable_reason());
#endif
    }
    case BackendKind::automatic:
    case BackendKind::cpu: {
        cpu::CpuBackendOptions options;
        options.block_size = cache.block_size;
        options.num_blocks = cache.num_blocks;
        options.threads = spec.threads;
        options.cache_format = cache.format;
        options.hybrid_kv = cache.hybrid;
        backend = std::make_unique<cpu::CpuBackend>(std::move(model), options);
        break;
    }
    }
    if (spec.throttle_ms > 0 || spec.slowdown_percent > 0) {
        backend = std::make_unique<runner::ThrottledBackend>(std::move(backend), spec.throttle_ms,
                                                             spec.slowdown_percent);
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
                cpu::kernel_set_name(cpu::kernel_set()) + " kernels";
    }
#if KVSCOPE_HAVE_CUDA
    if (const auto* cuda_backend = dynamic_cast<const cuda::CudaBackend*>(inner)) {
        text += ", " + cuda_backend->device_name();
        if (const std::string changed = cuda_backend->changed_paths(); !changed.empty()) {
            text += " (" + changed + ")";
        }
    }
#endif
    // Per token as the pool holds it (block-level scales included).
    const double per_token = static_cast<double>(backend.kv_cache_bytes()) /
                             static_cast<double>(std::max<std::int64_t>(
                                 1, std::int64_t{backend.num_blocks()} * backend.block_size()));
    std::ostringstream out;
    out << text << throttle << "; KV cache " << backend.num_blocks() << " blocks x "
        << backend.block_size() << " tokens (" << readable_bytes(backend.kv_cache_bytes()) << ", "
        << backend.cache_format().describe() << ", ";
    if (const kv::KvGroupLayout groups = backend.kv_groups(); groups.hybrid()) {
        // A block holds one group's layers: a token takes a slot in each group.
        out << per_token << " B a token in each of " << groups.group_count() << " groups of "
            << groups.layers_per_block << " layers: hybrid, sliding windows let go)";
    } else {
        out << per_token << " B/token)";
    }
    return out.str();
}

} // namespace kvscope::session
