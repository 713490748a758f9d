// `kvscope bench`: prefill and decode throughput of the engine over a grid of
// batch sizes and context lengths, as a table (or JSON for scripts).
#include "app/cli/command.h"
#include "app/cli/engine_options.h"
#include "engine/kv/block_allocator.h"
#include "engine/runner/backend.h"
#include "engine/runner/forward_batch.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>

namespace kvscope::cli {
namespace {

struct BenchOptions {
    EngineOptions engine;
    std::vector<int> batches{1, 8, 32};
    std::vector<int> contexts{128, 1024};
    int decode_steps = 32;
    int prefill_chunk = 512;
    std::uint64_t seed = 1;
    bool json = false;
};

struct BenchRow {
    int batch = 0;
    int context = 0;
    double prefill_tokens_per_second = 0;
    double decode_tokens_per_second = 0;
    double decode_ms_per_step = 0;
};

double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// `batch` sequences of `context` random tokens each are prefilled (one
// sequence at a time, in chunks, after an untimed prompt), then all decode
// `steps` tokens together, one batched step per token, after an untimed
// one. Each step picks greedy tokens through
// forward_sampled, as the serving engine does: where the backend samples on
// the device (CUDA) the logits stay there and only the token ids come back;
// elsewhere the argmax runs on the host over the logits. The picked tokens
// feed the next step, which keeps the work realistic.
BenchRow run_case(const EngineOptions& engine, std::shared_ptr<const model::LlamaModel> model,
                  int batch, int context, const BenchOptions& options) {
    // The prompt, an untimed decode step, then the timed ones.
    const int per_sequence = context + 1 + options.decode_steps;
    // Whole blocks per sequence: each sequence rounds up to its own last block.
    const int block_size_asked = engine.config.block_size;
    const int blocks_per_sequence = (per_sequence + block_size_asked - 1) / block_size_asked;
    auto backend =
        engine.make_backend(model, std::int64_t{batch} * blocks_per_sequence * block_size_asked,
                            /*announce=*/false);
    const int block_size = backend->block_size();
    const int vocab = backend->vocab_size();
    kv::BlockAllocator allocator(backend->num_blocks());
    std::vector<kv::SequenceBlocks> sequences(static_cast<std::size_t>(batch));
    const int groups = backend->kv_groups().group_count();
    std::mt19937_64 rng(options.seed);
    // Ordinary tokens only (SmolLM2 keeps its specials below 17).
    std::uniform_int_distribution<std::int32_t> token(100, vocab - 1);
    std::vector<runner::RowSampling> greedy_rows;
    std::vector<std::int32_t> picked;

    // Runs one batched step: tokens[i] continue sequences[which[i]]; the
    // greedy pick of each logit row lands in `picked`.
    const auto step = [&](const std::vector<std::size_t>& which,
                          const std::vector<std::span<const std::int32_t>>& tokens) {
        std::vector<runner::SequenceStep> steps;
        for (std::size_t i = 0; i < which.size(); ++i) {
            kv::SequenceBlocks& blocks = sequences[which[i]];
            blocks.set_groups(groups);
            if (!kv::reserve(blocks, blocks.length + static_cast<std::int32_t>(tokens[i].size()),
                             block_size, allocator)) {
                throw std::runtime_error("KV cache too small for the benchmark");
            }
            steps.push_back({&blocks, tokens[i], false});
        }
        const runner::ForwardBatch fb = runner::build_forward_batch(steps, block_size);
        greedy_rows.assign(fb.logit_tokens.size(), runner::RowSampling{});
        picked.resize(fb.logit_tokens.size());
        backend->forward_sampled(fb, greedy_rows, picked.data());
        for (std::size_t i = 0; i < which.size(); ++i) {
            sequences[which[i]].length += static_cast<std::int32_t>(tokens[i].size());
        }
    };

    BenchRow row{batch, context};
    std::vector<std::int32_t> prompt(static_cast<std::size_t>(context));
    const auto prefill = [&](std::size_t s) {
        for (std::int32_t& t : prompt) {
            t = token(rng);
        }
        for (int done = 0; done < context; done += options.prefill_chunk) {
            const auto n =
                static_cast<std::size_t>(std::min(options.prefill_chunk, context - done));
            step({s}, {std::span<const std::int32_t>(prompt).subspan(static_cast<std::size_t>(done),
                                                                     n)});
        }
    };
    // One untimed prompt first, in the timed prompts' chunks, then released,
    // as llama-bench's warm-up run: the first forward pass faults the
    // memory-mapped weights in and starts the threads, and on a GPU grows the
    // step's buffers to a chunk and has cuBLAS pick its kernels for the
    // chunks' shapes, which a process that serves pays once, not per
    // request (on 2026-11-27 a lone 1k prompt measured 18k tokens/s on an
    // H100, mostly that, against 142k for 32 of them).
    {
        prefill(0);
        kv::SequenceBlocks& used = sequences[0];
        for (int g = 0; g < used.groups(); ++g) {
            backend->release_blocks(used.table(g));
        }
        kv::release(used, allocator);
    }
    const auto prefill_start = std::chrono::steady_clock::now();
    for (std::size_t s = 0; s < sequences.size(); ++s) {
        prefill(s);
    }
    row.prefill_tokens_per_second =
        static_cast<double>(batch) * context / seconds_since(prefill_start);

    std::vector<std::int32_t> next(static_cast<std::size_t>(batch));
    for (std::int32_t& t : next) {
        t = token(rng);
    }
    std::vector<std::size_t> all(sequences.size());
    std::vector<std::span<const std::int32_t>> one_each(sequences.size());
    for (std::size_t b = 0; b < sequences.size(); ++b) {
        all[b] = b;
        one_each[b] = std::span<const std::int32_t>(next).subspan(b, 1);
    }
    // One untimed decode step of the batch: a serving engine captures its
    // decode graphs at start-up (vLLM does), and the CUDA backend captures a
    // batch size's graph at its first step (a few ms, which in 32 timed
    // steps read as 0.1 ms a step more).
    step(all, one_each);
    std::copy(picked.begin(), picked.end(), next.begin());
    const auto decode_start = std::chrono::steady_clock::now();
    for (int s = 0; s < options.decode_steps; ++s) {
        step(all, one_each);
        std::copy(picked.begin(), picked.end(), next.begin()); // a logit row per sequence
    }
    const double decode_seconds = seconds_since(decode_start);
    row.decode_tokens_per_second =
        static_cast<double>(batch) * options.decode_steps / decode_seconds;
    row.decode_ms_per_step = 1000.0 * decode_seconds / options.decode_steps;
    return row;
}

int run_bench(BenchOptions& options) {
    if (const std::string problem = options.engine.resolve(); !problem.empty()) {
        std::cerr << "kvscope bench: " << problem << "\n";
        return exit_usage;
    }
    const auto model = options.engine.load_model();
    std::vector<BenchRow> rows;
    if (!options.json) {
        std::printf("%6s %8s %16s %16s %16s\n", "batch", "context", "prefill tok/s", "decode tok/s",
                    "decode ms/step");
    }
    for (const int context : options.contexts) {
        for (const int batch : options.batches) {
            const BenchRow row = run_case(options.engine, model, batch, context, options);
            rows.push_back(row);
            if (!options.json) {
                std::printf("%6d %8d %16.1f %16.1f %16.2f\n", row.batch, row.context,
                            row.prefill_tokens_per_second, row.decode_tokens_per_second,
                            row.decode_ms_per_step);
                std::fflush(stdout);
            }
        }
    }
    if (options.json) {
        nlohmann::json out = nlohmann::json::array();
        for (const BenchRow& row : rows) {
            out.push_back({{"batch", row.batch},
                           {"context", row.context},
                           {"prefill_tokens_per_second", row.prefill_tokens_per_second},
                           {"decode_tokens_per_second", row.decode_tokens_per_second},
                           {"decode_ms_per_step", row.decode_ms_per_step}});
        }
        std::cout << out.dump(2) << "\n";
    }
    return exit_ok;
}

} // namespace

Command add_bench_command(CLI::App& app) {
    auto options = std::make_shared<BenchOptions>();
    CLI::App* parser = app.add_subcommand(
        "bench", "Measure prefill and decode throughput over batch sizes and context lengths");
    parser->add_option("-b,--batch", options->batches, "Batch sizes (sequences decoding together)")
        ->delimiter(',')
        ->check(CLI::Range(1, 4096))
        ->capture_default_str();
    parser->add_option("-c,--context", options->contexts, "Context lengths (prompt tokens)")
        ->delimiter(',')
        ->check(CLI::Range(1, 1 << 20))
        ->capture_default_str();
    parser->add_option("--decode-steps", options->decode_steps, "Decode steps measured per case")
        ->check(CLI::Range(1, 1 << 20))
        ->capture_default_str();
    parser->add_option("--prefill-chunk", options->prefill_chunk, "Tokens per prefill step")
        ->check(CLI::Range(1, 1 << 20))
        ->capture_default_str();
    parser->add_option("--seed", options->seed, "Seed for the random prompts")
        ->capture_default_str();
    parser->add_flag("--json", options->json, "Print the results as a JSON array");
    options->engine.add_to(*parser);
    return {parser, [options] {
                return run_bench(*options);
            }};
}

} // namespace kvscope::cli
