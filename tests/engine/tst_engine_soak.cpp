// The serving loop under random workloads, against a backend that runs no
// model but checks every read: each slot remembers the token and position
// written to it and a hash chained over everything before, so a sequence that
// reads a wrong, stale or foreign slot (a bad block table, a prefix-cache hit
// on other content, a reused block) fails at once. Its logits are a function
// of that chain alone, so the greedy output of every request is known in
// advance, whatever the scheduling, caching, preemption or the offload tier
// (whose copies move those slots) did. The app's block map, rebuilt from the
// events, must match the KV manager's counts and every request's table. With
// a window, the backend keeps a hybrid cache (a global group and a sliding
// one): the sliding group's slots must hold the global group's content over
// each token's window, whatever blocks the window let go.
#include "engine/events/typed_events.h"
#include "engine/sched/llm_engine.h"
#include "engine/util/host_clock.h"
#include "profiler/store/run_store.h"
#include "tests/support/sanitized_build.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <set>

#include <QTest>

using namespace kvscope;

namespace {

constexpr int kVocab = 64;
constexpr std::int32_t kEndToken = 0;

std::uint64_t mix(std::uint64_t x) {
    x ^= x >> 31;
    x *= 0x7fb5d329728ea185ull;
    x ^= x >> 27;
    x *= 0x81dadef4bc2dd44dull;
    x ^= x >> 33;
    return x;
}
std::uint64_t chain(std::uint64_t previous, std::int32_t token) {
    return mix(previous * 31 + static_cast<std::uint64_t>(token) + 1);
}
// The fake model's next token after a prefix with hash `h`: rarely the end token.
std::int32_t next_token(std::uint64_t h) {
    const std::uint64_t r = mix(h ^ 0x1234);
    return r % 23 == 0 ? kEndToken : static_cast<std::int32_t>(1 + r % (kVocab - 1));
}

// A self-draft's guess (a pass of fewer layers): the model's next token
// seven times in ten, else another.
std::int32_t draft_guess(std::uint64_t h) {
    const std::int32_t next = next_token(h);
    return mix(h ^ 0x5eed) % 10 < 7 ? next : (next + 1) % kVocab;
}

constexpr std::int64_t kBlockBytes = 1000; // what the checking backend says a block costs

class CheckingBackend final : public runner::Backend {
public:
    // `drafting`: a draft model's backend, whose every pass guesses.
    // `window` > 0: a hybrid cache with a sliding group of that window.
    CheckingBackend(int blocks, int block_size, bool evicting = false, bool drafting = false,
                    int window = 0)
        : evicting_(evicting)
        , drafting_(drafting)
        , window_(window)
        , blocks_(blocks)
        , block_size_(block_size)
        , slots_(static_cast<std::size_t>(blocks * block_size)) {}

    std::string name() const override { return "checking"; }
    int vocab_size() const override { return kVocab; }
    int block_size() const override { return block_size_; }
    int num_blocks() const override { return blocks_; }
    int layers() const override { return 4; } // a self-draft runs fewer (its guess below)
    kv::KvGroupLayout kv_groups() const override {
        if (window_ == 0) {
            return Backend::kv_groups();
        }
        const std::vector<std::int32_t> windows{0, window_};
        return kv::KvGroupLayout::for_windows(windows);
    }
    kv::KvCacheFormat cache_format() const override { return {}; }
    std::int64_t kv_cache_bytes() const override { return std::int64_t{blocks_} * kBlockBytes; }
    void release_blocks(std::span<const kv::BlockId> blocks) override {
        released += static_cast<std::int64_t>(blocks.size());
    }
    void copy_slots(std::span<const std::int32_t> from, std::span<const std::int32_t> to) override {
        std::vector<Slot> moved;
        for (const std::int32_t slot : from) {
            moved.push_back(slots_[static_cast<std::size_t>(slot)]);
        }
        for (std::size_t i = 0; i < to.size(); ++i) {
            slots_[static_cast<std::size_t>(to[i])] = moved[i];
        }
    }

    void forward(const runner::ForwardBatch& batch, float* logits) override {
        const auto slot_of = [&](std::int32_t seq, std::int32_t position) {
            const kv::BlockId* table = batch.block_tables.data() +
                                       batch.block_table_offsets[static_cast<std::size_t>(seq)];
            return table[position / block_size_] * block_size_ + position % block_size_;
        };
        if (evicting_) {
            forward_evicting(batch, logits, slot_of);
            return;
        }
        if (batch.kv_groups != (window_ > 0 ? 2 : 1)) {
            throw std::runtime_error("the batch has the wrong number of KV groups");
        }
        for (std::int64_t t = 0; t < batch.token_count(); ++t) {
            const auto i = static_cast<std::size_t>(t);
            const std::int32_t p = batch.positions[i];
            std::uint64_t previous = 0;
            if (p > 0) {
                const Slot& before =
                    slots_[static_cast<std::size_t>(slot_of(batch.sequence_of[i], p - 1))];
                if (before.position != p - 1) {
                    throw std::runtime_error("position " + std::to_string(p - 1) +
                                             " reads a slot holding position " +
                                             std::to_string(before.position));
                }
                previous = before.chain;
            }
            if (slot_of(batch.sequence_of[i], p) != batch.slot_mapping[i]) {
                throw std::runtime_error("slot mapping disagrees with the block table");
            }
            slots_[static_cast<std::size_t>(batch.slot_mapping[i])] = {
                batch.token_ids[i], p, chain(previous, batch.token_ids[i])};
        }
        if (window_ > 0) {
            check_window_group(batch);
        }
        // Every token attends over its whole context: check the chain.
        for (std::int64_t t = 0; t < batch.token_count(); ++t) {
            const auto i = static_cast<std::size_t>(t);
            std::uint64_t h = 0;
            for (std::int32_t p = 0; p <= batch.positions[i]; ++p) {
                const Slot& s = slots_[static_cast<std::size_t>(slot_of(batch.sequence_of[i], p))];
                h = chain(h, s.token);
                if (s.position != p || s.chain != h) {
                    throw std::runtime_error("context slot of position " + std::to_string(p) +
                                             " holds other content");
                }
            }
        }
        for (std::size_t r = 0; r < batch.logit_tokens.size(); ++r) {
            const auto t = static_cast<std::size_t>(batch.logit_tokens[r]);
            const std::uint64_t h = slots_[static_cast<std::size_t>(batch.slot_mapping[t])].chain;
            float* row = logits + r * kVocab;
            std::fill(row, row + kVocab, 0.0f);
            row[batch.layers > 0 || drafting_ ? draft_guess(h) : next_token(h)] = 10.0f;
        }
        ++steps;
    }

    // With tokens evicted the cache no longer holds every position: each
    // sequence's entries must still hold strictly increasing positions of
    // its own, ending with the token being computed.
    template <typename SlotOf>
    void forward_evicting(const runner::ForwardBatch& batch, float* logits, const SlotOf& slot_of) {
        for (std::int64_t t = 0; t < batch.token_count(); ++t) {
            const auto i = static_cast<std::size_t>(t);
            if (slot_of(batch.sequence_of[i], batch.cache_positions[i]) != batch.slot_mapping[i]) {
                throw std::runtime_error("slot mapping disagrees with the block table");
            }
            slots_[static_cast<std::size_t>(batch.slot_mapping[i])] = {batch.token_ids[i],
                                                                       batch.positions[i], 0};
        }
        captured_.assign(static_cast<std::size_t>(batch.sequence_count()), {});
        for (std::int64_t t = 0; t < batch.token_count(); ++t) {
            const auto i = static_cast<std::size_t>(t);
            const std::int32_t seq = batch.sequence_of[i];
            std::int32_t previous = -1;
            for (std::int32_t e = 0; e <= batch.cache_positions[i]; ++e) {
                const Slot& s = slots_[static_cast<std::size_t>(slot_of(seq, e))];
                if (s.position <= previous) {
                    throw std::runtime_error("cache entries out of order after compaction");
                }
                previous = s.position;
            }
            if (previous != batch.positions[i]) {
                throw std::runtime_error("the last cache entry is not the token itself");
            }
            if (batch.positions[i] >= batch.capture_attention_from[static_cast<std::size_t>(seq)]) {
                auto& scores = captured_[static_cast<std::size_t>(seq)];
                scores.assign(static_cast<std::size_t>(batch.cache_positions[i] + 1), 0.0f);
                for (std::size_t e = 0; e < scores.size(); ++e) {
                    const Slot& s = slots_[static_cast<std::size_t>(
                        slot_of(seq, static_cast<std::int32_t>(e)))];
                    scores[e] =
                        static_cast<float>(mix(static_cast<std::uint64_t>(s.token)) % 100) / 100.0f;
                }
            }
        }
        for (std::size_t r = 0; r < batch.logit_tokens.size(); ++r) {
            const auto t = static_cast<std::size_t>(batch.logit_tokens[r]);
            float* row = logits + r * kVocab;
            std::fill(row, row + kVocab, 0.0f);
            row[next_token(static_cast<std::uint64_t>(batch.positions[t]) * 977 +
                           static_cast<std::uint64_t>(batch.token_ids[t]))] = 10.0f;
        }
        ++steps;
    }

    // The sliding group: each token writes its slot there too, and over its
    // window every slot holds what the global group holds at that position.
    void check_window_group(const runner::ForwardBatch& batch) {
        const std::span<const std::int32_t> written = batch.group_slots(1);
        const auto window_slot = [&](std::int32_t seq, std::int32_t position) {
            const kv::BlockId block = batch.group_table(1, seq)[position / block_size_];
            if (block == kv::kNoBlock) {
                throw std::runtime_error("position " + std::to_string(position) +
                                         " is in the window but its block was let go");
            }
            return block * block_size_ + position % block_size_;
        };
        for (std::int64_t t = 0; t < batch.token_count(); ++t) {
            const auto i = static_cast<std::size_t>(t);
            if (window_slot(batch.sequence_of[i], batch.positions[i]) != written[i]) {
                throw std::runtime_error(
                    "the window group's slot mapping disagrees with its table");
            }
            slots_[static_cast<std::size_t>(written[i])] =
                slots_[static_cast<std::size_t>(batch.slot_mapping[i])];
        }
        for (std::int64_t t = 0; t < batch.token_count(); ++t) {
            const auto i = static_cast<std::size_t>(t);
            const std::int32_t seq = batch.sequence_of[i];
            const std::int32_t last = batch.positions[i];
            for (std::int32_t p = std::max(0, last - window_ + 1); p <= last; ++p) {
                const Slot& global = slots_[static_cast<std::size_t>(
                    batch.group_table(0, seq)[p / block_size_] * block_size_ + p % block_size_)];
                const Slot& local = slots_[static_cast<std::size_t>(window_slot(seq, p))];
                if (local.position != p || local.chain != global.chain) {
                    throw std::runtime_error("the window group's slot of position " +
                                             std::to_string(p) + " holds other content");
                }
            }
        }
    }

    std::span<const float> captured_attention(std::size_t s) const override {
        return s < captured_.size() ? std::span<const float>(captured_[s])
                                    : std::span<const float>{};
    }

    // The offload tier moves a block's slots as bytes: a block loaded back
    // with other content fails the chain check of the next pass reading it.
    std::int64_t block_bytes() const override {
        return static_cast<std::int64_t>(sizeof(Slot)) * block_size_;
    }
    void read_block(kv::BlockId block, std::span<std::byte> bytes) const override {
        std::memcpy(bytes.data(), slots_.data() + static_cast<std::size_t>(block) * block_size_,
                    bytes.size());
    }
    void write_block(kv::BlockId block, std::span<const std::byte> bytes) override {
        std::memcpy(slots_.data() + static_cast<std::size_t>(block) * block_size_, bytes.data(),
                    bytes.size());
        ++blocks_loaded;
    }
    std::int64_t blocks_loaded = 0;

    std::int64_t steps = 0;
    std::int64_t released = 0;

private:
    bool evicting_;
    bool drafting_;
    int window_;
    std::vector<std::vector<float>> captured_;
    struct Slot {
        std::int32_t token = -1;
        std::int32_t position = -1;
        std::uint64_t chain = 0;
    };
    int blocks_;
    int block_size_;
    std::vector<Slot> slots_;
};

// What greedy decoding must produce for `prompt`, computed directly.
std::vector<std::int32_t> expected_output(const std::vector<std::int32_t>& prompt, int max_tokens,
                                          std::int64_t capacity) {
    std::uint64_t h = 0;
    for (const std::int32_t t : prompt) {
        h = chain(h, t);
    }
    std::vector<std::int32_t> out;
    while (static_cast<int>(out.size()) < max_tokens) {
        const std::int32_t next = next_token(h);
        out.push_back(next);
        if (next == kEndToken ||
            static_cast<std::int64_t>(prompt.size() + out.size()) + 1 > capacity) {
            break;
        }
        h = chain(h, next);
    }
    return out;
}

// What greedy decoding must produce for `prompt` when tokens are evicted: the
// evicting backend's logits depend on the last token and its position alone
// (whatever the cache still holds), and eviction keeps a sequence's cache
// within the policy's budget, far below the pool, so only the end token and
// `max_tokens` stop it.
std::vector<std::int32_t> expected_output_evicting(const std::vector<std::int32_t>& prompt,
                                                   int max_tokens) {
    if (prompt.empty()) {
        return {}; // rejected
    }
    std::int32_t token = prompt.back();
    auto position = static_cast<std::uint64_t>(prompt.size() - 1);
    std::vector<std::int32_t> out;
    while (static_cast<int>(out.size()) < max_tokens) {
        token = next_token(position * 977 + static_cast<std::uint64_t>(token));
        out.push_back(token);
        if (token == kEndToken) {
            break;
        }
        ++position;
    }
    return out;
}

// Counts events and checks the ones whose values must agree with others:
// KV bytes with the block counts beside them, compactions with the blocks.
struct Counter final : events::EventSink {
    std::map<events::EventKind, std::int64_t> counts;
    events::EngineEvent last_memory;
    int block_size = 0;
    std::int64_t rollback_blocks = 0;
    std::string problem;
    profiler::RunStore store; // the app's view of the run, rebuilt from the events alone
    void on_event(const events::EngineEvent& e) override {
        ++counts[e.kind];
        store.append(e);
        if (!problem.empty()) {
            return;
        }
        if (e.kind == events::EventKind::memory_sample) {
            last_memory = e;
        } else if (e.kind == events::EventKind::kv_bytes) {
            if (e.d != kBlockBytes || e.a != last_memory.a * e.d || e.b != last_memory.b * e.d ||
                e.c != last_memory.c * e.d || e.text.empty()) {
                problem = "kv_bytes disagrees with the memory sample before it";
            }
        } else if (e.kind == events::EventKind::draft_verified) {
            const auto v = events::as<events::DraftVerified>(e);
            rollback_blocks += v.blocks_released;
            if (v.accepted < 0 || v.accepted > v.drafted || v.drafted < 1) {
                problem = "draft_verified with accepted outside 0..drafted";
            }
        } else if (e.kind == events::EventKind::block_compacted) {
            if (e.block < 0 || e.request < 0 || e.a < 1 || e.a > block_size) {
                problem = "block_compacted with a block, request or entry count out of range";
            }
        }
    }
};

// The block map the app rebuilds from events against the KV manager itself:
// the same ref count for every block, the same used/cached/free split.
std::string compare_block_map(const profiler::BlockMapState& map, const sched::LlmEngine& engine,
                              bool ordered) {
    const kv::KvManager& kv = engine.kv();
    // Each live request's table, in order unless token eviction reorders
    // blocks (compaction gives fresh ones in the middle).
    for (const std::int64_t id : engine.request_ids()) {
        const kv::SequenceBlocks& blocks = engine.request(id).blocks;
        for (int g = 0; g < blocks.groups(); ++g) {
            std::vector<kv::BlockId> expected = blocks.table(g);
            std::vector<std::int32_t> rebuilt = map.block_table(id, g);
            if (!ordered) {
                std::sort(expected.begin(), expected.end());
                std::sort(rebuilt.begin(), rebuilt.end());
            }
            if (!std::equal(expected.begin(), expected.end(), rebuilt.begin(), rebuilt.end())) {
                return "request " + std::to_string(id) + ": the rebuilt block table of group " +
                       std::to_string(g) + " differs";
            }
        }
    }
    if (static_cast<int>(map.blocks().size()) != kv.total_blocks()) {
        return "the rebuilt map has " + std::to_string(map.blocks().size()) + " blocks, not " +
               std::to_string(kv.total_blocks());
    }
    for (int b = 0; b < kv.total_blocks(); ++b) {
        if (map.blocks()[static_cast<std::size_t>(b)].ref_count() != kv.ref_count(b)) {
            return "block " + std::to_string(b) + ": ref count " +
                   std::to_string(map.blocks()[static_cast<std::size_t>(b)].ref_count()) +
                   " rebuilt, " + std::to_string(kv.ref_count(b)) + " in the KV manager";
        }
    }
    const profiler::BlockCounts counts = map.counts();
    const kv::KvManagerStats stats = kv.stats();
    const std::vector<profiler::BlockCounts> by_group = map.counts_by_group();
    for (int g = 0; g < kv.groups(); ++g) {
        const profiler::BlockCounts c = static_cast<std::size_t>(g) < by_group.size()
                                            ? by_group[static_cast<std::size_t>(g)]
                                            : profiler::BlockCounts{};
        if (c.used != stats.used_by_group[static_cast<std::size_t>(g)] ||
            c.cached != stats.cached_by_group[static_cast<std::size_t>(g)]) {
            return "group " + std::to_string(g) + ": rebuilt used/cached " +
                   std::to_string(c.used) + "/" + std::to_string(c.cached) + ", KV manager " +
                   std::to_string(stats.used_by_group[static_cast<std::size_t>(g)]) + "/" +
                   std::to_string(stats.cached_by_group[static_cast<std::size_t>(g)]);
        }
    }
    if (counts.used != stats.used || counts.cached != stats.cached || counts.free != stats.free) {
        return "rebuilt used/cached/free " + std::to_string(counts.used) + "/" +
               std::to_string(counts.cached) + "/" + std::to_string(counts.free) + ", KV manager " +
               std::to_string(stats.used) + "/" + std::to_string(stats.cached) + "/" +
               std::to_string(stats.free);
    }
    return {};
}

struct BlockMapMoment {
    std::int64_t t_ns = 0;
    std::vector<int> refs;
    profiler::BlockCounts counts;
};

struct SoakConfig {
    int blocks;
    int block_size;
    int budget;
    int max_seqs;
    bool chunked;
    bool prefix_caching;
    sched::VictimPolicy victim;
};

} // namespace

class TestEngineSoak : public QObject {
    Q_OBJECT

private slots:
    void random_workloads_keep_every_promise_data();
    void random_workloads_keep_every_promise();
    void impossible_requests_are_rejected_with_a_reason();
};

void TestEngineSoak::random_workloads_keep_every_promise_data() {
    QTest::addColumn<int>("seed");
    QTest::addColumn<int>("blocks");
    QTest::addColumn<int>("block_size");
    QTest::addColumn<int>("budget");
    QTest::addColumn<int>("max_seqs");
    QTest::addColumn<bool>("chunked");
    QTest::addColumn<bool>("prefix_caching");
    QTest::addColumn<int>("victim");
    QTest::addColumn<int>("eviction");
    QTest::addColumn<int>("speculative");
    // The offload tier's blocks (0: none; negative: write-through).
    QTest::addColumn<int>("tier");
    // A sliding window (0: a plain cache; else a hybrid one, kv_groups.h).
    QTest::addColumn<int>("window");
    using V = sched::VictimPolicy;
    using E = kv::EvictionKind;
    QTest::newRow("tiny pool, newest victim")
        << 1 << 10 << 4 << 32 << 8 << true << true << int(V::newest) << int(E::none) << 0 << 0 << 0;
    QTest::newRow("tiny pool, oldest victim")
        << 2 << 10 << 4 << 32 << 8 << true << true << int(V::oldest) << int(E::none) << 0 << 0 << 0;
    QTest::newRow("tiny pool, largest victim") << 3 << 12 << 4 << 24 << 6 << true << true
                                               << int(V::largest) << int(E::none) << 0 << 0 << 0;
    QTest::newRow("no prefix caching") << 4 << 16 << 4 << 64 << 8 << true << false << int(V::newest)
                                       << int(E::none) << 0 << 0 << 0;
    QTest::newRow("no chunked prefill") << 5 << 24 << 8 << 48 << 8 << false << true
                                        << int(V::newest) << int(E::none) << 0 << 0 << 0;
    QTest::newRow("block size 1") << 6 << 40 << 1 << 16 << 4 << true << true << int(V::newest)
                                  << int(E::none) << 0 << 0 << 0;
    QTest::newRow("window eviction") << 8 << 14 << 4 << 32 << 6 << true << true << int(V::newest)
                                     << int(E::window) << 0 << 0 << 0;
    QTest::newRow("streaming eviction") << 9 << 14 << 4 << 32 << 6 << true << true << int(V::oldest)
                                        << int(E::streaming) << 0 << 0 << 0;
    QTest::newRow("h2o eviction") << 10 << 14 << 4 << 32 << 6 << true << true << int(V::largest)
                                  << int(E::h2o) << 0 << 0 << 0;
    QTest::newRow("snapkv eviction") << 11 << 16 << 4 << 32 << 6 << true << true << int(V::newest)
                                     << int(E::snapkv) << 0 << 0 << 0;
    using D = spec::DraftMethod;
    QTest::newRow("ngram speculation, small pool")
        << 12 << 24 << 4 << 32 << 6 << true << true << int(V::newest) << int(E::none)
        << int(D::ngram) << 0 << 0;
    QTest::newRow("self-draft speculation")
        << 13 << 40 << 4 << 48 << 8 << true << true << int(V::oldest) << int(E::none)
        << int(D::layers) << 0 << 0;
    QTest::newRow("self-draft, block size 1")
        << 14 << 60 << 1 << 24 << 6 << true << false << int(V::largest) << int(E::none)
        << int(D::layers) << 0 << 0;
    QTest::newRow("draft model, tiny pool")
        << 15 << 14 << 4 << 32 << 6 << true << true << int(V::newest) << int(E::none)
        << int(D::model) << 0 << 0;
    QTest::newRow("offload tier, tiny pool") << 16 << 12 << 4 << 32 << 6 << true << true
                                             << int(V::newest) << int(E::none) << 0 << 24 << 0;
    QTest::newRow("offload tier too small, write-through")
        << 17 << 14 << 4 << 32 << 6 << true << true << int(V::oldest) << int(E::none) << 0 << -5
        << 0;
    QTest::newRow("offload tier, no chunked prefill")
        << 18 << 20 << 4 << 24 << 6 << false << true << int(V::largest) << int(E::none) << 0 << 8
        << 0;
    QTest::newRow("roomy pool") << 7 << 200 << 16 << 256 << 32 << true << true << int(V::newest)
                                << int(E::none) << 0 << 0 << 0;
    QTest::newRow("hybrid, window of a block and a half")
        << 19 << 24 << 4 << 32 << 6 << true << true << int(V::newest) << int(E::none) << 0 << 0
        << 6;
    QTest::newRow("hybrid, self-draft")
        << 20 << 40 << 4 << 48 << 8 << true << true << int(V::oldest) << int(E::none)
        << int(D::layers) << 0 << 9;
    QTest::newRow("hybrid, ngram speculation")
        << 21 << 30 << 4 << 32 << 6 << true << true << int(V::largest) << int(E::none)
        << int(D::ngram) << 0 << 5;
    QTest::newRow("hybrid, no prefix caching") << 23 << 20 << 4 << 32 << 6 << true << false
                                               << int(V::oldest) << int(E::none) << 0 << 0 << 7;
    QTest::newRow("hybrid, small chunks in a small pool")
        << 24 << 14 << 4 << 8 << 6 << true << true << int(V::newest) << int(E::none) << 0 << 0 << 6;
    QTest::newRow("hybrid, no chunked prefill") << 22 << 40 << 8 << 48 << 8 << false << true
                                                << int(V::newest) << int(E::none) << 0 << 0 << 16;
}

void TestEngineSoak::random_workloads_keep_every_promise() {
    QFETCH(int, seed);
    QFETCH(int, blocks);
    QFETCH(int, block_size);
    QFETCH(int, budget);
    QFETCH(int, max_seqs);
    QFETCH(bool, chunked);
    QFETCH(bool, prefix_caching);
    QFETCH(int, victim);
    QFETCH(int, eviction);
    QFETCH(int, speculative);
    QFETCH(int, tier);
    QFETCH(int, window);
    const bool evicting = eviction != int(kv::EvictionKind::none);

    CheckingBackend backend(blocks, block_size, evicting, false, window);
    // The draft model's pool, checked like the target's: a draft pass that
    // read a slot its catch-up never wrote fails at once.
    CheckingBackend draft(blocks, block_size, false, true);
    Counter counter;
    sched::EngineConfig config;
    config.scheduler.max_num_batched_tokens = budget;
    config.scheduler.max_num_seqs = max_seqs;
    config.scheduler.chunked_prefill = chunked;
    config.scheduler.victim = static_cast<sched::VictimPolicy>(victim);
    config.prefix_caching = prefix_caching;
    config.eviction.kind = static_cast<kv::EvictionKind>(eviction);
    config.eviction.budget = 12;
    config.eviction.sink_tokens = 2;
    config.eviction.snapkv_window = 4;
    config.eviction.snapkv_pool = 3;
    config.ends_generation = [](std::int32_t t) {
        return t == kEndToken;
    };
    config.speculative.method = static_cast<spec::DraftMethod>(speculative);
    config.speculative.draft_tokens = 4;
    config.speculative.draft_layers = 2;
    config.speculative.ngram_min = 1; // random tokens rarely repeat in pairs
    config.draft_backend = &draft;
    if (tier != 0) {
        config.offload.medium = kv::TierMedium::memory;
        config.offload.capacity_blocks = std::abs(tier);
        config.offload_write_through = tier < 0;
    }
    counter.block_size = block_size;
    sched::LlmEngine engine(backend, config, &counter);
    const std::int64_t capacity = engine.scheduler().sequence_capacity();

    std::mt19937 rng(static_cast<std::uint32_t>(seed));
    // A few shared prefixes, so prefix hits and shared blocks are common.
    std::vector<std::vector<std::int32_t>> prefixes(4);
    for (auto& p : prefixes) {
        p.resize(std::uniform_int_distribution<std::size_t>(0, 20)(rng));
        for (auto& t : p) {
            t = std::uniform_int_distribution<std::int32_t>(1, kVocab - 1)(rng);
        }
    }
    std::set<std::int64_t> aborted;
    std::vector<BlockMapMoment> moments; // for block_map_at() after the run
    // Under a sanitizer a third of the steps: every row still preempts,
    // evicts, drafts and offloads hundreds of times.
    const int steps = test::full_or_sanitized(15000, 5000);
    for (int s = 0; s < steps; ++s) {
        if (std::uniform_int_distribution<int>(0, 2)(rng) == 0) {
            sched::RequestSpec spec;
            spec.prompt = prefixes[std::uniform_int_distribution<std::size_t>(0, 3)(rng)];
            const int extra =
                std::uniform_int_distribution<int>(spec.prompt.empty() ? 1 : 0, 12)(rng);
            for (int i = 0; i < extra; ++i) {
                spec.prompt.push_back(
                    std::uniform_int_distribution<std::int32_t>(1, kVocab - 1)(rng));
            }
            spec.max_tokens = std::uniform_int_distribution<int>(1, 24)(rng);
            spec.sampling.temperature = 0; // greedy: outputs are known
            engine.add_request(std::move(spec));
        }
        if (std::uniform_int_distribution<int>(0, 40)(rng) == 0 && engine.has_unfinished()) {
            const auto ids = engine.request_ids();
            const std::int64_t id =
                ids[std::uniform_int_distribution<std::size_t>(0, ids.size() - 1)(rng)];
            if (engine.abort(id)) {
                aborted.insert(id);
            }
        }
        try {
            engine.step();
        } catch (const std::exception& e) {
            QFAIL(qPrintable(QString("step %1: %2").arg(s).arg(e.what())));
        }
        const std::string problem = engine.check_invariants();
        QVERIFY2(problem.empty(), qPrintable(QString("step %1: %2").arg(s).arg(problem.c_str())));
        const std::string map_problem =
            compare_block_map(counter.store.block_map_now(), engine, !evicting);
        QVERIFY2(map_problem.empty(),
                 qPrintable(QString("step %1: %2").arg(s).arg(map_problem.c_str())));
        if (s % 97 == 0) {
            BlockMapMoment moment{host_now_ns(), {}, counter.store.block_map_now().counts()};
            for (int b = 0; b < blocks; ++b) {
                moment.refs.push_back(engine.kv().ref_count(b));
            }
            moments.push_back(std::move(moment));
        }
    }
    // Replay: the map of any earlier moment, rebuilt from checkpoints.
    for (const BlockMapMoment& moment : moments) {
        const profiler::BlockMapState then = counter.store.block_map_at(moment.t_ns);
        const profiler::BlockCounts counts = then.counts();
        QCOMPARE(counts.used, moment.counts.used);
        QCOMPARE(counts.cached, moment.counts.cached);
        QCOMPARE(counts.free, moment.counts.free);
        for (int b = 0; b < blocks; ++b) {
            QCOMPARE(then.blocks()[static_cast<std::size_t>(b)].ref_count(),
                     moment.refs[static_cast<std::size_t>(b)]);
        }
    }
    // Drain: every request ends; none is stuck (something finishes at
    // least every few thousand steps however long the queue).
    int idle = 0;
    std::size_t unfinished =
        engine.scheduler().waiting_count() + engine.scheduler().running_count();
    while (engine.has_unfinished()) {
        engine.step();
        QVERIFY(engine.check_invariants().empty());
        const std::size_t now =
            engine.scheduler().waiting_count() + engine.scheduler().running_count();
        idle = now < unfinished ? 0 : idle + 1;
        unfinished = now;
        QVERIFY2(idle < 5000, "requests stuck in the engine");
    }
    const kv::KvManagerStats memory = engine.kv().stats();
    QCOMPARE(memory.used, 0); // nothing leaked
    QCOMPARE(memory.free + memory.cached, blocks);

    std::int64_t finished = 0;
    std::int64_t hits = 0;
    std::int64_t recomputed = 0;
    std::int64_t evicted = 0;
    for (const std::int64_t id : engine.request_ids()) {
        const sched::Request& r = engine.request(id);
        QVERIFY2(r.is_done(), "a request neither finished, aborted nor rejected");
        const std::vector<std::int32_t> expected =
            evicting ? expected_output_evicting(r.spec.prompt, r.spec.max_tokens)
                     : expected_output(r.spec.prompt, r.spec.max_tokens, capacity);
        const std::vector<std::int32_t> got(r.tokens.begin() + r.prompt_length(), r.tokens.end());
        evicted += r.accounting.evicted_tokens;
        if (r.state == sched::RequestState::finished) {
            ++finished;
            QVERIFY2(got == expected,
                     qPrintable(QString("request %1 generated other tokens (%2)")
                                    .arg(id)
                                    .arg(QString::fromStdString(r.finish_reason))));
        } else if (r.state == sched::RequestState::aborted) {
            QVERIFY(aborted.count(id) == 1);
            QVERIFY(got.size() <= expected.size());
            QVERIFY2(std::equal(got.begin(), got.end(), expected.begin()),
                     qPrintable(QString("aborted request %1 generated other tokens").arg(id)));
        } else {
            QVERIFY2(!r.finish_reason.empty(), "a rejection without a reason");
        }
        hits += r.accounting.prefix_hit_tokens;
        recomputed += r.accounting.recomputed_tokens;
        // Honest counts: fresh work plus hits cover the prompt exactly once.
        if (r.state == sched::RequestState::finished && !evicting) {
            QVERIFY(r.accounting.computed_tokens + r.accounting.prefix_hit_tokens +
                        r.accounting.resumed_hit_tokens >=
                    static_cast<std::int64_t>(r.tokens.size()) - 1);
            QVERIFY(r.accounting.computed_tokens + r.accounting.prefix_hit_tokens <=
                    static_cast<std::int64_t>(r.tokens.size()));
        }
    }
    qInfo("%lld requests finished, %zu aborted, %lld prefix-hit tokens, %lld recomputed, "
          "%lld preemptions, %lld model steps",
          static_cast<long long>(finished), aborted.size(), static_cast<long long>(hits),
          static_cast<long long>(recomputed),
          static_cast<long long>(counter.counts[events::EventKind::request_preempted]),
          static_cast<long long>(backend.steps));
    QVERIFY(finished > steps / 15);
    QVERIFY2(counter.problem.empty(), counter.problem.c_str());
    QCOMPARE(counter.counts[events::EventKind::kv_bytes],
             counter.counts[events::EventKind::memory_sample]);
    if (evicting) {
        qInfo("%lld tokens evicted", static_cast<long long>(evicted));
        QVERIFY2(evicted > 0, "the policy never evicted: the test does not test eviction");
        QVERIFY2(counter.counts[events::EventKind::block_compacted] > 0,
                 "tokens were evicted but no block was reported compacted");
    }
    if (speculative != 0) {
        std::int64_t drafted = 0;
        std::int64_t accepted = 0;
        for (const std::int64_t id : engine.request_ids()) {
            drafted += engine.request(id).accounting.drafted_tokens;
            accepted += engine.request(id).accounting.accepted_tokens;
        }
        qInfo("%lld tokens drafted, %lld accepted, %lld blocks released by rollbacks",
              static_cast<long long>(drafted), static_cast<long long>(accepted),
              static_cast<long long>(counter.rollback_blocks));
        QVERIFY2(accepted > 0 && accepted < drafted,
                 "verification never kept or never rolled back a draft");
        QVERIFY2(counter.rollback_blocks > 0, "no rollback crossed a block boundary");
        QCOMPARE(counter.counts[events::EventKind::draft_verified] > 0, true);
    }
    if (tier != 0) {
        qInfo("%lld blocks loaded back from the offload tier, %lld let go by it",
              static_cast<long long>(backend.blocks_loaded),
              static_cast<long long>(counter.counts[events::EventKind::tier_dropped]));
        QVERIFY2(backend.blocks_loaded > 0, "no block came back from the tier");
        QCOMPARE(counter.counts[events::EventKind::block_reloaded], backend.blocks_loaded);
        QVERIFY2(counter.counts[events::EventKind::tier_dropped] > 0,
                 "the tier never filled: the test does not test a full tier");
    }
    if (prefix_caching) {
        QVERIFY(hits > 0);
    } else {
        QCOMPARE(hits, std::int64_t{0});
    }
    if (blocks <= 12) {
        QVERIFY2(counter.counts[events::EventKind::request_preempted] > 0,
                 "the tiny pool never preempted: the test does not test preemption");
    }
}

void TestEngineSoak::impossible_requests_are_rejected_with_a_reason() {
    CheckingBackend backend(4, 4);
    sched::EngineConfig config;
    config.scheduler.max_num_batched_tokens = 8;
    config.scheduler.chunked_prefill = false;
    sched::LlmEngine engine(backend, config);
    sched::RequestSpec too_long;
    too_long.prompt.assign(16, 5); // 16 + 1 tokens > 16 slots
    const std::int64_t a = engine.add_request(too_long);
    sched::RequestSpec over_budget;
    over_budget.prompt.assign(10, 5);
    const std::int64_t b = engine.add_request(over_budget);
    const std::int64_t c = engine.add_request(sched::RequestSpec{});
    sched::RequestSpec bad_sampling;
    bad_sampling.prompt = {1, 2};
    bad_sampling.sampling.min_p = 2.0f;
    const std::int64_t d = engine.add_request(bad_sampling);
    for (const std::int64_t id : {a, b, c, d}) {
        QCOMPARE(engine.request(id).state, sched::RequestState::rejected);
        qInfo("rejected: %s", engine.request(id).finish_reason.c_str());
    }
    QVERIFY(engine.request(a).finish_reason.find("more than the whole cache") != std::string::npos);
    QVERIFY(engine.request(b).finish_reason.find("chunked prefill is off") != std::string::npos);
    QVERIFY(!engine.has_unfinished());
}

QTEST_GUILESS_MAIN(TestEngineSoak)
#include "tst_engine_soak.moc"
