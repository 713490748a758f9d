// The hybrid KV cache (engine/kv/kv_groups.h, kv_manager.h): layers grouped
// as vLLM groups them; sliding-window groups letting go of the blocks their
// window left; prefix hits only where every group can serve them, checked
// under random workloads against an index rebuilt from the events; and the
// engine on the tiny Gemma 3 (a window of 8) giving the same tokens with a
// hybrid cache as with a plain one, in fewer blocks.
#include "engine/cpu/cpu_backend.h"
#include "engine/events/typed_events.h"
#include "engine/kv/block_hash.h"
#include "engine/kv/kv_groups.h"
#include "engine/kv/kv_manager.h"
#include "engine/model/llama_model.h"
#include "engine/runner/throttled_backend.h"
#include "engine/sched/llm_engine.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include <QTest>

using namespace kvscope;

namespace {

std::vector<std::int32_t> tokens(int n, int first = 100) {
    std::vector<std::int32_t> t(static_cast<std::size_t>(n));
    std::iota(t.begin(), t.end(), first);
    return t;
}

struct Recorder final : events::EventSink {
    std::vector<events::EngineEvent> events;
    void on_event(const events::EngineEvent& e) override { events.push_back(e); }
    int freed_leaving_window() const {
        return static_cast<int>(std::count_if(events.begin(), events.end(), [](const auto& e) {
            return e.kind == events::EventKind::block_freed &&
                   events::as<events::BlockFreed>(e).left_window;
        }));
    }
};

std::vector<std::int32_t> gemma_270m_windows() {
    std::vector<std::int32_t> windows(18, 512);
    for (int l = 5; l < 18; l += 6) {
        windows[static_cast<std::size_t>(l)] = 0;
    }
    return windows;
}

// Admits `t`, computes all of it and lets the windows move, as a step does.
kv::PrefixMatch run(kv::KvManager& kv, kv::SequenceBlocks& seq, const std::vector<std::int32_t>& t,
                    std::int64_t id) {
    const std::optional<kv::PrefixMatch> match = kv.admit(id, seq, t);
    if (!match) {
        qFatal("admit failed");
    }
    seq.length = static_cast<std::int32_t>(t.size());
    kv.cache_full_blocks(id, seq, t, seq.length);
    kv.release_outside_window(id, seq);
    return *match;
}

std::string check(const kv::KvManager& kv, std::initializer_list<const kv::SequenceBlocks*> seqs) {
    const std::vector<const kv::SequenceBlocks*> live(seqs);
    return kv.check(live);
}

QString data_path(const QString& name) {
    return QStringLiteral(KVSCOPE_SOURCE_DIR "/tests/engine/data/") + name;
}

} // namespace

class TestHybridKv : public QObject {
    Q_OBJECT

private slots:
    void layers_are_grouped_as_vllm_groups_them();
    void sliding_groups_let_go_of_what_left_the_window();
    void the_checker_catches_a_block_held_outside_its_window();
    void a_hit_needs_only_the_windows_blocks();
    void a_hit_needs_every_groups_blocks();
    void admission_without_prefix_caching_counts_every_group();
    void a_hybrid_cache_takes_a_prompt_chunk_by_chunk();
    void peak_blocks_bound_every_step_data();
    void peak_blocks_bound_every_step();
    void random_workloads_keep_hybrid_invariants_data();
    void random_workloads_keep_hybrid_invariants();
    void the_engine_on_gemma_matches_a_plain_cache();
};

void TestHybridKv::layers_are_grouped_as_vllm_groups_them() {
    // Gemma 3 270M: 3 global layers and 15 sliding ones, so blocks of 3
    // layers: one global group and five sliding groups.
    const kv::KvGroupLayout gemma = kv::KvGroupLayout::for_windows(gemma_270m_windows());
    QCOMPARE(gemma.layers_per_block, 3);
    QCOMPARE(gemma.group_count(), 6);
    QCOMPARE(gemma.groups[0].window, 0);
    QCOMPARE(gemma.groups[0].layers, (std::vector<int>{5, 11, 17}));
    QCOMPARE(gemma.groups[1].window, 512);
    QCOMPARE(gemma.groups[1].layers, (std::vector<int>{0, 1, 2}));
    QCOMPARE(gemma.groups[2].layers, (std::vector<int>{3, 4, 6})); // across a global layer
    QCOMPARE(gemma.groups[5].layers, (std::vector<int>{14, 15, 16}));
    QCOMPARE(gemma.group_of[11], 0);
    QCOMPARE(gemma.slot_of[11], 1);
    QCOMPARE(gemma.group_of[6], 2);
    QCOMPARE(gemma.slot_of[6], 2);

    // Gemma 3 1B: 4 global of 26, so the last sliding group of 22 holds 2.
    std::vector<std::int32_t> one_b(26, 512);
    for (int l = 5; l < 26; l += 6) {
        one_b[static_cast<std::size_t>(l)] = 0;
    }
    const kv::KvGroupLayout b1 = kv::KvGroupLayout::for_windows(one_b);
    QCOMPARE(b1.layers_per_block, 4);
    QCOMPARE(b1.group_count(), 7);
    QCOMPARE(b1.groups.back().layers.size(), std::size_t{2});

    // Kinds within a quarter of each other (6 < 1.25 x 5): the larger count
    // sets the size, and the smaller kind's group has a slot to spare.
    std::vector<std::int32_t> even(11, 0);
    std::fill(even.begin(), even.begin() + 6, 64);
    const kv::KvGroupLayout near = kv::KvGroupLayout::for_windows(even);
    QCOMPARE(near.layers_per_block, 6);
    QCOMPARE(near.group_count(), 2);
    // Further apart (6 >= 1.25 x 4): the smaller count does.
    even.pop_back();
    QCOMPARE(kv::KvGroupLayout::for_windows(even).layers_per_block, 4);

    // One kind: one group of every layer, the plain cache.
    const kv::KvGroupLayout plain = kv::KvGroupLayout::single(30);
    QCOMPARE(plain.group_count(), 1);
    QCOMPARE(plain.layers_per_block, 30);
    QVERIFY(!plain.hybrid());
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, kv::KvGroupLayout::for_windows({}));
}

void TestHybridKv::sliding_groups_let_go_of_what_left_the_window() {
    Recorder recorder;
    kv::KvManager kv(20, 16, true, kv::CachePolicy::lru, {0, 32});
    kv.set_event_sink(&recorder);
    kv::SequenceBlocks seq;
    run(kv, seq, tokens(80), 0);
    // The next query is at 80 and attends from 49: blocks 0-2 (tokens 0-47)
    // of the window group are behind it; the global group keeps all five.
    QCOMPARE(seq.groups(), 2);
    QCOMPARE(seq.table(1)[0], kv::kNoBlock);
    QCOMPARE(seq.table(1)[2], kv::kNoBlock);
    QVERIFY(seq.table(1)[3] != kv::kNoBlock);
    QVERIFY(std::none_of(seq.block_table.begin(), seq.block_table.end(),
                         [](kv::BlockId b) { return b == kv::kNoBlock; }));
    QCOMPARE(recorder.freed_leaving_window(), 3);
    const kv::KvManagerStats stats = kv.stats();
    QCOMPARE(stats.used_by_group, (std::vector<int>{5, 2}));
    QCOMPARE(stats.cached_by_group, (std::vector<int>{0, 3})); // full: kept for prefix hits
    QCOMPARE(stats.used, 7);
    QCOMPARE(check(kv, {&seq}), std::string());

    // Decoding on: one more block a step in each group, one less behind.
    for (int t = 80; t < 96; ++t) {
        QVERIFY(kv.grow(0, seq, t + 1));
        seq.length = t + 1;
        kv.release_outside_window(0, seq);
        QCOMPARE(check(kv, {&seq}), std::string());
    }
    QCOMPARE(kv.stats().used_by_group, (std::vector<int>{6, 2}));
    kv.release(0, seq);
    QCOMPARE(kv.stats().used, 0);
    QCOMPARE(check(kv, {}), std::string());
}

void TestHybridKv::the_checker_catches_a_block_held_outside_its_window() {
    kv::KvManager kv(20, 16, false, kv::CachePolicy::lru, {0, 32});
    kv::SequenceBlocks seq;
    QVERIFY(kv.grow(0, seq, 80));
    seq.length = 80; // computed, but the window group was not told
    const std::string problem = check(kv, {&seq});
    QVERIFY2(problem.find("outside its window") != std::string::npos, problem.c_str());
    kv.release_outside_window(0, seq);
    QCOMPARE(check(kv, {&seq}), std::string());
    // A block the attention still reads missing.
    std::swap(seq.table(1)[2], seq.table(1)[3]);
    QVERIFY(!check(kv, {&seq}).empty());
}

void TestHybridKv::a_hit_needs_only_the_windows_blocks() {
    kv::KvManager kv(12, 16, true, kv::CachePolicy::lru, {0, 32});
    kv::SequenceBlocks a;
    run(kv, a, tokens(80), 0);
    QCOMPARE(kv.stats().cached_by_group[1], 3);
    // B shares 60 tokens: a hit of three blocks, whose first computed token
    // (48) attends from 17, so the window group needs its blocks 1 and 2
    // (cached when A's window left them), not block 0.
    std::vector<std::int32_t> b_prompt = tokens(60);
    b_prompt[59] = 7;
    kv::SequenceBlocks b;
    const std::optional<kv::PrefixMatch> match = kv.admit(1, b, b_prompt);
    QVERIFY(match);
    QCOMPARE(match->hit_tokens, 48);
    QCOMPARE(b.table(1)[0], kv::kNoBlock);
    QVERIFY(b.table(1)[1] != kv::kNoBlock);
    QCOMPARE(b.block_table[0], a.block_table[0]); // shared with A, still running
    QCOMPARE(kv.ref_count(b.block_table[0]), 2);
    QCOMPARE(check(kv, {&a, &b}), std::string());
}

void TestHybridKv::a_hit_needs_every_groups_blocks() {
    kv::KvManager kv(12, 16, true, kv::CachePolicy::lru, {0, 32});
    kv::SequenceBlocks a;
    run(kv, a, tokens(80), 0);
    kv.release(0, a);
    // C, unrelated, takes the two free blocks and reclaims the four cached
    // longest: the window group's 0-2 (let go first) and A's tail.
    kv::SequenceBlocks c;
    run(kv, c, tokens(33, 5000), 2);
    const std::vector<std::int32_t> b_prompt = tokens(60);
    // The global group still has A's first three blocks, but the window
    // group has none of the blocks a hit would need: no hit at all.
    QCOMPARE(kv.stats().cached_by_group[0], 4);
    QCOMPARE(kv.match_prefix(b_prompt).hit_tokens, 0);
    kv::KvManager plain(12, 16, true);
    kv::SequenceBlocks plain_a;
    run(plain, plain_a, tokens(80), 0);
    plain.release(0, plain_a);
    QCOMPARE(plain.match_prefix(b_prompt).hit_tokens, 48); // what one group alone would hit
}

void TestHybridKv::admission_without_prefix_caching_counts_every_group() {
    // 40 tokens: 3 blocks in each of 2 groups. 5 blocks cannot take it; the
    // request waits (nullopt) and nothing is taken.
    kv::KvManager small(5, 16, false, kv::CachePolicy::lru, {0, 32});
    kv::SequenceBlocks seq;
    QVERIFY(!small.admit(0, seq, tokens(40)));
    QCOMPARE(small.stats().free, 5);
    QVERIFY(seq.block_table.empty());
    kv::KvManager roomy(6, 16, false, kv::CachePolicy::lru, {0, 32});
    const std::optional<kv::PrefixMatch> match = roomy.admit(0, seq, tokens(40));
    QVERIFY(match);
    QCOMPARE(match->hit_tokens, 0);
    QCOMPARE(seq.table(1).size(), std::size_t{3});
    QCOMPARE(roomy.stats().free, 0);
    QCOMPARE(check(roomy, {&seq}), std::string());
}

void TestHybridKv::a_hybrid_cache_takes_a_prompt_chunk_by_chunk() {
    // A 200-token prompt in chunks of 48, blocks of 16, a window of 32: the
    // hybrid cache takes the first chunk's 3 blocks per group at admission,
    // then a chunk's blocks per step, and its window group never holds more
    // than the window and a chunk (5 blocks) while the global one grows to
    // 13. A plain cache still reserves the whole prompt at admission.
    kv::KvManager kv(40, 16, true, kv::CachePolicy::lru, {0, 32});
    kv::SequenceBlocks seq;
    const std::vector<std::int32_t> prompt = tokens(200);
    QVERIFY(kv.admit(0, seq, prompt, 0, 48));
    QCOMPARE(seq.table(0).size(), std::size_t{3});
    QCOMPARE(seq.table(1).size(), std::size_t{3});
    std::size_t window_peak = 0;
    for (std::int32_t done = 0; done < 200;) {
        const std::int32_t next = std::min(200, done + 48);
        QVERIFY(kv.grow(0, seq, next));
        const auto held = static_cast<std::size_t>(
            std::count_if(seq.table(1).begin(), seq.table(1).end(),
                          [](kv::BlockId b) { return b != kv::kNoBlock; }));
        window_peak = std::max(window_peak, held);
        seq.length = next;
        kv.cache_full_blocks(0, seq, prompt, next);
        kv.release_outside_window(0, seq);
        QCOMPARE(check(kv, {&seq}), std::string());
        done = next;
    }
    QCOMPARE(seq.table(0).size(), std::size_t{13});
    QVERIFY2(window_peak <= 5, qPrintable(QString("window group held %1 blocks").arg(window_peak)));

    // Admission waits for room for the prompt at its busiest step: in 20
    // blocks a 200-token prompt fits in steps of 16 (13 global blocks and 4
    // of the window's) but not in steps of 256 (13 and 13), however small
    // its first chunk.
    kv::KvManager tight(20, 16, true, kv::CachePolicy::lru, {0, 32});
    kv::SequenceBlocks waits;
    QVERIFY(!tight.admit(0, waits, prompt, 0, 16, 256));
    QCOMPARE(tight.stats().free, 20);
    QVERIFY(tight.admit(0, waits, prompt, 0, 16, 16));
    QCOMPARE(waits.table(0).size(), std::size_t{1});

    kv::KvManager plain(40, 16, true);
    kv::SequenceBlocks whole;
    QVERIFY(plain.admit(0, whole, prompt, 0, 48));
    QCOMPARE(whole.block_table.size(), std::size_t{13});
}

void TestHybridKv::peak_blocks_bound_every_step_data() {
    QTest::addColumn<int>("hit");
    QTest::addColumn<int>("step");
    QTest::addColumn<int>("length");
    for (const int step : {1, 5, 16, 48}) {
        for (const int hit : {0, 16, 48}) {
            QTest::addRow("hit %d, step %d", hit, step) << hit << step << 300;
        }
    }
}

void TestHybridKv::peak_blocks_bound_every_step() {
    // A sequence computed `step` tokens at a time after a hit of `hit`
    // tokens, with a global group and windows of 32 and 20 (one not a
    // multiple of the block): the blocks it holds after each step's growth,
    // before the window moves, never exceed peak_blocks() for its length,
    // and a cache of tokens_per_sequence() tokens holds it alone.
    QFETCH(int, hit);
    QFETCH(int, step);
    QFETCH(int, length);
    const std::vector<std::int32_t> windows{0, 32, 20};
    const std::vector<std::int32_t> prompt = tokens(length);
    // A first sequence puts the hit's blocks in the cache.
    kv::KvManager kv(200, 16, true, kv::CachePolicy::lru, windows);
    if (hit > 0) {
        kv::SequenceBlocks first;
        run(kv, first, std::vector<std::int32_t>(prompt.begin(), prompt.begin() + hit + 1), 0);
        kv.release(0, first);
    }
    kv::SequenceBlocks seq;
    const std::optional<kv::PrefixMatch> match = kv.admit(1, seq, prompt, 0, step);
    QVERIFY(match);
    QCOMPARE(match->hit_tokens, hit);
    std::int64_t peak = 0;
    for (std::int32_t done = hit; done < length;) {
        const std::int32_t next = std::min(length, done + step);
        QVERIFY(kv.grow(1, seq, next));
        std::int64_t held = 0;
        for (int g = 0; g < seq.groups(); ++g) {
            held += std::count_if(seq.table(g).begin(), seq.table(g).end(),
                                  [](kv::BlockId b) { return b != kv::kNoBlock; });
        }
        QVERIFY2(held <= kv.peak_blocks(next, step),
                 qPrintable(QString("%1 blocks held at %2 tokens, bound %3")
                                .arg(held)
                                .arg(next)
                                .arg(kv.peak_blocks(next, step))));
        peak = std::max(peak, held);
        seq.length = next;
        kv.cache_full_blocks(1, seq, prompt, next);
        kv.release_outside_window(1, seq);
        done = next;
    }
    QVERIFY(peak <= kv.peak_blocks(length, step));
    // The capacity: a pool of exactly the bound's blocks holds a sequence
    // of tokens_per_sequence() tokens, computed from nothing.
    const auto bound = static_cast<int>(kv.peak_blocks(length, step));
    kv::KvManager exact(bound, 16, false, kv::CachePolicy::lru, windows);
    QVERIFY(exact.tokens_per_sequence(step) >= length);
    kv::KvManager tight(bound - 1, 16, false, kv::CachePolicy::lru, windows);
    QVERIFY(tight.tokens_per_sequence(step) < length);
    const auto capacity = static_cast<std::int32_t>(exact.tokens_per_sequence(step));
    kv::SequenceBlocks alone;
    QVERIFY(exact.admit(2, alone, tokens(capacity), 0, step));
    for (std::int32_t done = 0; done < capacity;) {
        const std::int32_t next = std::min(capacity, done + step);
        QVERIFY2(exact.grow(2, alone, next), "a sequence of the capacity must fit alone");
        alone.length = next;
        exact.release_outside_window(2, alone);
        done = next;
    }
    // A plain cache holds every block of a sequence, and so does a single
    // group with a window (all layers slide: no table of its own to let go).
    QCOMPARE(kv::KvManager(20, 16, false).tokens_per_sequence(step), std::int64_t{320});
    QCOMPARE(kv::KvManager(20, 16, false, kv::CachePolicy::lru, {32}).tokens_per_sequence(step),
             std::int64_t{320});
}

void TestHybridKv::random_workloads_keep_hybrid_invariants_data() {
    QTest::addColumn<int>("policy");
    QTest::addColumn<int>("seed");
    for (int seed = 1; seed <= 3; ++seed) {
        QTest::addRow("lru-%d", seed) << static_cast<int>(kv::CachePolicy::lru) << seed;
        QTest::addRow("lfu-%d", seed) << static_cast<int>(kv::CachePolicy::lfu) << seed;
    }
}

void TestHybridKv::random_workloads_keep_hybrid_invariants() {
    // Prompts from a few shared prefixes, admitted, decoded and released in
    // random order on a small pool with a global group and two windows (one
    // not a multiple of the block size). After every operation the manager's
    // invariants hold (no block of a sliding group outside its window,
    // tallies per group); every hit equals the longest that the blocks
    // cached per group, as the events tell them, can serve; every hit block
    // holds its group's copy of that prefix block; and blocks let go by a
    // window are reused.
    QFETCH(int, policy);
    QFETCH(int, seed);
    constexpr int kBlock = 4;
    const std::vector<std::int32_t> windows{0, 6, 9};
    Recorder recorder;
    kv::KvManager kv(72, kBlock, true, static_cast<kv::CachePolicy>(policy), windows);
    kv.set_event_sink(&recorder);
    std::mt19937 rng(static_cast<std::uint32_t>(seed));

    // The events' view: which (group, chain hash) each block is cached
    // under, and the blocks a window let go.
    std::map<kv::BlockId, std::pair<int, kv::BlockHash>> content;
    std::set<kv::BlockId> left_window;
    int reused_after_window = 0;
    std::size_t seen = 0;
    const auto follow_events = [&] {
        for (; seen < recorder.events.size(); ++seen) {
            const events::EngineEvent& e = recorder.events[seen];
            switch (e.kind) {
            case events::EventKind::block_cached: {
                const auto cached = events::as<events::BlockCached>(e);
                content[cached.block] = {cached.group, cached.hash};
                break;
            }
            case events::EventKind::block_evicted:
                content.erase(e.block);
                break;
            case events::EventKind::block_allocated:
                reused_after_window += left_window.erase(e.block) > 0 ? 1 : 0;
                break;
            case events::EventKind::block_freed:
                if (events::as<events::BlockFreed>(e).left_window) {
                    left_window.insert(e.block);
                }
                break;
            default:
                break;
            }
        }
    };
    const auto chain = [](const std::vector<std::int32_t>& prompt, int blocks) {
        std::vector<kv::BlockHash> hashes;
        kv::BlockHash parent = kv::kRootBlockHash;
        for (int b = 0; b < blocks; ++b) {
            parent = kv::hash_block(
                parent, std::span(prompt).subspan(static_cast<std::size_t>(b) * kBlock, kBlock), 0);
            hashes.push_back(parent);
        }
        return hashes;
    };
    // The longest hit the cached blocks serve, from the events' view alone.
    const auto expected_hit = [&](const std::vector<std::int32_t>& prompt) {
        const int hittable = static_cast<int>(prompt.size() - 1) / kBlock;
        const std::vector<kv::BlockHash> hashes = chain(prompt, hittable);
        std::set<std::pair<int, kv::BlockHash>> cached;
        for (const auto& [block, entry] : content) {
            cached.insert(entry);
        }
        for (int hit = hittable; hit > 0; --hit) {
            bool served = true;
            for (int g = 0; g < static_cast<int>(windows.size()) && served; ++g) {
                const std::int32_t w = windows[static_cast<std::size_t>(g)];
                const int first = w == 0 ? 0 : std::max(0, hit * kBlock - w + 1) / kBlock;
                for (int b = first; b < hit && served; ++b) {
                    served = cached.contains({g, hashes[static_cast<std::size_t>(b)]});
                }
            }
            if (served) {
                return hit * kBlock;
            }
        }
        return 0;
    };

    struct Live {
        kv::SequenceBlocks blocks;
        std::vector<std::int32_t> tokens;
    };
    std::map<std::int64_t, Live> live;
    std::int64_t next_id = 0;
    int hits = 0;
    int hits_past_a_window = 0;
    for (int op = 0; op < 2500; ++op) {
        follow_events();
        if (live.size() < 5 && rng() % 3 != 0) {
            std::vector<std::int32_t> prompt =
                tokens(static_cast<int>(rng() % 30), 1000 * static_cast<int>(rng() % 3));
            const int tail = 1 + static_cast<int>(rng() % 10);
            for (int t = 0; t < tail; ++t) {
                prompt.push_back(static_cast<std::int32_t>(rng() % 3));
            }
            const int expected = expected_hit(prompt);
            QCOMPARE(kv.match_prefix(prompt).hit_tokens, expected);
            Live seq{.blocks = {}, .tokens = prompt};
            const std::optional<kv::PrefixMatch> match = kv.admit(next_id, seq.blocks, prompt);
            if (match) {
                QCOMPARE(match->hit_tokens, expected);
                const int hit_blocks = match->hit_tokens / kBlock;
                const std::vector<kv::BlockHash> hashes = chain(prompt, hit_blocks);
                for (int g = 0; g < seq.blocks.groups(); ++g) {
                    for (int b = 0; b < hit_blocks; ++b) {
                        const kv::BlockId block = seq.blocks.table(g)[static_cast<std::size_t>(b)];
                        if (block == kv::kNoBlock) {
                            continue;
                        }
                        QVERIFY2(content.contains(block), "a hit on a block nobody cached");
                        QVERIFY2(content[block] ==
                                     std::make_pair(g, hashes[static_cast<std::size_t>(b)]),
                                 "a hit block holds another group's or another prefix's K/V");
                    }
                }
                hits += match->hit_tokens > 0 ? 1 : 0;
                hits_past_a_window += match->hit_tokens > 9 ? 1 : 0;
                seq.blocks.length = static_cast<std::int32_t>(prompt.size());
                kv.cache_full_blocks(next_id, seq.blocks, prompt, seq.blocks.length);
                kv.release_outside_window(next_id, seq.blocks);
                live.emplace(next_id, std::move(seq));
            }
            ++next_id;
        } else if (!live.empty()) {
            auto it = live.begin();
            std::advance(it, static_cast<long>(rng() % live.size()));
            Live& seq = it->second;
            if (rng() % 3 != 0) {
                const int more = 1 + static_cast<int>(rng() % 6);
                const auto length = static_cast<std::int32_t>(seq.tokens.size()) + more;
                if (kv.grow(it->first, seq.blocks, length)) {
                    for (int t = 0; t < more; ++t) {
                        seq.tokens.push_back(static_cast<std::int32_t>(rng() % 3));
                    }
                    seq.blocks.length = length;
                    kv.cache_full_blocks(it->first, seq.blocks, seq.tokens, length);
                    kv.release_outside_window(it->first, seq.blocks);
                }
            } else {
                kv.release(it->first, seq.blocks);
                live.erase(it);
            }
        }
        std::vector<const kv::SequenceBlocks*> tables;
        for (const auto& [id, seq] : live) {
            tables.push_back(&seq.blocks);
        }
        const std::string problem = kv.check(tables);
        QVERIFY2(problem.empty(), problem.c_str());
    }
    qInfo("%d hits, %d past a window; %d blocks reused after a window let them go", hits,
          hits_past_a_window, reused_after_window);
    QVERIFY2(hits > 100, "the workload should share prefixes");
    QVERIFY2(hits_past_a_window > 20, "hits longer than a window should happen");
    QVERIFY2(reused_after_window > 50, "blocks a window let go should serve others");
}

void TestHybridKv::the_engine_on_gemma_matches_a_plain_cache() {
    // Three requests sharing a prefix, 40-token prompts and 16 tokens each,
    // through the engine on the tiny Gemma 3 (window 8 in five layers of
    // six, block size 4): the same tokens with either cache, while the
    // hybrid one holds the window groups' blocks only.
    const auto model = model::LlamaModel::load(data_path("tiny_gemma3.gguf").toStdString());
    // `throttled`: through --throttle-ms's wrapper, which must pass the
    // groups on (without them the engine would build one table a sequence).
    const auto serve = [&](bool hybrid, bool throttled, Recorder& recorder,
                           std::int64_t& peak_layer_blocks) {
        cpu::CpuBackendOptions options;
        options.num_blocks = 512;
        options.block_size = 4;
        options.threads = 1;
        options.cache_format = {kv::KvFormat::f32, kv::KvFormat::f32};
        options.hybrid_kv = hybrid;
        std::unique_ptr<runner::Backend> backend =
            std::make_unique<cpu::CpuBackend>(model, options);
        if (throttled) {
            backend = std::make_unique<runner::ThrottledBackend>(std::move(backend), 0);
        }
        sched::EngineConfig config;
        sched::LlmEngine engine(*backend, config, &recorder);
        std::vector<std::int64_t> ids;
        for (int r = 0; r < 3; ++r) {
            sched::RequestSpec spec;
            spec.prompt = tokens(40, 3);
            spec.prompt[39] = 50 + r;
            spec.max_tokens = 16;
            spec.ignore_eos = true;
            ids.push_back(engine.add_request(std::move(spec)));
        }
        peak_layer_blocks = 0;
        while (engine.has_unfinished()) {
            engine.step();
            const std::string problem = engine.check_invariants();
            if (!problem.empty()) {
                qFatal("%s", problem.c_str());
            }
            peak_layer_blocks = std::max<std::int64_t>(peak_layer_blocks,
                                                       std::int64_t{engine.kv().stats().used} *
                                                           backend->kv_groups().layers_per_block);
        }
        std::vector<std::vector<std::int32_t>> outputs;
        for (const std::int64_t id : ids) {
            outputs.push_back(engine.request(id).tokens);
        }
        return outputs;
    };
    Recorder hybrid_events;
    Recorder plain_events;
    std::int64_t hybrid_peak = 0;
    std::int64_t plain_peak = 0;
    const auto hybrid = serve(true, false, hybrid_events, hybrid_peak);
    const auto plain = serve(false, false, plain_events, plain_peak);
    QCOMPARE(hybrid, plain);
    Recorder throttled_events;
    std::int64_t throttled_peak = 0;
    QCOMPARE(serve(true, true, throttled_events, throttled_peak), hybrid);
    QCOMPARE(throttled_peak, hybrid_peak);
    QVERIFY(hybrid_events.freed_leaving_window() > 0);
    QCOMPARE(plain_events.freed_leaving_window(), 0);
    // Per layer, blocks of 4 tokens at the peak: the plain cache holds 6
    // layers x 14 blocks a request; the hybrid one the global layer's 14 and
    // 3 or 4 for each window layer.
    qInfo("peak layer-blocks in use: hybrid %lld, plain %lld", static_cast<long long>(hybrid_peak),
          static_cast<long long>(plain_peak));
    QVERIFY2(hybrid_peak * 2 < plain_peak, "the hybrid cache should hold well under half");
}

QTEST_GUILESS_MAIN(TestHybridKv)
#include "tst_hybrid_kv.moc"
