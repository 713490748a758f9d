// The KV block manager on its own: prefix hits, the prompt_len - 1 limit,
// sharing and ref counts, LRU and LFU reuse of cached blocks, the tail-first
// release order, shared prefixes shorter than a block, its invariants under
// random workloads, and its invariant checker catching what it should; with
// a second tier, blocks saved when reclaimed (or when cached, under
// write-through) and prefix hits there loaded back, a lost one computed.
#include "engine/kv/kv_manager.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <random>

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
    int count(events::EventKind kind) const {
        return static_cast<int>(std::count_if(events.begin(), events.end(),
                                              [kind](const auto& e) { return e.kind == kind; }));
    }
};

// Admits, marks everything computed, and registers the full blocks.
kv::PrefixMatch run(kv::KvManager& kv, kv::SequenceBlocks& seq, const std::vector<std::int32_t>& t,
                    std::int64_t id = 0) {
    const auto match = kv.admit(id, seq, t);
    if (!match) {
        qFatal("admit failed");
    }
    seq.length = static_cast<std::int32_t>(t.size());
    kv.cache_full_blocks(id, seq, t, seq.length);
    return *match;
}

// A tier that remembers which hashes it holds, and can be told to lose them.
struct FakeTier final : kv::TierMover {
    std::map<kv::BlockHash, kv::BlockId> saved; // hash -> the block it came from
    std::vector<kv::BlockHash> loaded;
    bool lose_on_reload = false;
    bool full = false;
    bool offload(std::int64_t, kv::BlockId block, kv::BlockHash hash) override {
        if (full) {
            return false;
        }
        saved[hash] = block;
        return true;
    }
    bool reload(std::int64_t, kv::BlockId, kv::BlockHash hash) override {
        if (lose_on_reload || saved.count(hash) == 0) {
            return false;
        }
        loaded.push_back(hash);
        return true;
    }
    void touch(kv::BlockHash) override {}
};

// A tier of fixed capacity that drops its least recently used hash when
// full and tells the KV manager, as the engine's OffloadTier does.
struct LruTier final : kv::TierMover {
    kv::KvManager* manager = nullptr;
    std::size_t capacity = 0;
    std::vector<kv::BlockHash> order; // front: most recently used
    bool offload(std::int64_t, kv::BlockId, kv::BlockHash hash) override {
        if (order.size() == capacity) {
            manager->forget_tier_hash(order.back());
            order.pop_back();
        }
        order.insert(order.begin(), hash);
        return true;
    }
    bool reload(std::int64_t, kv::BlockId, kv::BlockHash hash) override {
        const auto it = std::find(order.begin(), order.end(), hash);
        if (it == order.end()) {
            return false;
        }
        touch(hash);
        return true;
    }
    void touch(kv::BlockHash hash) override {
        const auto it = std::find(order.begin(), order.end(), hash);
        if (it != order.end()) {
            order.erase(it);
            order.insert(order.begin(), hash);
        }
    }
};

} // namespace

class TestKvManager : public QObject {
    Q_OBJECT

private slots:
    void tier_keeps_what_the_pool_reclaims();
    void tier_write_through_saves_when_cached();
    void tier_hits_outlive_their_own_admission();
    void tier_loss_that_leaves_too_few_blocks_waits();
    void hit_covers_whole_blocks_only();
    void hit_leaves_the_last_token();
    void shared_blocks_count_references();
    void cached_blocks_survive_until_needed();
    void tail_blocks_are_evicted_first();
    void shared_prefix_shorter_than_a_block_is_reported();
    void extra_key_separates_caches();
    void prefix_caching_off_never_hits();
    void admit_is_all_or_nothing();
    void checker_catches_corruption();
    void block_queue_is_fifo_with_removal();
    void lfu_keeps_the_most_used_prefix();
    void lfu_breaks_ties_by_release_order();
    void random_workloads_keep_invariants_data();
    void random_workloads_keep_invariants();
};

void TestKvManager::hit_covers_whole_blocks_only() {
    kv::KvManager kv(16, 4, true);
    kv::SequenceBlocks a;
    run(kv, a, tokens(10)); // blocks [0..4) [4..8) full, [8..10) partial
    kv::SequenceBlocks b;
    const auto match = *kv.admit(1, b, tokens(12));
    QCOMPARE(match.hit_tokens, 8);
    QCOMPARE(match.blocks_hit, 2);
    QCOMPARE(match.blocks_missed, 1);
    QCOMPARE(b.length, 8);
    QCOMPARE(b.block_table[0], a.block_table[0]);
    QCOMPARE(b.block_table[1], a.block_table[1]);
    QVERIFY(b.block_table[2] != a.block_table[2]);
    const kv::SequenceBlocks* live[] = {&a, &b};
    QCOMPARE(kv.check(live), std::string());
}

void TestKvManager::hit_leaves_the_last_token() {
    kv::KvManager kv(16, 4, true);
    kv::SequenceBlocks a;
    run(kv, a, tokens(8));
    kv::SequenceBlocks b;
    // The same 8 tokens: only the first block may hit, so token 8 is computed.
    const auto match = *kv.admit(1, b, tokens(8));
    QCOMPARE(match.hit_tokens, 4);
    QCOMPARE(match.blocks_missed, 1);
}

void TestKvManager::shared_blocks_count_references() {
    kv::KvManager kv(16, 4, true);
    kv::SequenceBlocks a, b, c;
    run(kv, a, tokens(9));
    run(kv, b, tokens(9), 1);
    run(kv, c, tokens(9), 2);
    QCOMPARE(kv.ref_count(a.block_table[0]), 3);
    QCOMPARE(kv.ref_count(a.block_table[2]), 1);
    kv.release(0, a);
    QCOMPARE(kv.ref_count(b.block_table[0]), 2);
    const kv::SequenceBlocks* live[] = {&b, &c};
    QCOMPARE(kv.check(live), std::string());
}

void TestKvManager::cached_blocks_survive_until_needed() {
    kv::KvManager kv(4, 4, true);
    Recorder recorder;
    kv.set_event_sink(&recorder);
    kv::SequenceBlocks a;
    run(kv, a, tokens(9)); // 3 blocks, 2 of them full and cached
    kv.release(0, a);
    QCOMPARE(kv.stats().cached, 2);
    QCOMPARE(kv.stats().free, 2);
    kv::SequenceBlocks b;
    QCOMPARE(kv.admit(1, b, tokens(9))->hit_tokens, 8); // back from the cache
    kv.release(1, b);
    // A different prompt of 4 blocks takes the free ones, then evicts.
    kv::SequenceBlocks c;
    QVERIFY(kv.admit(2, c, tokens(16, 5000)));
    QCOMPARE(recorder.count(events::EventKind::block_evicted), 2);
    QCOMPARE(kv.stats().cached, 0);
    kv::SequenceBlocks d;
    QVERIFY(!kv.admit(3, d, tokens(4)));
    const kv::SequenceBlocks* live[] = {&c, &d};
    QCOMPARE(kv.check(live), std::string());
}

void TestKvManager::tail_blocks_are_evicted_first() {
    kv::KvManager kv(4, 4, true);
    kv::SequenceBlocks a;
    run(kv, a, tokens(13)); // 3 full blocks cached + 1 partial
    kv.release(0, a);
    // Need one block: the evicted one must be the prompt's last full block,
    // so the prefix's head stays hittable.
    kv::SequenceBlocks b;
    QVERIFY(kv.admit(1, b, tokens(4, 9000)));
    kv::SequenceBlocks c;
    QVERIFY(kv.admit(2, c, tokens(4, 7000)));
    kv.release(1, b);
    kv.release(2, c);
    kv::SequenceBlocks probe;
    const kv::PrefixMatch match = kv.match_prefix(tokens(13));
    QCOMPARE(match.hit_tokens, 8); // blocks 0 and 1 survived, block 2 went first
}

void TestKvManager::shared_prefix_shorter_than_a_block_is_reported() {
    kv::KvManager kv(16, 8, true);
    kv::SequenceBlocks a;
    run(kv, a, tokens(16)); // two full blocks
    // Shares the first 8 (a hit) and then 5 more tokens of block 2: too few.
    std::vector<std::int32_t> other = tokens(13);
    other.push_back(1);
    other.push_back(2);
    other.push_back(3);
    other.push_back(4);
    const kv::PrefixMatch match = kv.match_prefix(other);
    QCOMPARE(match.hit_tokens, 8);
    QCOMPARE(match.shared_short_tokens, 5);
    // A 6-token prompt equal to the start of a cached block: no hit at all.
    const kv::PrefixMatch tiny = kv.match_prefix(tokens(6));
    QCOMPARE(tiny.hit_tokens, 0);
    QCOMPARE(tiny.shared_short_tokens, 6);
}

void TestKvManager::extra_key_separates_caches() {
    kv::KvManager kv(16, 4, true);
    kv::SequenceBlocks a;
    QVERIFY(kv.admit(0, a, tokens(9), 1));
    a.length = 9;
    kv.cache_full_blocks(0, a, tokens(9), 9, 1);
    QCOMPARE(kv.match_prefix(tokens(9), 1).hit_tokens, 8);
    QCOMPARE(kv.match_prefix(tokens(9), 2).hit_tokens, 0);
}

void TestKvManager::prefix_caching_off_never_hits() {
    kv::KvManager kv(16, 4, false);
    kv::SequenceBlocks a, b;
    run(kv, a, tokens(9));
    QCOMPARE(run(kv, b, tokens(9), 1).hit_tokens, 0);
    kv.release(0, a);
    QCOMPARE(kv.stats().cached, 0);
    QCOMPARE(kv.stats().free, 13);
}

void TestKvManager::admit_is_all_or_nothing() {
    kv::KvManager kv(3, 4, true);
    kv::SequenceBlocks a;
    QVERIFY(!kv.admit(0, a, tokens(13)));
    QVERIFY(a.block_table.empty());
    QCOMPARE(kv.stats().free, 3);
    QVERIFY(!kv.grow(0, a, 13));
    QVERIFY(a.block_table.empty());
    QVERIFY(kv.grow(0, a, 12));
    QCOMPARE(a.block_table.size(), std::size_t{3});
}

void TestKvManager::checker_catches_corruption() {
    kv::KvManager kv(8, 4, true);
    kv::SequenceBlocks a;
    run(kv, a, tokens(9));
    kv::SequenceBlocks forged = a; // a table nobody accounted for
    const kv::SequenceBlocks* both[] = {&a, &forged};
    QVERIFY(kv.check(both).find("ref count") != std::string::npos);
    const kv::SequenceBlocks* none[] = {&a};
    QCOMPARE(kv.check(none), std::string());
    kv::SequenceBlocks lost = a;
    lost.block_table.pop_back(); // a leaked reference
    const kv::SequenceBlocks* leaked[] = {&lost};
    QVERIFY(!kv.check(leaked).empty());
    kv.release(0, a);
    QVERIFY_THROWS_EXCEPTION(std::logic_error, kv.release(0, forged));
}

void TestKvManager::block_queue_is_fifo_with_removal() {
    kv::BlockQueue queue(6);
    for (const kv::BlockId b : {3, 1, 4, 0, 5}) {
        queue.push_back(b);
    }
    queue.erase(4); // the middle
    queue.erase(3); // the head
    queue.erase(5); // the tail
    QCOMPARE(queue.size(), std::size_t{2});
    QVERIFY(queue.contains(1) && queue.contains(0) && !queue.contains(4));
    queue.push_back(4);
    QCOMPARE(queue.pop_front(), 1);
    QCOMPARE(queue.pop_front(), 0);
    QCOMPARE(queue.pop_front(), 4);
    QVERIFY(queue.empty());
    QVERIFY_THROWS_EXCEPTION(std::logic_error, queue.pop_front());
    queue.push_back(2);
    QVERIFY_THROWS_EXCEPTION(std::logic_error, queue.push_back(2));
    QVERIFY_THROWS_EXCEPTION(std::logic_error, queue.erase(3));
}

void TestKvManager::lfu_keeps_the_most_used_prefix() {
    // Two 2-block prefixes (and a partial block each) in a 6-block pool; A
    // is used three times, then B once, more recently. A new 4-block prompt
    // takes the 2 free blocks and reclaims two: LRU gives up A (released
    // longest ago), LFU gives up B (used least).
    for (const kv::CachePolicy policy : {kv::CachePolicy::lru, kv::CachePolicy::lfu}) {
        kv::KvManager kv(6, 4, true, policy);
        QCOMPARE(kv.cache_policy(), policy);
        const auto a = tokens(9, 100);
        const auto b = tokens(9, 500);
        std::int64_t id = 0;
        for (int i = 0; i < 3; ++i) {
            kv::SequenceBlocks seq;
            run(kv, seq, a, id++);
            kv.release(id, seq);
        }
        kv::SequenceBlocks seq_b;
        run(kv, seq_b, b, id++);
        kv.release(id, seq_b);
        QCOMPARE(kv.stats().cached, 4);
        kv::SequenceBlocks fresh;
        QVERIFY(kv.admit(id, fresh, tokens(16, 9000)));
        const bool lfu = policy == kv::CachePolicy::lfu;
        QCOMPARE(kv.match_prefix(a).hit_tokens, lfu ? 8 : 0);
        QCOMPARE(kv.match_prefix(b).hit_tokens, lfu ? 0 : 8);
        const kv::SequenceBlocks* live[] = {&fresh};
        QCOMPARE(kv.check(live), std::string());
    }
}

void TestKvManager::lfu_breaks_ties_by_release_order() {
    // Equal uses: the earlier release goes first, and within one release the
    // tail before the head (a chain is reclaimed from its end).
    kv::KvManager kv(4, 4, true, kv::CachePolicy::lfu);
    kv::SequenceBlocks a;
    run(kv, a, tokens(13)); // 3 full blocks, 1 partial
    kv.release(0, a);
    kv::SequenceBlocks b;
    QVERIFY(kv.admit(1, b, tokens(4, 9000))); // the freed partial block
    kv::SequenceBlocks c;
    QVERIFY(kv.admit(2, c, tokens(4, 7000))); // reclaims block 2 of the chain
    QCOMPARE(kv.match_prefix(tokens(13)).hit_tokens, 8);
}

void TestKvManager::random_workloads_keep_invariants_data() {
    QTest::addColumn<int>("policy");
    QTest::addColumn<int>("seed");
    for (int seed = 1; seed <= 3; ++seed) {
        QTest::addRow("lru-%d", seed) << static_cast<int>(kv::CachePolicy::lru) << seed;
        QTest::addRow("lfu-%d", seed) << static_cast<int>(kv::CachePolicy::lfu) << seed;
    }
}

void TestKvManager::random_workloads_keep_invariants() {
    // Prompts drawn from a few shared prefixes with random tails, admitted,
    // grown, cached and released in random order on a small pool: after
    // every operation the manager's own invariants hold, and every hit it
    // reports is a prefix some earlier sequence computed.
    QFETCH(int, policy);
    QFETCH(int, seed);
    std::mt19937 rng(static_cast<std::uint32_t>(seed));
    kv::KvManager kv(48, 4, true, static_cast<kv::CachePolicy>(policy));
    struct Live {
        kv::SequenceBlocks blocks;
        std::vector<std::int32_t> tokens;
    };
    std::map<std::int64_t, Live> live;
    std::vector<std::vector<std::int32_t>> computed; // every prompt fully computed
    const auto check = [&] {
        std::vector<const kv::SequenceBlocks*> tables;
        for (const auto& [id, seq] : live) {
            tables.push_back(&seq.blocks);
        }
        const std::string problem = kv.check(tables);
        if (!problem.empty()) {
            QFAIL(problem.c_str());
        }
    };
    std::int64_t next_id = 0;
    int hits = 0;
    for (int op = 0; op < 3000; ++op) {
        if (live.size() < 6 && rng() % 3 != 0) {
            std::vector<std::int32_t> prompt =
                tokens(static_cast<int>(rng() % 13), 1000 * static_cast<int>(rng() % 4));
            const int tail = 1 + static_cast<int>(rng() % 14);
            for (int t = 0; t < tail; ++t) {
                prompt.push_back(static_cast<std::int32_t>(rng() % 3));
            }
            Live seq{.blocks = {}, .tokens = prompt};
            const auto match = kv.admit(next_id, seq.blocks, prompt);
            if (match) {
                if (match->hit_tokens > 0) {
                    ++hits;
                    const auto hit_end = prompt.begin() + match->hit_tokens;
                    const bool seen =
                        std::any_of(computed.begin(), computed.end(), [&](const auto& earlier) {
                            return earlier.size() >= static_cast<std::size_t>(match->hit_tokens) &&
                                   std::equal(prompt.begin(), hit_end, earlier.begin());
                        });
                    QVERIFY2(seen, "a hit on a prefix nobody computed");
                }
                seq.blocks.length = static_cast<std::int32_t>(prompt.size());
                kv.cache_full_blocks(next_id, seq.blocks, prompt, seq.blocks.length);
                computed.push_back(prompt);
                live.emplace(next_id, std::move(seq));
            }
            ++next_id;
        } else if (!live.empty()) {
            auto it = live.begin();
            std::advance(it, static_cast<long>(rng() % live.size()));
            if (rng() % 2 == 0) {
                // Decode a few tokens, caching newly full blocks.
                Live& seq = it->second;
                const int more = 1 + static_cast<int>(rng() % 6);
                const auto length = static_cast<std::int32_t>(seq.tokens.size()) + more;
                if (kv.grow(it->first, seq.blocks, length)) {
                    for (int t = 0; t < more; ++t) {
                        seq.tokens.push_back(static_cast<std::int32_t>(rng() % 3));
                    }
                    seq.blocks.length = length;
                    kv.cache_full_blocks(it->first, seq.blocks, seq.tokens, length);
                    computed.push_back(seq.tokens);
                }
            } else {
                kv.release(it->first, it->second.blocks);
                live.erase(it);
            }
        }
        check();
    }
    QVERIFY2(hits > 100, "the workload should share prefixes");
}

void TestKvManager::tier_keeps_what_the_pool_reclaims() {
    // 4 blocks of 4: A's 12-token prompt leaves 3 cached blocks; B's 16
    // tokens take all 4, reclaiming A's, which go to the tier. A again hits
    // its first 2 blocks (the last token is computed) in the tier.
    kv::KvManager kv(4, 4, true);
    FakeTier tier;
    kv.set_tier(&tier, false);
    Recorder events;
    kv.set_event_sink(&events);
    const auto a = tokens(12, 100);
    kv::SequenceBlocks sa;
    run(kv, sa, a, 1);
    kv.release(1, sa);
    QCOMPARE(kv.tier_blocks(), std::int64_t{0}); // cached in the pool, not yet reclaimed
    kv::SequenceBlocks sb;
    run(kv, sb, tokens(16, 500), 2);
    QCOMPARE(kv.tier_blocks(), std::int64_t{3});
    QCOMPARE(tier.saved.size(), std::size_t{3});
    kv.release(2, sb);
    const kv::PrefixMatch peek = kv.match_prefix(a);
    QCOMPARE(peek.blocks_hit, 2);
    QCOMPARE(peek.tier_blocks_hit, 2);
    kv::SequenceBlocks sa2;
    const kv::PrefixMatch match = run(kv, sa2, a, 3);
    QCOMPARE(match.hit_tokens, 8);
    QCOMPARE(match.tier_blocks_hit, 2);
    QCOMPARE(tier.loaded.size(), std::size_t{2});
    // Loaded blocks are fresh blocks of the request, cached under their hashes.
    int cached_for_3 = 0;
    for (const events::EngineEvent& e : events.events) {
        cached_for_3 += e.kind == events::EventKind::block_cached && e.request == 3 ? 1 : 0;
    }
    QCOMPARE(cached_for_3, 3); // the two loaded, then the one it computed
    std::vector<const kv::SequenceBlocks*> live{&sa2};
    QCOMPARE(kv.check(live), std::string());
    // Loaded back, they are the pool's cached blocks again: a fourth
    // request shares them without the tier.
    kv::SequenceBlocks sa3;
    const kv::PrefixMatch again = run(kv, sa3, a, 4);
    QCOMPARE(again.hit_tokens, 8);
    QCOMPARE(again.tier_blocks_hit, 0);
    QCOMPARE(tier.loaded.size(), std::size_t{2});
    live.push_back(&sa3);
    QCOMPARE(kv.check(live), std::string());
}

void TestKvManager::tier_write_through_saves_when_cached() {
    kv::KvManager kv(8, 4, true);
    FakeTier tier;
    kv.set_tier(&tier, true);
    kv::SequenceBlocks s;
    run(kv, s, tokens(10, 100), 1);
    QCOMPARE(tier.saved.size(), std::size_t{2}); // both full blocks, at once
    kv.release(1, s);
    // The pool serves its own cached blocks first, the tier untouched.
    kv::SequenceBlocks s2;
    QCOMPARE(run(kv, s2, tokens(10, 100), 2).hit_tokens, 8);
    kv.release(2, s2);

    // A full tier saves nothing; a lost block makes the rest computed.
    kv::KvManager small(4, 4, true);
    FakeTier lossy;
    small.set_tier(&lossy, false);
    kv::SequenceBlocks x;
    run(small, x, tokens(12, 100), 1);
    small.release(1, x);
    kv::SequenceBlocks y;
    run(small, y, tokens(16, 500), 2); // reclaims x's three into the tier
    small.release(2, y);
    lossy.lose_on_reload = true;
    kv::SequenceBlocks x2;
    const kv::PrefixMatch lost = run(small, x2, tokens(12, 100), 3);
    QCOMPARE(lost.hit_tokens, 0);
    QCOMPARE(lost.tier_blocks_hit, 0);
    std::vector<const kv::SequenceBlocks*> live{&x2};
    QCOMPARE(small.check(live), std::string());
    small.release(3, x2);
    lossy.full = true;
    const std::int64_t before = small.tier_blocks();
    kv::SequenceBlocks z;
    run(small, z, tokens(16, 900), 4);
    QCOMPARE(small.tier_blocks(), before); // nothing more could be saved
}

void TestKvManager::tier_hits_outlive_their_own_admission() {
    // A's first two blocks end up the least recently used in a full tier;
    // admitting A again reclaims two pool blocks into that tier. Made the
    // most recently used before those allocations, A's hits stay and load.
    kv::KvManager kv(6, 4, true);
    LruTier tier;
    tier.manager = &kv;
    tier.capacity = 4;
    kv.set_tier(&tier, false);
    const auto a = tokens(12, 100);
    kv::SequenceBlocks s;
    run(kv, s, a, 1);
    kv.release(1, s);
    run(kv, s, tokens(24, 500), 2); // reclaims A's three into the tier
    kv.release(2, s);
    run(kv, s, tokens(8, 900), 3); // two more, newer: A's are the oldest
    kv.release(3, s);
    QCOMPARE(kv.match_prefix(a).tier_blocks_hit, 2);
    kv::SequenceBlocks again;
    const kv::PrefixMatch match = run(kv, again, a, 4);
    QCOMPARE(match.hit_tokens, 8);
    QCOMPARE(match.tier_blocks_hit, 2);
    std::vector<const kv::SequenceBlocks*> live{&again};
    QCOMPARE(kv.check(live), std::string());
}

void TestKvManager::tier_loss_that_leaves_too_few_blocks_waits() {
    // Two requests on one prompt, computed side by side: A registers block
    // 0 and 2, B block 1 (each other's copies stay private). A's go to the
    // tier; B still holds block 1. A third request hits block 0 in the tier,
    // block 1 in B's table, block 2 in the tier; block 0 is lost on loading,
    // so the whole prompt must be computed, which needs a block more than
    // the pool has: the request waits, nothing held, nothing broken.
    kv::KvManager kv(10, 4, true);
    FakeTier tier;
    kv.set_tier(&tier, false);
    const auto t = tokens(13, 100);
    kv::SequenceBlocks a;
    kv::SequenceBlocks b;
    QVERIFY(kv.admit(1, a, t).has_value());
    QVERIFY(kv.admit(2, b, t).has_value());
    a.length = b.length = 13;
    kv.cache_full_blocks(1, a, t, 4);
    kv.cache_full_blocks(2, b, t, 8);
    kv.cache_full_blocks(1, a, t, 12);
    kv.release(1, a);
    kv::SequenceBlocks c;
    run(kv, c, tokens(24, 500), 3); // reclaims A's cached blocks 0 and 2
    kv.release(3, c);
    kv::SequenceBlocks e;
    run(kv, e, tokens(12, 900), 4); // leaves 3 blocks to take
    QCOMPARE(kv.available_blocks(), 3);
    const kv::PrefixMatch peek = kv.match_prefix(t);
    QCOMPARE(peek.blocks_hit, 3);
    QCOMPARE(peek.tier_blocks_hit, 2);
    tier.lose_on_reload = true;
    kv::SequenceBlocks d;
    QVERIFY(!kv.admit(5, d, t).has_value());
    QVERIFY(d.block_table.empty());
    QCOMPARE(d.length, 0);
    QCOMPARE(kv.ref_count(b.block_table[1]), 1);
    std::vector<const kv::SequenceBlocks*> live{&b, &e};
    QCOMPARE(kv.check(live), std::string());
    QCOMPARE(kv.available_blocks(), 3);
}

QTEST_GUILESS_MAIN(TestKvManager)
#include "tst_kv_manager.moc"
