// The KV block manager on its own: prefix hits, the prompt_len - 1 limit,
// sharing and ref counts, LRU reuse of cached blocks, the tail-first release
// order, shared prefixes shorter than a block, and its invariant checker
// catching what it should.
#include "engine/kv/kv_manager.h"

#include <numeric>

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

} // namespace

class TestKvManager : public QObject {
    Q_OBJECT

private slots:
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

QTEST_GUILESS_MAIN(TestKvManager)
#include "tst_kv_manager.moc"
