#include "engine/quality/kv_quality.h"

#include "engine/kv/kv_manager.h"
#include "engine/sched/token_eviction.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <stdexcept>

namespace kvscope::quality {
namespace {

// One sequence on one backend: its blocks, and the attention it captured.
struct Lane {
    std::unique_ptr<runner::Backend> backend;
    std::unique_ptr<kv::KvManager> kv;
    kv::SequenceBlocks blocks;
    std::vector<float> attention;
    std::int64_t evicted = 0;
    std::int64_t entries_sum = 0; // cache entries held, summed over chunks
    std::int64_t chunks = 0;
};

void log_softmax(const float* logits, int vocab, std::vector<double>& out) {
    const float top = *std::max_element(logits, logits + vocab);
    double sum = 0;
    for (int i = 0; i < vocab; ++i) {
        sum += std::exp(static_cast<double>(logits[i]) - top);
    }
    const double lse = top + std::log(sum);
    out.resize(static_cast<std::size_t>(vocab));
    for (int i = 0; i < vocab; ++i) {
        out[static_cast<std::size_t>(i)] = static_cast<double>(logits[i]) - lse;
    }
}

// Runs tokens [begin, end) on `lane`, writing their logits to `logits`.
void run_chunk(Lane& lane, const std::vector<std::int32_t>& tokens, std::int32_t begin,
               std::int32_t end, std::int32_t capture_from, std::vector<float>& logits) {
    const std::int32_t n = end - begin;
    if (!lane.kv->grow(0, lane.blocks, lane.blocks.length + n)) {
        throw std::runtime_error("the evaluation's KV cache is too small");
    }
    runner::SequenceStep step{&lane.blocks,
                              std::span<const std::int32_t>(tokens).subspan(
                                  static_cast<std::size_t>(begin), static_cast<std::size_t>(n)),
                              true};
    step.first_position = begin;
    step.capture_attention_from = capture_from;
    logits.resize(static_cast<std::size_t>(n) *
                  static_cast<std::size_t>(lane.backend->vocab_size()));
    lane.backend->forward(runner::build_forward_batch(std::span(&step, 1), lane.kv->block_size()),
                          logits.data());
    lane.blocks.length += n;
}

// Between chunks, as the serving loop does between steps.
void apply_eviction(Lane& test, const kv::EvictionConfig& eviction, bool& compressed) {
    const std::span<const float> captured = test.backend->captured_attention(0);
    test.attention.resize(static_cast<std::size_t>(test.blocks.length), 0.0f);
    for (std::size_t j = 0; j < captured.size() && j < test.attention.size(); ++j) {
        test.attention[j] += captured[j];
    }
    std::vector<std::int32_t> kept;
    if (eviction.kind == kv::EvictionKind::snapkv) {
        if (!compressed) {
            kept = kv::select_kept(eviction, test.blocks.length, test.attention);
            compressed = true;
        }
    } else if (test.blocks.length > eviction.budget) {
        kept = kv::select_kept(eviction, test.blocks.length, test.attention);
    }
    if (!kept.empty()) {
        test.evicted +=
            sched::compact_sequence(0, kept, test.blocks, test.attention, *test.kv, *test.backend)
                .evicted_tokens;
    }
}

} // namespace

QualityResult measure_kv_quality(std::shared_ptr<const model::LlamaModel> model,
                                 const std::vector<std::int32_t>& tokens,
                                 const QualityOptions& options) {
    if (options.prompt_tokens < 1 || options.chunk < 1 || options.block_size < 1) {
        throw std::runtime_error("quality needs at least one token per step and per block");
    }
    if (tokens.size() < 2) {
        throw std::runtime_error("quality needs a text of at least two tokens");
    }
    const kv::EvictionConfig& eviction = options.eviction;
    if (const std::string problem =
            eviction.problem(options.block_size, model->config().sliding_window);
        !problem.empty()) {
        throw std::runtime_error(problem);
    }
    const auto total = static_cast<std::int32_t>(tokens.size());
    const int block_size = options.block_size;
    const int blocks = (total + block_size - 1) / block_size + 2;
    const auto make_lane = [&](const kv::KvCacheFormat& format) {
        Lane lane;
        // A plain cache: one block table a lane, every layer keeping the
        // whole context (a sliding layer's attention still masks its window).
        lane.backend = session::make_backend(options.backend, model,
                                             {block_size, blocks, format, /*hybrid=*/false});
        lane.kv = std::make_unique<kv::KvManager>(blocks, block_size, false);
        return lane;
    };
    Lane reference = make_lane({kv::KvFormat::f32, kv::KvFormat::f32});
    Lane test = make_lane(options.format);
    const int vocab = model->config().vocab;

    std::vector<double> kls;
    std::int64_t agree = 0;
    double nll = 0;
    double reference_nll = 0;
    std::vector<float> reference_logits;
    std::vector<float> test_logits;
    std::vector<double> p;
    std::vector<double> q;
    const std::int32_t prompt = std::min(options.prompt_tokens, total);
    std::int64_t reference_entries = 0;
    bool compressed = false;
    for (std::int32_t begin = 0; begin < total;) {
        const std::int32_t end =
            begin == 0 ? prompt : std::min(total, begin + std::max(1, options.chunk));
        std::int32_t capture_from = INT32_MAX;
        if (eviction.kind == kv::EvictionKind::h2o) {
            capture_from = 0;
        } else if (eviction.kind == kv::EvictionKind::snapkv && begin == 0) {
            capture_from = std::max(0, prompt - eviction.snapkv_window);
        }
        run_chunk(reference, tokens, begin, end, INT32_MAX, reference_logits);
        run_chunk(test, tokens, begin, end, capture_from, test_logits);
        // Score every position whose next token is known.
        for (std::int32_t t = begin; t < end && t + 1 < total; ++t) {
            const std::size_t row =
                static_cast<std::size_t>(t - begin) * static_cast<std::size_t>(vocab);
            log_softmax(reference_logits.data() + row, vocab, p);
            log_softmax(test_logits.data() + row, vocab, q);
            double kl = 0;
            for (int i = 0; i < vocab; ++i) {
                const double lp = p[static_cast<std::size_t>(i)];
                kl += std::exp(lp) * (lp - q[static_cast<std::size_t>(i)]);
            }
            kls.push_back(std::max(0.0, kl));
            const auto next = static_cast<std::size_t>(tokens[static_cast<std::size_t>(t + 1)]);
            nll -= q[next];
            reference_nll -= p[next];
            agree += std::max_element(p.begin(), p.end()) - p.begin() ==
                     std::max_element(q.begin(), q.end()) - q.begin();
        }
        if (eviction.enabled()) {
            apply_eviction(test, eviction, compressed);
        }
        test.entries_sum += test.blocks.length;
        reference_entries += reference.blocks.length;
        ++test.chunks;
        begin = end;
        if (options.progress && !options.progress(static_cast<double>(end) / total)) {
            break;
        }
    }

    QualityResult r;
    const model::LlamaConfig& c = model->config();
    r.tokens = total;
    r.positions = static_cast<std::int64_t>(kls.size());
    const auto n = static_cast<double>(std::max<std::int64_t>(1, r.positions));
    std::vector<double> sorted = kls;
    std::sort(sorted.begin(), sorted.end());
    double kl_sum = 0;
    for (const double kl : kls) {
        kl_sum += kl;
    }
    r.kl_mean = kl_sum / n;
    r.kl_p99 =
        sorted.empty()
            ? 0.0
            : sorted[std::min(sorted.size() - 1,
                              static_cast<std::size_t>(0.99 * static_cast<double>(sorted.size())))];
    r.top1_agreement = static_cast<double>(agree) / n;
    r.ppl = std::exp(nll / n);
    r.ppl_reference = std::exp(reference_nll / n);
    r.bytes_per_token =
        kv::kv_bytes_per_token(options.format, c.layers, c.kv_heads, c.head_dim, block_size);
    r.reference_bytes_per_token =
        kv::kv_bytes_per_token({}, c.layers, c.kv_heads, c.head_dim, block_size);
    r.evicted_tokens = test.evicted;
    const auto chunks = static_cast<double>(std::max<std::int64_t>(1, test.chunks));
    r.mean_cache_tokens = static_cast<double>(test.entries_sum) / chunks;
    r.mean_reference_tokens = static_cast<double>(reference_entries) / chunks;
    return r;
}

} // namespace kvscope::quality
