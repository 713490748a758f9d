// What the offload tier saves, measured side by side in one run.
//
// 1. Per prefix length: computing the prefix's K/V (a prefill of that many
//    tokens, in steps of --chunk tokens) against loading its blocks back
//    from a tier in host memory and from a file on disk (the tier's read
//    plus the copy into the pool), and what saving them there cost (the copy
//    out of the pool plus the tier's write). Each round times every way in
//    a rotated order; the table gives medians, and the speed-up of loading
//    over computing is each round's ratio, then the median.
// 2. End to end: the rotating-docs workload (six documents asked about in
//    turn, more than the pool keeps) served one request at a time with no
//    tier, a memory tier and a file tier: wall time, prompt tokens computed,
//    prefix hits and what the tier moved.
//
// The file tier lives in --dir (default: the temporary directory), so the
// disk it measures is the one named; the page cache usually serves its
// reads back, as it would a real run's.
//
//   kvscope-bench-offload [--rounds N] [--lengths 128,512,2048] [--chunk 512]
//                         [--requests 12] [--dir DIR] [--backend auto|cpu|cuda]
//                         [--threads T] [--model FILE]
#include "engine/kv/offload_tier.h"

#include "engine/model/llama_model.h"
#include "engine/model_path.h"
#include "engine/runner/forward_batch.h"
#include "engine/session/backend_factory.h"
#include "engine/session/run_summary.h"
#include "engine/session/serving_session.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>

using namespace kvscope;

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// A file no earlier run left behind (the tier refuses one that exists).
std::filesystem::path unique_file(const std::filesystem::path& dir) {
    return dir /
           ("kvscope-bench-offload-" + std::to_string(::getpid()) + "-" +
            std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()) + ".bin");
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n == 0 ? 0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Computes `tokens` into blocks [0, blocks) of the pool, as a prefill in
// chunks: what a prefix miss costs.
double time_prefill(runner::Backend& backend, const std::vector<std::int32_t>& tokens, int chunk) {
    kv::SequenceBlocks seq;
    const int blocks =
        static_cast<int>((tokens.size() + static_cast<std::size_t>(backend.block_size()) - 1) /
                         static_cast<std::size_t>(backend.block_size()));
    for (int b = 0; b < blocks; ++b) {
        seq.block_table.push_back(b);
    }
    std::vector<float> logits(static_cast<std::size_t>(backend.vocab_size()));
    const auto start = std::chrono::steady_clock::now();
    for (std::size_t at = 0; at < tokens.size(); at += static_cast<std::size_t>(chunk)) {
        const std::size_t n = std::min(tokens.size() - at, static_cast<std::size_t>(chunk));
        const runner::SequenceStep step{&seq, std::span(tokens).subspan(at, n)};
        backend.forward(runner::build_forward_batch({&step, 1}, backend.block_size()),
                        logits.data());
        seq.length += static_cast<std::int32_t>(n);
    }
    return seconds_since(start);
}

struct TierTimes {
    double save = 0; // pool -> tier, every block
    double load = 0; // tier -> pool, every block
};

// Saves blocks [0, blocks) to `tier` and loads them back into blocks
// [blocks, 2 * blocks): the offload tier's two copies.
TierTimes time_tier(runner::Backend& backend, kv::OffloadTier& tier, int blocks) {
    std::vector<std::byte> bytes(static_cast<std::size_t>(backend.block_bytes()));
    TierTimes t;
    auto start = std::chrono::steady_clock::now();
    for (int b = 0; b < blocks; ++b) {
        backend.read_block(b, bytes);
        tier.put(static_cast<kv::BlockHash>(b + 1), bytes);
    }
    t.save = seconds_since(start);
    start = std::chrono::steady_clock::now();
    for (int b = 0; b < blocks; ++b) {
        tier.get(static_cast<kv::BlockHash>(b + 1), bytes);
        backend.write_block(blocks + b, bytes);
    }
    t.load = seconds_since(start);
    return t;
}

struct EndToEnd {
    double seconds = 0;
    session::RunSummary summary;
};

EndToEnd serve_rotating_docs(const session::RunConfig& base,
                             const std::shared_ptr<const model::LlamaModel>& model, int tier,
                             const std::filesystem::path& dir) {
    session::RunConfig config = base;
    if (tier > 0) {
        config.offload.medium = tier == 1 ? kv::TierMedium::memory : kv::TierMedium::file;
        config.offload.capacity_blocks = 1024;
        if (tier == 2) {
            config.offload.file = unique_file(dir);
        }
    }
    session::ServingSession run(config, nullptr, model);
    const auto start = std::chrono::steady_clock::now();
    const std::vector<std::int64_t> ids = run.serve({});
    EndToEnd result;
    result.seconds = seconds_since(start);
    result.summary =
        session::summarize_run(run.engine(), ids, config.workload, result.seconds, 0, 0);
    return result;
}

} // namespace

int main(int argc, char** argv) {
    CLI::App app{"The offload tier's copies against computing the prefix, side by side"};
    int rounds = 5;
    std::vector<int> lengths{128, 512, 2048};
    int chunk = 512;
    int requests = 12;
    int threads = 0;
    std::string dir = std::filesystem::temp_directory_path().string();
    std::string backend_name = "cpu";
    std::string model_file;
    app.add_option("--rounds", rounds, "Rounds of the per-length comparison")
        ->capture_default_str();
    app.add_option("--lengths", lengths, "Prefix lengths in tokens")
        ->delimiter(',')
        ->capture_default_str();
    app.add_option("--chunk", chunk, "Tokens per prefill step")->capture_default_str();
    app.add_option("--requests", requests, "Requests of the end-to-end workload")
        ->capture_default_str();
    app.add_option("--dir", dir, "Where the file tier writes")
        ->check(CLI::ExistingDirectory)
        ->capture_default_str();
    app.add_option("--backend", backend_name, "auto, cpu or cuda")->capture_default_str();
    app.add_option("--threads", threads, "CPU threads (0: all)");
    app.add_option("--model", model_file, "GGUF model (default: the one setup.sh fetched)");
    CLI11_PARSE(app, argc, argv);

    const ModelPath path = model_file.empty() ? resolve_model_path() : ModelPath{model_file, false};
    if (const std::string problem = model_path_problem(path); !problem.empty()) {
        std::fprintf(stderr, "%s\n", problem.c_str());
        return 1;
    }
    const std::shared_ptr<const model::LlamaModel> model = model::LlamaModel::load(path.path);
    session::BackendSpec spec;
    spec.kind = session::parse_backend_kind(backend_name).value_or(session::BackendKind::cpu);
    spec.threads = threads;
    const int longest = *std::max_element(lengths.begin(), lengths.end());
    session::KvCacheSpec cache;
    cache.num_blocks = 2 * ((longest + 15) / 16) + 2;
    const std::unique_ptr<runner::Backend> backend = session::make_backend(spec, model, cache);
    if (backend->block_bytes() <= 0) {
        std::fprintf(stderr, "the %s backend cannot copy blocks out\n", backend->name().c_str());
        return 1;
    }
    const std::string machine = session::describe_backend(*backend);
    std::fprintf(stderr, "%s\n", machine.c_str());

    std::mt19937 rng(7);
    std::uniform_int_distribution<std::int32_t> token(100, backend->vocab_size() - 1);
    std::printf("| prefix tokens | blocks | MiB | compute (ms) | load, memory (ms) | load, file "
                "(ms) | save, memory (ms) | save, file (ms) | load vs compute, memory | load vs "
                "compute, file |\n");
    std::printf("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for (const int length : lengths) {
        std::vector<std::int32_t> tokens(static_cast<std::size_t>(length));
        for (std::int32_t& t : tokens) {
            t = token(rng);
        }
        const int blocks = length / backend->block_size(); // whole blocks, as the tier keeps
        if (blocks < 1) {
            std::fprintf(stderr, "--lengths %d: shorter than a block (%d tokens), skipped\n",
                         length, backend->block_size());
            continue;
        }
        std::vector<double> compute;
        std::vector<double> load[2];
        std::vector<double> save[2];
        std::vector<double> ratio[2];
        time_prefill(*backend, tokens, chunk); // warm up
        for (int r = 0; r < rounds; ++r) {
            double this_compute = 0;
            TierTimes times[2];
            for (int k = 0; k < 3; ++k) {
                const int way = (k + r) % 3; // rotate the order
                if (way == 0) {
                    this_compute = time_prefill(*backend, tokens, chunk);
                    continue;
                }
                kv::OffloadTierConfig config;
                config.medium = way == 1 ? kv::TierMedium::memory : kv::TierMedium::file;
                config.capacity_blocks = blocks;
                config.block_bytes = backend->block_bytes();
                if (way == 2) {
                    config.file = unique_file(dir);
                }
                kv::OffloadTier tier(config);
                times[way - 1] = time_tier(*backend, tier, blocks);
            }
            compute.push_back(this_compute);
            for (int m = 0; m < 2; ++m) {
                load[m].push_back(times[m].load);
                save[m].push_back(times[m].save);
                ratio[m].push_back(times[m].load > 0 ? this_compute / times[m].load : 0);
            }
        }
        const double mib = static_cast<double>(blocks) *
                           static_cast<double>(backend->block_bytes()) / (1024.0 * 1024.0);
        std::printf("| %d | %d | %.1f | %.1f | %.2f | %.2f | %.2f | %.2f | %.0fx | %.0fx |\n",
                    length, blocks, mib, 1e3 * median(compute), 1e3 * median(load[0]),
                    1e3 * median(load[1]), 1e3 * median(save[0]), 1e3 * median(save[1]),
                    median(ratio[0]), median(ratio[1]));
        std::fflush(stdout);
    }
    std::printf("\n%d rounds; compute: a prefill in steps of %d tokens; load: the tier's read and "
                "the copy into the pool; save: the copy out and the tier's write; %s\n\n",
                rounds, chunk, machine.c_str());

    // End to end: one request at a time, so the times are service, not queueing.
    session::RunConfig base;
    base.model_path = path.path;
    base.backend = spec;
    base.cache.num_blocks = 64;
    base.workload = "rotating-docs";
    base.preset.requests = requests;
    base.preset.max_tokens = 16;
    base.real_time = false;
    base.scheduler.max_num_seqs = 1;
    const char* names[] = {"none", "memory", "file"};
    std::printf("| tier | wall (s) | prompt tokens computed | prefix hit rate | from the tier "
                "(tokens) | blocks written | blocks read | write (ms) | read (ms) |\n");
    std::printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for (int tier = 0; tier < 3; ++tier) {
        const EndToEnd e = serve_rotating_docs(base, model, tier, dir);
        const session::RunSummary& s = e.summary;
        std::printf("| %s | %.2f | %lld | %.1f%% | %lld | %lld | %lld | %.1f | %.1f |\n",
                    names[tier], e.seconds, static_cast<long long>(s.prompt_computed_tokens),
                    100 * s.prefix_hit_rate(), static_cast<long long>(s.tier_hit_tokens),
                    static_cast<long long>(s.tier.writes), static_cast<long long>(s.tier.reads),
                    1e3 * s.tier.write_seconds, 1e3 * s.tier.read_seconds);
        std::fflush(stdout);
    }
    std::printf("\nrotating-docs, %d requests served one at a time (all at once, one sequence a "
                "step), 16 tokens each, a 64-block pool, a 1024-block tier, the same backend\n",
                requests);
    return 0;
}
