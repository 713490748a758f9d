// kvscope-bench-cuda: how close the CUDA backend's decode comes to the memory
// floor. A decode step must read every weight and every cached K/V entry of
// the batch once, so (weight bytes + KV bytes) / copy bandwidth bounds it from
// below; the table prints measured step time against that floor for each
// batch and context, and the decode attention kernel's own bandwidth against
// the measured device-to-device copy bandwidth.
//
// Decode steps run over caches whose contents are never prefilled (the pool
// is zeroed): the bytes read, and so the time, do not depend on the values.
// A step at context C attends over exactly C cache entries (C - 1 cached and
// its own), and goes through forward_sampled with greedy rows: the token ids
// come back, the logits stay on the device, as in a serving engine (and as
// transformers' side of bench/compare_transformers.py keeps them). Step times
// are the median of the timed steps, host clock around the whole call (the
// call ends synchronised), so they include the host's share of a step.
//
// --launch-variants times each case both ways side by side, interleaved in
// one run: kernels launched strictly in turn, and overlapped (each may start
// while the one before ends: CudaBackendOptions::overlap_launches, the
// backend's default; KVSCOPE_CUDA_OVERLAP, which this sets for each).
// KVSCOPE_CUDA_WIDE_ROWS=ring runs the steps with 16-bit rows read through
// the attention's shared-memory ring; the attention table at the end
// always shows both, and q8_0, after a 128 x 4096 step with q8_0 KV beside
// the same step with f16, then the attention at 32 and 128 x 1k and 4k with
// the splits the backend plans (filling the GPU's waves) beside the halved
// splits it planned until 2026-11-28. Then prefill tokens/s with the attention over
// query tiles on tensor cores beside the per-token vector path, and decode
// steps of batch 16 to 64 with the linear layers on tensor cores beside
// cuBLAS.
//
// --profile-attention launches each attention kernel once and nothing else,
// for Nsight Compute to read (scripts/gpu-check.sh's profile step).
//
//   kvscope-bench-cuda [--model FILE] [--batches 1,32,128] [--contexts 1024,4096]
//                      [--format f16] [--steps 20] [--launch-variants]
//                      [--profile-attention]
#include "engine/cuda/decode_padding.h"
#include "engine/gpu_devices.h"
#include "engine/kv/block_allocator.h"
#include "engine/kv/kv_format.h"
#include "engine/runner/forward_batch.h"
#include "engine/session/backend_factory.h"
#include "engine/session/model_loading.h"
#include "kernels/cuda_check.cuh"
#include "kernels/paged_attention.cuh"
#include "kernels/wide_row_fetch.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime_api.h>
#include <iostream>
#include <iterator>
#include <memory>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace {

using namespace kvscope;

// A device allocation freed on scope exit.
struct DeviceBytes {
    explicit DeviceBytes(std::size_t bytes) {
        KVSCOPE_CUDA_CHECK(cudaMalloc(&data, bytes));
        KVSCOPE_CUDA_CHECK(cudaMemset(data, 0, bytes));
    }
    DeviceBytes(const DeviceBytes&) = delete;
    DeviceBytes& operator=(const DeviceBytes&) = delete;
    ~DeviceBytes() { cudaFree(data); }
    void* data = nullptr;
};

// Sets an environment variable (one the backend factory reads) while it
// lives, then puts back what was there.
class ScopedEnv {
public:
    ScopedEnv(const char* name, const char* value)
        : name_(name) {
        if (const char* old = std::getenv(name)) {
            previous_ = old;
        }
        ::setenv(name, value, /*overwrite=*/1);
    }
    ~ScopedEnv() {
        if (previous_) {
            ::setenv(name_, previous_->c_str(), /*overwrite=*/1);
        } else {
            ::unsetenv(name_);
        }
    }
    ScopedEnv(const ScopedEnv&) = delete;
    ScopedEnv& operator=(const ScopedEnv&) = delete;

private:
    const char* name_;
    std::optional<std::string> previous_;
};

// Milliseconds of `work` on the default stream, the best of `repeats`
// (the least disturbed run: what the hardware can do).
template <typename Work>
double best_ms(int repeats, const Work& work) {
    cudaEvent_t begin, end;
    KVSCOPE_CUDA_CHECK(cudaEventCreate(&begin));
    KVSCOPE_CUDA_CHECK(cudaEventCreate(&end));
    work(); // warm-up
    double best = 1e30;
    for (int r = 0; r < repeats; ++r) {
        KVSCOPE_CUDA_CHECK(cudaEventRecord(begin));
        work();
        KVSCOPE_CUDA_CHECK(cudaEventRecord(end));
        KVSCOPE_CUDA_CHECK(cudaEventSynchronize(end));
        float ms = 0;
        KVSCOPE_CUDA_CHECK(cudaEventElapsedTime(&ms, begin, end));
        best = std::min(best, static_cast<double>(ms));
    }
    cudaEventDestroy(begin);
    cudaEventDestroy(end);
    return best;
}

// Device-to-device copy bandwidth in bytes/s, counting the read and the write.
double copy_bandwidth() {
    const std::size_t bytes = std::size_t{1} << 30;
    DeviceBytes a(bytes), b(bytes);
    const double ms = best_ms(5, [&] {
        KVSCOPE_CUDA_CHECK(cudaMemcpyAsync(b.data, a.data, bytes, cudaMemcpyDeviceToDevice));
    });
    return 2.0 * static_cast<double>(bytes) / (ms * 1e-3);
}

// Bytes of weights a decode step reads: every matrix once (fp16 on the
// device), the output head included; norms are negligible.
double weight_bytes(const model::LlamaConfig& c) {
    const double q = double(c.heads) * c.head_dim;
    const double kv = double(c.kv_heads) * c.head_dim;
    const double per_layer = c.hidden * (q + 2 * kv) + q * c.hidden + 3.0 * c.hidden * c.ffn_hidden;
    return 2.0 * (c.layers * per_layer + double(c.vocab) * c.hidden);
}

struct AttentionFigure {
    double ms = 1e30; // none yet: slower than any measured
    double bytes_per_second = 0;
    int split = 0;                        // entries per split it ran
    kernels::AttentionSplitLimits limits; // the cache's, which the plans choose within
};

// The decode attention kernel alone over one layer: batch sequences of
// `context` entries, one query token each.
// `split`: entries per split; 0 plans them as the backend does.
AttentionFigure attention_bandwidth(const model::LlamaConfig& c, kv::KvFormat format, int batch,
                                    int context, int repeats = 20, int split = 0) {
    const int block_size = 16;
    const int blocks_per_sequence = (context + block_size - 1) / block_size;
    const int num_blocks = batch * blocks_per_sequence;
    const std::int64_t key_block = kv::kv_head_block_bytes(format, block_size, c.head_dim, true);
    const std::int64_t value_block = kv::kv_head_block_bytes(format, block_size, c.head_dim, false);
    DeviceBytes keys(static_cast<std::size_t>(num_blocks * c.kv_heads * key_block));
    DeviceBytes values(static_cast<std::size_t>(num_blocks * c.kv_heads * value_block));
    std::vector<std::int32_t> positions(static_cast<std::size_t>(batch), context - 1);
    std::vector<std::int32_t> sequence_of(static_cast<std::size_t>(batch));
    std::iota(sequence_of.begin(), sequence_of.end(), 0);
    std::vector<std::int32_t> offsets(static_cast<std::size_t>(batch) + 1);
    for (int s = 0; s <= batch; ++s) {
        offsets[static_cast<std::size_t>(s)] = s * blocks_per_sequence;
    }
    std::vector<std::int32_t> tables(static_cast<std::size_t>(num_blocks));
    std::iota(tables.begin(), tables.end(), 0);
    const auto upload = [](const std::vector<std::int32_t>& host) {
        auto device = std::make_unique<DeviceBytes>(host.size() * sizeof(std::int32_t));
        KVSCOPE_CUDA_CHECK(cudaMemcpy(device->data, host.data(), host.size() * sizeof(std::int32_t),
                                      cudaMemcpyHostToDevice));
        return device;
    };
    const auto d_positions = upload(positions);
    const auto d_sequence_of = upload(sequence_of);
    const auto d_offsets = upload(offsets);
    const auto d_tables = upload(tables);
    kernels::DeviceBatchView view;
    view.tokens = batch;
    view.sequences = batch;
    view.positions = static_cast<const std::int32_t*>(d_positions->data);
    view.cache_positions = view.positions;
    view.sequence_of = static_cast<const std::int32_t*>(d_sequence_of->data);
    view.block_table_offsets = static_cast<const std::int32_t*>(d_offsets->data);
    view.block_tables = static_cast<const std::int32_t*>(d_tables->data);

    kernels::PagedKvView cache;
    cache.keys = {static_cast<std::uint8_t*>(keys.data), format, key_block,
                  kv::kv_row_bytes(format, c.head_dim, true)};
    cache.values = {static_cast<std::uint8_t*>(values.data), format, value_block,
                    kv::kv_row_bytes(format, c.head_dim, false)};
    // KIVI reads consult the open-block map: none open here.
    const auto no_open =
        upload(std::vector<std::int32_t>(static_cast<std::size_t>(num_blocks), -1));
    cache.open.write_slot = static_cast<const std::int32_t*>(no_open->data);
    cache.open.read_slot = cache.open.write_slot;
    cache.open.layers = 1;
    cache.kv_heads = c.kv_heads;
    cache.head_dim = c.head_dim;
    cache.block_size = block_size;
    cache.num_blocks = num_blocks;

    // Splits as the backend plans them for this step, unless given.
    int multiprocessors = 1;
    KVSCOPE_CUDA_CHECK(cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, 0));
    const kernels::AttentionSplitLimits limits =
        kernels::attention_split_limits(cache, c.heads, /*capture=*/false);
    if (split == 0) {
        split = cuda::attention_split_length(batch, c.kv_heads, context, multiprocessors,
                                             limits.longest, limits.shortest,
                                             limits.blocks_per_multiprocessor);
    }
    const int splits = (context + split - 1) / split;
    DeviceBytes q(static_cast<std::size_t>(batch) * c.heads * c.head_dim * sizeof(float));
    DeviceBytes out(static_cast<std::size_t>(batch) * c.heads * c.head_dim * sizeof(float));
    DeviceBytes scratch(kernels::AttentionWorkspace::floats(batch, c.heads, splits, c.head_dim) *
                        sizeof(float));
    const kernels::AttentionWorkspace workspace = kernels::AttentionWorkspace::carve(
        static_cast<float*>(scratch.data), batch, c.heads, splits, c.head_dim, split);
    AttentionFigure figure;
    figure.split = split;
    figure.limits = limits;
    figure.ms = best_ms(repeats, [&] {
        kernels::launch_paged_attention(cache, view, static_cast<const float*>(q.data), c.heads,
                                        0.125f, context, workspace, static_cast<float*>(out.data),
                                        nullptr);
    });
    const double bytes =
        double(batch) * context * c.kv_heads * double(key_block + value_block) / block_size;
    figure.bytes_per_second = bytes / (figure.ms * 1e-3);
    return figure;
}

// How the backend launches a step's kernels (CudaBackendOptions).
struct LaunchVariant {
    const char* name;
    bool overlap_launches;
};

constexpr LaunchVariant kLaunchVariants[] = {
    {"in turn", false},
    {"overlapped", true},
};

// Milliseconds per decode step of the CUDA backend: `batch` sequences whose
// new token attends over `context` entries, median of `steps`.
double decode_step_ms(std::shared_ptr<const model::LlamaModel> model, kv::KvFormat format,
                      int batch, int context, int steps, const LaunchVariant* launches = nullptr) {
    const int block_size = 16;
    const int blocks_per_sequence = (context + block_size - 1) / block_size;
    // Through the backend factory, as the engine makes it (KVSCOPE_CUDA_GRAPHS
    // and KVSCOPE_CUDA_OVERLAP hold here too); a variant, where one is asked
    // for, through the variable the factory reads.
    std::optional<ScopedEnv> overlap;
    if (launches != nullptr) {
        overlap.emplace("KVSCOPE_CUDA_OVERLAP", launches->overlap_launches ? "1" : "0");
    }
    session::BackendSpec spec;
    spec.kind = session::BackendKind::cuda;
    session::KvCacheSpec cache;
    cache.block_size = block_size;
    cache.num_blocks = batch * blocks_per_sequence;
    cache.format = {format, format};
    auto backend = session::make_backend(spec, std::move(model), cache);
    kv::BlockAllocator allocator(backend->num_blocks());
    std::vector<kv::SequenceBlocks> sequences(static_cast<std::size_t>(batch));
    for (kv::SequenceBlocks& s : sequences) {
        if (!kv::reserve(s, context, block_size, allocator)) {
            throw std::runtime_error("KV pool too small for the benchmark");
        }
        s.length = context - 1; // never prefilled: the bytes read are the same
    }
    const std::vector<std::int32_t> token(1, 100);
    std::vector<runner::SequenceStep> work;
    for (kv::SequenceBlocks& s : sequences) {
        work.push_back({&s, token, false});
    }
    const runner::ForwardBatch fb = runner::build_forward_batch(work, block_size);
    const std::vector<runner::RowSampling> greedy(static_cast<std::size_t>(batch));
    std::vector<std::int32_t> tokens(static_cast<std::size_t>(batch));
    for (int warm = 0; warm < 3; ++warm) { // allocations, cuBLAS heuristics, graph capture
        backend->forward_sampled(fb, greedy, tokens.data());
    }
    std::vector<double> times;
    for (int s = 0; s < steps; ++s) {
        const auto start = std::chrono::steady_clock::now();
        backend->forward_sampled(fb, greedy, tokens.data()); // returns synchronised
        times.push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                .count());
    }
    std::nth_element(times.begin(), times.begin() + static_cast<std::ptrdiff_t>(times.size() / 2),
                     times.end());
    return times[times.size() / 2];
}

// Each case under every launch variant, in turn and twice over (A B A B), the
// better median of each kept: the machine's drift touches both.
void print_launch_variants(const std::shared_ptr<const model::LlamaModel>& model,
                           kv::KvFormat format, const std::vector<int>& batches,
                           const std::vector<int>& contexts, int steps) {
    std::printf("decode ms per step by how the kernels are launched (better of two medians)\n\n");
    std::printf("| batch | context |");
    for (const LaunchVariant& variant : kLaunchVariants) {
        std::printf(" %s |", variant.name);
    }
    std::printf(" overlapped / in turn |\n|---:|---:|");
    for (std::size_t i = 0; i <= std::size(kLaunchVariants); ++i) {
        std::printf("---:|");
    }
    std::printf("\n");
    for (const int context : contexts) {
        for (const int batch : batches) {
            std::vector<double> best(std::size(kLaunchVariants), 1e30);
            for (int round = 0; round < 2; ++round) {
                for (std::size_t v = 0; v < std::size(kLaunchVariants); ++v) {
                    best[v] = std::min(best[v], decode_step_ms(model, format, batch, context, steps,
                                                               &kLaunchVariants[v]));
                }
            }
            std::printf("| %d | %d |", batch, context);
            for (const double ms : best) {
                std::printf(" %.3f |", ms);
            }
            std::printf(" %.2f |\n", best.back() / best.front());
            std::fflush(stdout);
        }
    }
}

// The decode attention kernel alone at batch 32 x 4096, one layer, side by
// side in one run (each variant twice, interleaved, the better kept): f16
// rows read into registers and through the shared-memory ring
// (kernels/wide_row_fetch.h), q8_0 (always the ring), and the run's own
// format where it is another.
void print_attention_variants(const model::LlamaConfig& c, kv::KvFormat format, double bandwidth) {
    struct Variant {
        std::string name;
        kv::KvFormat format;
        kernels::WideRowFetch fetch;
        AttentionFigure best;
    };
    std::vector<Variant> variants{
        {"f16, rows into registers", kv::KvFormat::f16, kernels::WideRowFetch::registers, {}},
        {"f16, rows through the ring", kv::KvFormat::f16, kernels::WideRowFetch::ring, {}},
        {"q8_0 (the ring)", kv::KvFormat::q8_0, kernels::WideRowFetch::ring, {}},
    };
    if (format != kv::KvFormat::f16 && format != kv::KvFormat::q8_0) {
        variants.push_back({std::string(kv::kv_format_name(format)),
                            format,
                            kernels::WideRowFetch::registers,
                            {}});
    }
    for (int round = 0; round < 2; ++round) {
        for (Variant& variant : variants) {
            const kernels::WideRowFetchScope rows(variant.fetch);
            const AttentionFigure figure = attention_bandwidth(c, variant.format, 32, 4096);
            if (figure.ms < variant.best.ms) {
                variant.best = figure;
            }
        }
    }
    std::printf("\ndecode attention, batch 32 x 4096, one layer (better of two runs)\n\n");
    std::printf("| KV | ms | GB/s | of copy bandwidth | time / f16 into registers |\n");
    std::printf("|---|---:|---:|---:|---:|\n");
    for (const Variant& variant : variants) {
        std::printf("| %s | %.3f | %.0f | %.0f%% | %.2f |\n", variant.name.c_str(), variant.best.ms,
                    variant.best.bytes_per_second / 1e9,
                    100.0 * variant.best.bytes_per_second / bandwidth,
                    variant.best.ms / variants.front().best.ms);
    }
}

// The plan before 2026-11-28, for comparison: the longest split while the
// grid has a wave of blocks, else halved until it has (every decode target's
// grid came out at 1.45 waves).
int halving_split_length(int tokens, int kv_heads, int context, int multiprocessors,
                         const kernels::AttentionSplitLimits& limits) {
    const std::int64_t wanted =
        std::int64_t{std::max(limits.blocks_per_multiprocessor, 1)} * multiprocessors;
    int length = limits.longest;
    while (length > limits.shortest) {
        const std::int64_t splits = (context + length - 1) / length;
        if (std::int64_t{tokens} * kv_heads * splits >= wanted) {
            break;
        }
        length /= 2;
    }
    return length;
}

// The decode attention kernel alone, one layer, f16 into registers, with
// the splits cuda::attention_split_length plans (filling the GPU's waves)
// beside the halving plan it replaced, interleaved, the better of two kept.
void print_split_plans(const model::LlamaConfig& c, double bandwidth) {
    int multiprocessors = 1;
    KVSCOPE_CUDA_CHECK(cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, 0));
    const kernels::WideRowFetchScope rows(kernels::WideRowFetch::registers);
    std::printf("\ndecode attention, f16, one layer: splits filling the waves against halved "
                "splits (better of two runs)\n\n");
    std::printf("| batch | context | split | ms | of copy bandwidth | halved split | ms | of copy "
                "bandwidth | planned / halved |\n");
    std::printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    const int cases[][2] = {{32, 1024}, {128, 1024}, {32, 4096}, {128, 4096}};
    for (const auto& [batch, context] : cases) {
        const AttentionFigure first = attention_bandwidth(c, kv::KvFormat::f16, batch, context, 1);
        const int planned = first.split;
        const int halved =
            halving_split_length(batch, c.kv_heads, context, multiprocessors, first.limits);
        AttentionFigure best_planned;
        AttentionFigure best_halved;
        for (int round = 0; round < 2; ++round) {
            const AttentionFigure p =
                attention_bandwidth(c, kv::KvFormat::f16, batch, context, 20, planned);
            const AttentionFigure h =
                attention_bandwidth(c, kv::KvFormat::f16, batch, context, 20, halved);
            best_planned = p.ms < best_planned.ms ? p : best_planned;
            best_halved = h.ms < best_halved.ms ? h : best_halved;
        }
        std::printf("| %d | %d | %d | %.4f | %.0f%% | %d | %.4f | %.0f%% | %.2f |\n", batch,
                    context, planned, best_planned.ms,
                    100.0 * best_planned.bytes_per_second / bandwidth, halved, best_halved.ms,
                    100.0 * best_halved.bytes_per_second / bandwidth,
                    best_planned.ms / best_halved.ms);
        std::fflush(stdout);
    }
}

// Issue 40's quantised-KV target: a whole decode step at 128 x 4096 with a
// q8_0 cache against the same step with f16, side by side (each twice,
// interleaved, the better median kept).
void print_quantised_step(const std::shared_ptr<const model::LlamaModel>& model, int steps) {
    double f16 = 1e30;
    double q8_0 = 1e30;
    for (int round = 0; round < 2; ++round) {
        f16 = std::min(f16, decode_step_ms(model, kv::KvFormat::f16, 128, 4096, steps));
        q8_0 = std::min(q8_0, decode_step_ms(model, kv::KvFormat::q8_0, 128, 4096, steps));
    }
    std::printf("\ndecode step at 128 x 4096: q8_0 KV %.3f ms, f16 %.3f ms (q8_0 / f16 %.2f)\n",
                q8_0, f16, q8_0 / f16);
}

// Prefill tokens per second: `batch` sequences of `context` tokens, each
// prefilled alone in chunks of `chunk` (as `kvscope bench` does), with the
// attention over query tiles on tensor cores or per token on the vector path
// (KVSCOPE_CUDA_TILE_PREFILL, which the backend factory reads). The best of
// three passes over every sequence.
double prefill_tokens_per_second(const std::shared_ptr<const model::LlamaModel>& model, int batch,
                                 int context, int chunk, bool tiles) {
    const int block_size = 16;
    std::optional<ScopedEnv> tile_prefill;
    tile_prefill.emplace("KVSCOPE_CUDA_TILE_PREFILL", tiles ? "1" : "0");
    session::BackendSpec spec;
    spec.kind = session::BackendKind::cuda;
    session::KvCacheSpec cache;
    cache.block_size = block_size;
    cache.num_blocks = batch * ((context + block_size - 1) / block_size);
    cache.format = {kv::KvFormat::f16, kv::KvFormat::f16};
    auto backend = session::make_backend(spec, model, cache);
    tile_prefill.reset(); // read when the backend was made
    kv::BlockAllocator allocator(backend->num_blocks());
    std::vector<kv::SequenceBlocks> sequences(static_cast<std::size_t>(batch));
    for (kv::SequenceBlocks& s : sequences) {
        if (!kv::reserve(s, context, block_size, allocator)) {
            throw std::runtime_error("KV pool too small for the benchmark");
        }
    }
    const std::vector<std::int32_t> prompt(static_cast<std::size_t>(context), 100);
    const std::vector<runner::RowSampling> greedy(1);
    std::int32_t next = 0;
    const auto prefill_all = [&] {
        for (kv::SequenceBlocks& s : sequences) {
            for (int done = 0; done < context; done += chunk) {
                s.length = done;
                const runner::SequenceStep step{
                    &s, std::span<const std::int32_t>(prompt).subspan(
                            static_cast<std::size_t>(done),
                            static_cast<std::size_t>(std::min(chunk, context - done)))};
                const runner::ForwardBatch fb = runner::build_forward_batch({&step, 1}, block_size);
                backend->forward_sampled(fb, greedy, &next); // returns synchronised
            }
        }
    };
    prefill_all(); // allocations, cuBLAS heuristics
    double best = 1e30;
    for (int pass = 0; pass < 3; ++pass) {
        const auto start = std::chrono::steady_clock::now();
        prefill_all();
        best = std::min(
            best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    return static_cast<double>(batch) * context / best;
}

// Each attention kernel launched once, for a profiler to read
// (scripts/gpu-check.sh runs this under Nsight Compute): the decode split
// kernel at 32 x 4096 with f16 rows into registers, f16 rows through the
// ring and q8_0, then one prefill chunk of 512 tokens over 512 cached
// entries (the shape of `kvscope bench`'s second chunk) through the
// backend, whose first layer's tile kernel comes first.
void profile_attention(const std::shared_ptr<const model::LlamaModel>& model) {
    const model::LlamaConfig& c = model->config();
    for (const auto& [format, fetch] :
         {std::pair{kv::KvFormat::f16, kernels::WideRowFetch::registers},
          std::pair{kv::KvFormat::f16, kernels::WideRowFetch::ring},
          std::pair{kv::KvFormat::q8_0, kernels::WideRowFetch::ring}}) {
        const kernels::WideRowFetchScope rows(fetch);
        attention_bandwidth(c, format, 32, 4096, /*repeats=*/0); // its warm-up launch only
    }
    const int block_size = 16;
    session::BackendSpec spec;
    spec.kind = session::BackendKind::cuda;
    session::KvCacheSpec cache;
    cache.block_size = block_size;
    cache.num_blocks = 1024 / block_size;
    cache.format = {kv::KvFormat::f16, kv::KvFormat::f16};
    auto backend = session::make_backend(spec, model, cache);
    kv::BlockAllocator allocator(backend->num_blocks());
    kv::SequenceBlocks sequence;
    if (!kv::reserve(sequence, 1024, block_size, allocator)) {
        throw std::runtime_error("KV pool too small for the profile");
    }
    sequence.length = 512; // never prefilled: the kernels read the same bytes
    const std::vector<std::int32_t> chunk(512, 100);
    const runner::SequenceStep step{&sequence, chunk};
    const std::vector<runner::RowSampling> greedy(1);
    std::int32_t next = 0;
    backend->forward_sampled(runner::build_forward_batch({&step, 1}, block_size), greedy, &next);
    std::printf("profiled: decode attention at 32 x 4096 (f16 into registers, f16 through the "
                "ring, q8_0), then a prefill chunk of 512 tokens over 512 cached entries\n");
}

// Issue 40's prefill target (32 x 1024 in chunks of 512, as `kvscope bench`
// measures it) and a longer context, the tile path beside the per-token one
// in one run.
void print_prefill_variants(const std::shared_ptr<const model::LlamaModel>& model) {
    std::printf("\nprefill tokens/s, f16 KV, each sequence alone in chunks of 512 (best of 3)\n\n");
    std::printf(
        "| batch | context | per token (vector path) | query tiles (tensor cores) | tiles / "
        "per token |\n");
    std::printf("|---:|---:|---:|---:|---:|\n");
    const int cases[][2] = {{32, 1024}, {8, 4096}};
    for (const auto& [batch, context] : cases) {
        const double per_token = prefill_tokens_per_second(model, batch, context, 512, false);
        const double tiled = prefill_tokens_per_second(model, batch, context, 512, true);
        std::printf("| %d | %d | %.0f | %.0f | %.2f |\n", batch, context, per_token, tiled,
                    tiled / per_token);
        std::fflush(stdout);
    }
}

// Decode steps whose linear layers take 9 to 64 tokens: on tensor cores with
// the kernel of our own (kernels/tile_gemm.cuh) beside cuBLAS
// (KVSCOPE_CUDA_TILE_GEMM, which the backend factory reads), each twice,
// interleaved, the better median kept.
void print_gemm_variants(const std::shared_ptr<const model::LlamaModel>& model, int steps) {
    std::printf("\ndecode ms per step, f16 KV, context 1024: linear layers on tensor cores "
                "(tile_gemm) and through cuBLAS\n\n");
    std::printf("| batch | tile_gemm | cuBLAS | tile_gemm / cuBLAS |\n|---:|---:|---:|---:|\n");
    for (const int batch : {16, 32, 64}) {
        double tiles = 1e30;
        double cublas = 1e30;
        for (int round = 0; round < 2; ++round) {
            {
                const ScopedEnv on("KVSCOPE_CUDA_TILE_GEMM", "1");
                tiles =
                    std::min(tiles, decode_step_ms(model, kv::KvFormat::f16, batch, 1024, steps));
            }
            const ScopedEnv off("KVSCOPE_CUDA_TILE_GEMM", "0");
            cublas = std::min(cublas, decode_step_ms(model, kv::KvFormat::f16, batch, 1024, steps));
        }
        std::printf("| %d | %.3f | %.3f | %.2f |\n", batch, tiles, cublas, tiles / cublas);
        std::fflush(stdout);
    }
}

} // namespace

int main(int argc, char** argv) {
    CLI::App app("How close the CUDA backend's decode comes to the memory floor");
    std::string model_option;
    std::vector<int> batches{1, 32, 128};
    std::vector<int> contexts{1024, 4096};
    std::string format_name = "f16";
    int steps = 20;
    bool launch_variants = false;
    bool profile = false;
    app.add_option("--model", model_option,
                   "GGUF model (default: $KVSCOPE_MODEL or the fetched one)");
    app.add_option("--batches", batches, "batch sizes")->delimiter(',');
    app.add_option("--contexts", contexts, "cached entries per sequence")->delimiter(',');
    app.add_option("--format", format_name, "KV format of the pool");
    app.add_option("--steps", steps, "decode steps timed per case (the median is kept)");
    app.add_flag("--launch-variants", launch_variants,
                 "time each case with kernels launched in turn and overlapped, side by side");
    app.add_flag("--profile-attention", profile,
                 "launch each attention kernel once, for a profiler (ncu) to read, and nothing "
                 "else");
    CLI11_PARSE(app, argc, argv);

    const GpuInventory gpus = query_gpu_devices();
    if (gpus.devices.empty()) {
        std::cout << "no GPU: nothing to measure (" << gpus.unavailable_reason << ")\n";
        return 0;
    }
    const std::optional<kv::KvFormat> format = kv::parse_kv_format(format_name);
    if (!format) {
        std::cerr << "kvscope-bench-cuda: unknown KV format '" << format_name << "'; one of "
                  << kv::kv_format_names() << "\n";
        return 2;
    }
    try {
        const auto model = session::load_model(session::model_file(model_option));
        const model::LlamaConfig& c = model->config();
        const double bandwidth = copy_bandwidth();
        std::printf("device: %s; model: %s; KV format %s\n", gpus.devices[0].name.c_str(),
                    session::describe_model(*model).c_str(), format_name.c_str());
        std::printf("device-to-device copy bandwidth: %.0f GB/s\n\n", bandwidth / 1e9);

        if (profile) {
            profile_attention(model);
            return 0;
        }
        if (launch_variants) {
            print_launch_variants(model, *format, batches, contexts, steps);
            return 0;
        }
        std::printf("| batch | context | step ms | floor ms | step / floor | tok/s |\n");
        std::printf("|---:|---:|---:|---:|---:|---:|\n");
        const double kv_per_token =
            kv::kv_bytes_per_token({*format, *format}, c.layers, c.kv_heads, c.head_dim, 16);
        for (const int context : contexts) {
            for (const int batch : batches) {
                const double ms = decode_step_ms(model, *format, batch, context, steps);
                const double floor_bytes = weight_bytes(c) + double(batch) * context * kv_per_token;
                const double floor_ms = floor_bytes / bandwidth * 1e3;
                std::printf("| %d | %d | %.3f | %.3f | %.2f | %.0f |\n", batch, context, ms,
                            floor_ms, ms / floor_ms, batch / (ms * 1e-3));
                std::fflush(stdout);
            }
        }
        print_quantised_step(model, steps);
        print_attention_variants(c, *format, bandwidth);
        print_split_plans(c, bandwidth);
        print_prefill_variants(model);
        print_gemm_variants(model, steps);
    } catch (const std::exception& error) {
        std::cerr << "kvscope-bench-cuda: " << error.what() << "\n";
        return 1;
    }
    return 0;
}
