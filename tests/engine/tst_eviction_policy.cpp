// Token-eviction policies: which entries each keeps, when compaction is due,
// and the configurations refused with a reason.
#include "engine/kv/eviction_policy.h"

#include <numeric>

#include <QTest>

using namespace kvscope;
using kv::EvictionKind;

namespace {

std::vector<std::int32_t> range(std::int32_t begin, std::int32_t end) {
    std::vector<std::int32_t> r(static_cast<std::size_t>(end - begin));
    std::iota(r.begin(), r.end(), begin);
    return r;
}

kv::EvictionConfig config(EvictionKind kind, int budget) {
    kv::EvictionConfig c;
    c.kind = kind;
    c.budget = budget;
    return c;
}

} // namespace

class TestEvictionPolicy : public QObject {
    Q_OBJECT

private slots:
    void under_budget_keeps_everything();
    void window_keeps_the_most_recent();
    void streaming_keeps_sinks_and_recent();
    void h2o_keeps_heavy_hitters_and_recent();
    void snapkv_keeps_pooled_neighbours_and_window();
    void compaction_waits_for_a_whole_block();
    void bad_configurations_are_refused();
};

void TestEvictionPolicy::under_budget_keeps_everything() {
    for (const EvictionKind kind :
         {EvictionKind::window, EvictionKind::streaming, EvictionKind::h2o, EvictionKind::snapkv}) {
        QCOMPARE(kv::select_kept(config(kind, 16), 10, {}), range(0, 10));
    }
    QCOMPARE(kv::select_kept(config(EvictionKind::none, 0), 100, {}), range(0, 100));
}

void TestEvictionPolicy::window_keeps_the_most_recent() {
    QCOMPARE(kv::select_kept(config(EvictionKind::window, 8), 20, {}), range(12, 20));
}

void TestEvictionPolicy::streaming_keeps_sinks_and_recent() {
    kv::EvictionConfig c = config(EvictionKind::streaming, 8);
    c.sink_tokens = 3;
    std::vector<std::int32_t> expected = range(0, 3);
    const auto recent = range(15, 20);
    expected.insert(expected.end(), recent.begin(), recent.end());
    QCOMPARE(kv::select_kept(c, 20, {}), expected);
}

void TestEvictionPolicy::h2o_keeps_heavy_hitters_and_recent() {
    kv::EvictionConfig c = config(EvictionKind::h2o, 6);
    c.recent_tokens = 2;
    std::vector<float> scores(20, 0.1f);
    scores[3] = 5.0f;
    scores[11] = 4.0f;
    scores[7] = 3.0f;
    scores[0] = 2.0f;
    scores[19] = 100.0f; // recent anyway
    const std::vector<std::int32_t> kept = kv::select_kept(c, 20, scores);
    QCOMPARE(kept, (std::vector<std::int32_t>{0, 3, 7, 11, 18, 19}));
    // The default recent share is half the budget.
    c.recent_tokens = -1;
    QCOMPARE(kv::select_kept(c, 20, scores), (std::vector<std::int32_t>{3, 7, 11, 17, 18, 19}));
}

void TestEvictionPolicy::snapkv_keeps_pooled_neighbours_and_window() {
    kv::EvictionConfig c = config(EvictionKind::snapkv, 7);
    c.snapkv_window = 4;
    c.snapkv_pool = 3;
    std::vector<float> scores(20, 0.0f);
    scores[5] = 1.0f; // pooling spreads it to 4 and 6
    const std::vector<std::int32_t> kept = kv::select_kept(c, 20, scores);
    QCOMPARE(kept, (std::vector<std::int32_t>{4, 5, 6, 16, 17, 18, 19}));
}

void TestEvictionPolicy::compaction_waits_for_a_whole_block() {
    const kv::EvictionConfig c = config(EvictionKind::window, 32);
    QVERIFY(!kv::should_evict(c, 40, 16));
    QVERIFY(kv::should_evict(c, 48, 16));
    QVERIFY(!kv::should_evict(config(EvictionKind::snapkv, 32), 100, 16)); // prompt only
    QVERIFY(!kv::should_evict(config(EvictionKind::none, 0), 1000, 16));
}

void TestEvictionPolicy::bad_configurations_are_refused() {
    QVERIFY(kv::EvictionConfig{}.problem(16).empty());
    QVERIFY(config(EvictionKind::h2o, 0).problem(16).find("--kv-budget") != std::string::npos);
    QVERIFY(config(EvictionKind::window, 8).problem(16).find("below one block") !=
            std::string::npos);
    kv::EvictionConfig streaming = config(EvictionKind::streaming, 32);
    streaming.sink_tokens = 32;
    QVERIFY(!streaming.problem(16).empty());
    kv::EvictionConfig snap = config(EvictionKind::snapkv, 32);
    snap.snapkv_pool = 4;
    QVERIFY(!snap.problem(16).empty());
    QCOMPARE(kv::parse_eviction_kind("h2o"), std::optional(EvictionKind::h2o));
    QVERIFY(!kv::parse_eviction_kind("lru"));
}

QTEST_GUILESS_MAIN(TestEvictionPolicy)
#include "tst_eviction_policy.moc"
