// Running one sequence through a backend in prefill chunks, the way the
// backend tests compare backends and chunkings position by position.
#pragma once

#include "engine/kv/kv_manager.h"
#include "engine/runner/backend.h"
#include "engine/runner/forward_batch.h"

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include <QtGlobal>

namespace kvscope::test {

// Runs `tokens` through one sequence in chunks of the given sizes (cycled),
// returning the logits of every position: (tokens, vocab). The KV manager
// keeps its blocks, so a hybrid cache's sliding groups let go of what their
// windows left after each chunk, as in a served run.
inline std::vector<float> logits_in_chunks(runner::Backend& backend,
                                           const std::vector<std::int32_t>& tokens,
                                           const std::vector<int>& chunk_sizes) {
    const int vocab = backend.vocab_size();
    kv::KvManager manager(backend.num_blocks(), backend.block_size(), false, kv::CachePolicy::lru,
                          backend.kv_groups().windows());
    kv::SequenceBlocks sequence;
    std::vector<float> all(tokens.size() * static_cast<std::size_t>(vocab));
    std::size_t done = 0;
    for (std::size_t c = 0; done < tokens.size(); ++c) {
        const std::size_t n = std::min<std::size_t>(
            static_cast<std::size_t>(chunk_sizes[c % chunk_sizes.size()]), tokens.size() - done);
        if (!manager.grow(0, sequence, static_cast<std::int32_t>(done + n))) {
            qFatal("KV cache too small for the test");
        }
        const runner::SequenceStep step{&sequence, std::span(tokens).subspan(done, n), true};
        const runner::ForwardBatch batch =
            runner::build_forward_batch(std::span(&step, 1), backend.block_size());
        backend.forward(batch, all.data() + done * static_cast<std::size_t>(vocab));
        sequence.length += static_cast<std::int32_t>(n);
        backend.release_blocks(manager.release_outside_window(0, sequence));
        done += n;
    }
    return all;
}

} // namespace kvscope::test
