#include "engine/runner/generate.h"

#include "engine/kv/block_allocator.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <vector>

namespace kvscope::runner {
namespace {
double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}
} // namespace

GenerationStats generate(Backend& backend, const tokenizer::Tokenizer& tokenizer,
                         std::span<const std::int32_t> prompt, const GenerateOptions& options,
                         sampling::Sampler& sampler,
                         const std::function<bool(std::int32_t)>& on_token) {
    if (prompt.empty()) {
        throw std::invalid_argument("the prompt is empty");
    }
    const int block_size = backend.block_size();
    // One sequence keeps every group's whole context here (nothing lets
    // blocks go), so each group has its share of the pool.
    const int groups = backend.kv_groups().group_count();
    const std::int64_t capacity =
        static_cast<std::int64_t>(backend.num_blocks() / groups) * block_size;
    if (static_cast<std::int64_t>(prompt.size()) >= capacity) {
        throw std::invalid_argument("the prompt has " + std::to_string(prompt.size()) +
                                    " tokens but the KV cache holds " + std::to_string(capacity));
    }
    kv::BlockAllocator allocator(backend.num_blocks());
    kv::SequenceBlocks sequence;
    sequence.set_groups(groups);
    std::vector<std::int32_t> history(prompt.begin(), prompt.end());
    std::vector<float> logits(static_cast<std::size_t>(backend.vocab_size()));
    GenerationStats stats;
    stats.prompt_tokens = static_cast<int>(prompt.size());

    const auto run = [&](std::span<const std::int32_t> tokens) {
        if (!kv::reserve(sequence, sequence.length + static_cast<std::int32_t>(tokens.size()),
                         block_size, allocator)) {
            return false;
        }
        const SequenceStep step{&sequence, tokens, false};
        backend.forward(build_forward_batch(std::span(&step, 1), block_size), logits.data());
        sequence.length += static_cast<std::int32_t>(tokens.size());
        return true;
    };

    const auto prefill_start = std::chrono::steady_clock::now();
    for (std::size_t done = 0; done < prompt.size();) {
        const std::size_t n = std::min(
            prompt.size() - done, static_cast<std::size_t>(std::max(1, options.prefill_chunk)));
        run(prompt.subspan(done, n)); // fits: checked against capacity above
        done += n;
    }
    stats.prefill_seconds = seconds_since(prefill_start);

    const auto decode_start = std::chrono::steady_clock::now();
    stats.stop_reason = "token limit";
    while (stats.generated_tokens < options.max_tokens) {
        const std::int32_t next = sampler.sample(logits, history);
        history.push_back(next);
        ++stats.generated_tokens;
        if (!on_token(next)) {
            stats.stop_reason = "stopped";
            break;
        }
        if (tokenizer.ends_generation(next)) {
            stats.stop_reason = "end token";
            break;
        }
        if (stats.generated_tokens == options.max_tokens) {
            break;
        }
        const std::int32_t single[1] = {next};
        if (!run(single)) {
            stats.stop_reason = "cache full";
            break;
        }
    }
    stats.decode_seconds = seconds_since(decode_start);
    for (int g = 0; g < groups; ++g) {
        backend.release_blocks(sequence.table(g));
    }
    kv::release(sequence, allocator);
    return stats;
}

} // namespace kvscope::runner
