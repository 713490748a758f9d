// How close a model's next-token distributions and greedy continuations come
// to golden data from transformers (scripts/reference/make_golden.py): shared
// by the forward-pass suites of each real model.
#pragma once

#include "engine/kv/kv_manager.h"
#include "engine/runner/backend.h"
#include "engine/runner/forward_batch.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include <QJsonArray>
#include <QJsonObject>

namespace kvscope::test {

struct Agreement {
    double kl_mean = 0;
    double kl_max = 0;
    double top1 = 0;
};

// KL(reference || ours) per position from the reference's top-20 logits and
// log-sum-exp: the top-20 probabilities exactly, the rest of the vocabulary as
// one bucket. Merging outcomes can only lower KL, so this is a lower bound;
// with >95% of the mass in the top 20 here it is a tight one. Positions are
// added one at a time, so a long text can be scored chunk by chunk.
class ReferenceAgreement {
public:
    void add(const float* ours, int vocab, const QJsonObject& ref) {
        const float max_logit = *std::max_element(ours, ours + vocab);
        double sum = 0;
        for (int i = 0; i < vocab; ++i) {
            sum += std::exp(double(ours[i]) - max_logit);
        }
        const double our_lse = max_logit + std::log(sum);
        const auto our_top = static_cast<std::int32_t>(std::max_element(ours, ours + vocab) - ours);
        const QJsonArray ids = ref.value("top_ids").toArray();
        const QJsonArray ref_logits = ref.value("top_logits").toArray();
        const double ref_lse = ref.value("logsumexp").toDouble();
        agree_ += our_top == ids[0].toInt() ? 1 : 0;
        double kl = 0, p_rest = 1, q_rest = 1;
        for (qsizetype i = 0; i < ids.size(); ++i) {
            const double p_i = std::exp(ref_logits[i].toDouble() - ref_lse);
            const double q_i = std::exp(double(ours[ids[i].toInt()]) - our_lse);
            kl += p_i * std::log(p_i / q_i);
            p_rest -= p_i;
            q_rest -= q_i;
        }
        if (p_rest > 1e-9 && q_rest > 1e-9) {
            kl += p_rest * std::log(p_rest / q_rest);
        }
        kl_sum_ += kl;
        kl_max_ = std::max(kl_max_, kl);
        ++count_;
    }

    Agreement result() const {
        if (count_ == 0) {
            return {};
        }
        return {kl_sum_ / double(count_), kl_max_, double(agree_) / double(count_)};
    }

private:
    double kl_sum_ = 0;
    double kl_max_ = 0;
    std::int64_t agree_ = 0;
    std::int64_t count_ = 0;
};

inline Agreement compare_with_reference(const std::vector<float>& logits, int vocab,
                                        const QJsonArray& positions) {
    ReferenceAgreement agreement;
    for (qsizetype p = 0; p < positions.size(); ++p) {
        agreement.add(logits.data() + p * vocab, vocab, positions[p].toObject());
    }
    return agreement.result();
}

// Token ids of a golden file's JSON array.
inline std::vector<std::int32_t> to_ids(const QJsonValue& value) {
    std::vector<std::int32_t> ids;
    for (const QJsonValue& id : value.toArray()) {
        ids.push_back(id.toInt());
    }
    return ids;
}

// How many tokens two sequences share from their start.
inline std::size_t identical_prefix(const std::vector<std::int32_t>& a,
                                    const std::vector<std::int32_t>& b) {
    std::size_t same = 0;
    while (same < a.size() && same < b.size() && a[same] == b[same]) {
        ++same;
    }
    return same;
}

// `count` tokens of greedy decoding after `prompt` (one prefill, then one
// token a step), on a backend whose cache has room for them all.
inline std::vector<std::int32_t> greedy_continuation(runner::Backend& backend,
                                                     const std::vector<std::int32_t>& prompt,
                                                     std::size_t count) {
    kv::KvManager manager(backend.num_blocks(), backend.block_size(), false, kv::CachePolicy::lru,
                          backend.kv_groups().windows());
    kv::SequenceBlocks sequence;
    std::vector<std::int32_t> pending = prompt;
    std::vector<std::int32_t> generated;
    std::vector<float> logits(static_cast<std::size_t>(backend.vocab_size()));
    while (generated.size() < count) {
        if (!manager.grow(0, sequence,
                          sequence.length + static_cast<std::int32_t>(pending.size()))) {
            break; // the caller sees fewer tokens than it asked for
        }
        const runner::SequenceStep step{&sequence, pending, false};
        backend.forward(runner::build_forward_batch(std::span(&step, 1), backend.block_size()),
                        logits.data());
        sequence.length += static_cast<std::int32_t>(pending.size());
        backend.release_blocks(manager.release_outside_window(0, sequence));
        const auto next = static_cast<std::int32_t>(std::max_element(logits.begin(), logits.end()) -
                                                    logits.begin());
        generated.push_back(next);
        pending = {next};
    }
    return generated;
}

} // namespace kvscope::test
