// Running one sequence through a backend in prefill chunks, the way the
// backend tests compare backends and chunkings position by position.
#pragma once

#include "engine/kv/kv_manager.h"
#include "engine/runner/backend.h"
#include "engine/runner/forward_batch.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include <QtGlobal>

namespace kvscope::test {

// Runs `tokens` through one sequence on every backend of `backends` at once,
// in chunks of the given sizes (cycled), every backend getting the same
// ForwardBatch each step. Its tables come from one KV manager with the first
// backend's KV groups, as logits_in_chunks does: a hybrid cache's sliding
// groups let go of what their windows left after each chunk (kNoBlock in
// their tables), and every backend is told. `on_chunk` gets the chunk's
// first position and each backend's logits for its positions, (n, vocab).
// Returns the blocks the windows let go.
inline int lockstep_in_chunks(
    std::span<runner::Backend* const> backends, const std::vector<std::int32_t>& tokens,
    const std::vector<int>& chunk_sizes,
    const std::function<void(std::size_t, const std::vector<std::vector<float>>&)>& on_chunk) {
    runner::Backend& first = *backends.front();
    const int vocab = first.vocab_size();
    int num_blocks = first.num_blocks();
    for (const runner::Backend* backend : backends) {
        num_blocks = std::min(num_blocks, backend->num_blocks());
    }
    kv::KvManager manager(num_blocks, first.block_size(), false, kv::CachePolicy::lru,
                          first.kv_groups().windows());
    kv::SequenceBlocks sequence;
    std::vector<std::vector<float>> logits(backends.size());
    int let_go = 0;
    std::size_t done = 0;
    for (std::size_t c = 0; done < tokens.size(); ++c) {
        const std::size_t n = std::min<std::size_t>(
            static_cast<std::size_t>(chunk_sizes[c % chunk_sizes.size()]), tokens.size() - done);
        if (!manager.grow(0, sequence, static_cast<std::int32_t>(done + n))) {
            qFatal("KV cache too small for the test");
        }
        const runner::SequenceStep step{&sequence, std::span(tokens).subspan(done, n), true};
        const runner::ForwardBatch batch =
            runner::build_forward_batch(std::span(&step, 1), first.block_size());
        for (std::size_t b = 0; b < backends.size(); ++b) {
            logits[b].resize(n * static_cast<std::size_t>(vocab));
            backends[b]->forward(batch, logits[b].data());
        }
        on_chunk(done, logits);
        sequence.length += static_cast<std::int32_t>(n);
        const std::vector<kv::BlockId> freed = manager.release_outside_window(0, sequence);
        for (runner::Backend* backend : backends) {
            backend->release_blocks(freed);
        }
        let_go += static_cast<int>(freed.size());
        done += n;
    }
    return let_go;
}

// Runs `tokens` through one sequence in chunks of the given sizes (cycled),
// returning the logits of every position: (tokens, vocab).
inline std::vector<float> logits_in_chunks(runner::Backend& backend,
                                           const std::vector<std::int32_t>& tokens,
                                           const std::vector<int>& chunk_sizes) {
    const auto vocab = static_cast<std::size_t>(backend.vocab_size());
    std::vector<float> all(tokens.size() * vocab);
    runner::Backend* const one[] = {&backend};
    lockstep_in_chunks(one, tokens, chunk_sizes,
                       [&](std::size_t first, const std::vector<std::vector<float>>& logits) {
                           std::copy(logits[0].begin(), logits[0].end(),
                                     all.begin() + static_cast<std::ptrdiff_t>(first * vocab));
                       });
    return all;
}

} // namespace kvscope::test
