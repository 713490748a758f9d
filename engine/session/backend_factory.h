// The one place backends are made: `cpu`, `cuda` (in builds with CUDA, on a
// machine with a GPU) and `auto` (the GPU when there is one this build can
// use, else the CPU). The CLI, the app, the quality measurement and the
// benchmarks all ask here, so a new backend plugs in once.
#pragma once

#include "engine/kv/kv_format.h"
#include "engine/model/llama_model.h"
#include "engine/runner/backend.h"

#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace kvscope::session {

enum class BackendKind {
    automatic, // the best backend this build and machine have
    cpu,
    cuda,
};

std::string_view backend_kind_name(BackendKind kind); // "auto", "cpu", "cuda"
std::optional<BackendKind> parse_backend_kind(std::string_view name);
std::string backend_kind_names(); // "auto, cpu, cuda", for help texts

struct BackendSpec {
    BackendKind kind = BackendKind::automatic;
    int threads = 0;     // CPU threads; 0: all hardware threads
    int throttle_ms = 0; // sleep in every forward pass: a stand-in for a slower build
    // Run this many percent longer on the CPU in every forward pass: a
    // slower build as CPU-time gates see one (a sleep costs no CPU time).
    double slowdown_percent = 0;
};

// The paged KV pool a backend allocates.
struct KvCacheSpec {
    int block_size = 16;
    int num_blocks = 0;
    kv::KvCacheFormat format;
    // Sliding-window layers in their own block tables (kv::KvGroupLayout);
    // vLLM's --disable-hybrid-kv-cache-manager turns it off.
    bool hybrid = true;
};

// What `kind` runs on here: `auto` resolved. Throws std::runtime_error saying
// why when the kind cannot run in this build or on this machine.
BackendKind resolve_backend_kind(BackendKind kind);

struct ResolvedBackend {
    BackendKind kind = BackendKind::cpu;
    // Set when `auto` could not have the GPU: one line saying so and why,
    // for a run to print, so CPU numbers are never taken for GPU ones.
    std::string fallback_note;
};

// resolve_backend_kind() with the reason `auto` fell back to the CPU. Given
// why the CUDA backend cannot hold the run's cache (cuda_cache_problem),
// `auto` takes the CPU for it, saying so, and `cuda` throws.
ResolvedBackend resolve_backend_kind_with_reason(BackendKind kind,
                                                 const std::string& cuda_problem = {});

// Why the CUDA backend cannot hold `cache` for `model` (the CPU can); empty
// when it can.
std::string cuda_cache_problem(const model::LlamaConfig& model, const KvCacheSpec& cache);

// Why the CUDA backend cannot run here (not compiled in, no driver, no
// device); empty when it can.
std::string cuda_unavailable_reason();

// The memory a --gpu-memory-utilization share is taken of on `resolved`:
// free device memory on a GPU, available host memory on the CPU.
std::int64_t backend_memory_bytes(BackendKind resolved);

// Allocates the KV pool; throws std::runtime_error (kind unavailable, or the
// pool does not fit on the GPU) or std::bad_alloc / std::invalid_argument
// (the pool does not fit in host memory, a format the model cannot use).
std::unique_ptr<runner::Backend> make_backend(const BackendSpec& spec,
                                              std::shared_ptr<const model::LlamaModel> model,
                                              const KvCacheSpec& cache);

// "cpu, 2 threads, avx2 kernels; KV cache 512 blocks x 16 tokens (180.0 MiB,
// f16, 23040 B/token)" or "cuda, NVIDIA H100 80GB HBM3; KV cache ...", for
// the line a run prints when it starts.
std::string describe_backend(const runner::Backend& backend);

} // namespace kvscope::session
