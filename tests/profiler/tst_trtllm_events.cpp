// TensorRT-LLM's KV-cache events as its serializer writes them
// (tensorrt_llm/_utils.py, KVCacheEventSerializer: the fixture below follows
// its field names and nesting), decoded into the events vLLM's become: the
// resident state after created, stored across two cache levels, an offload
// and its return, a priority-only update and removals must be what
// TensorRT-LLM's own cache would hold; and the typed rows those batches make
// must rebuild the same state (moves included).
#include "profiler/attach/attached_events.h"
#include "profiler/attach/kv_event_source.h"
#include "profiler/attach/trtllm_events.h"

#include <QTest>

using namespace kvscope;
using namespace kvscope::attach;

namespace {

// Two prompts sharing their first block; block 0xB2 is offloaded to host
// memory and 0xB1's priority changes; 0xC1 is evicted.
constexpr const char* kEvents = R"json([
  {"event_id": 0, "data": {"type": "created", "num_blocks_per_cache_level": [512, 2048]},
   "window_size": 4096},
  {"event_id": 1, "data": {"type": "stored", "parent_hash": null, "blocks": [
     {"type": "stored_block", "block_hash": 177, "tokens": [
        {"type": "unique_token", "token_id": 10, "token_extra_id": 0},
        {"type": "unique_token", "token_id": 11, "token_extra_id": 0}],
      "cache_level": 0, "priority": 35},
     {"type": "stored_block", "block_hash": 178, "tokens": [
        {"type": "unique_token", "token_id": 12, "token_extra_id": 0},
        {"type": "unique_token", "token_id": 13, "token_extra_id": 0}],
      "cache_level": 0, "priority": 35}]},
   "window_size": 4096},
  {"event_id": 2, "data": {"type": "stored", "parent_hash": 177, "blocks": [
     {"type": "stored_block", "block_hash": 193, "tokens": [
        {"type": "unique_token", "token_id": 20, "token_extra_id": 0},
        {"type": "unique_token", "token_id": 21, "token_extra_id": 0}],
      "cache_level": 0, "priority": 35}]},
   "window_size": 4096, "attention_dp_rank": 0},
  {"event_id": 3, "data": {"type": "updated", "block_hash": 178,
     "cache_level": {"type": "event_diff", "new_value": 1, "old_value": 0},
     "priority": null}, "window_size": 4096},
  {"event_id": 4, "data": {"type": "updated", "block_hash": 177,
     "cache_level": null,
     "priority": {"type": "event_diff", "new_value": 80, "old_value": 35}}, "window_size": 4096},
  {"event_id": 5, "data": {"type": "removed", "block_hashes": [193]}, "window_size": 4096}
])json";

std::vector<KvEventBatch> decoded(const char* text, TrtllmDecodeResult* out = nullptr) {
    TrtllmDecodeResult result = decode_trtllm_events(text, 1.7e9);
    if (out != nullptr) {
        *out = result;
    }
    return result.batches;
}

} // namespace

class TestTrtllmEvents : public QObject {
    Q_OBJECT

private slots:
    void serializerOutputGivesTheCacheState() {
        TrtllmDecodeResult result;
        const std::vector<KvEventBatch> batches = decoded(kEvents, &result);
        QVERIFY2(result.error.empty(), result.error.c_str());
        QCOMPARE(batches.size(), std::size_t{6});
        QCOMPARE(batches[2].sequence, std::uint64_t{2});
        QCOMPARE(batches[2].rank, std::optional<std::int64_t>(0));
        QCOMPARE(result.blocks_per_cache_level, (std::vector<std::int64_t>{512, 2048}));
        QCOMPARE(result.counts.unknown_fields, std::int64_t{0});
        QCOMPARE(result.counts.malformed_events, std::int64_t{0});

        ResidentBlocks blocks;
        for (const KvEventBatch& batch : batches) {
            blocks.apply(batch);
        }
        const TierKey gpu{0, "GPU"};
        const TierKey cpu{0, "CPU"};
        QVERIFY(blocks.find(gpu, BlockHash::from_uint(177)) != nullptr);
        QVERIFY(blocks.find(gpu, BlockHash::from_uint(193)) == nullptr); // removed
        QVERIFY(blocks.find(gpu, BlockHash::from_uint(178)) == nullptr); // offloaded
        const ResidentBlock* offloaded = blocks.find(cpu, BlockHash::from_uint(178));
        QVERIFY(offloaded != nullptr);
        QCOMPARE(offloaded->token_ids, (std::vector<std::int64_t>{12, 13}));
        QVERIFY(offloaded->parent && *offloaded->parent == BlockHash::from_uint(177));
        QCOMPARE(offloaded->block_size, std::int64_t{2});
        QCOMPARE(blocks.counts().moved, std::int64_t{1});
        QCOMPARE(blocks.counts().removed, std::int64_t{1});
        QCOMPARE(blocks.size(), std::size_t{2});
    }

    void aStoredEventAcrossLevelsSplitsAndChains() {
        const auto batches = decoded(R"json([{"event_id": 7, "data": {"type": "stored",
            "parent_hash": 5, "blocks": [
              {"type": "stored_block", "block_hash": 6, "tokens": [], "cache_level": 0, "priority": 35},
              {"type": "stored_block", "block_hash": 7, "tokens": [], "cache_level": 1, "priority": 35}]}}])json");
        QCOMPARE(batches.size(), std::size_t{1});
        QCOMPARE(batches[0].events.size(), std::size_t{2});
        const auto& second = std::get<StoredBlocks>(batches[0].events[1]);
        QCOMPARE(second.medium, std::string("CPU"));
        QVERIFY(second.parent && *second.parent == BlockHash::from_uint(6));
    }

    void typedRowsRebuildMovesToo() {
        ResidentBlocks direct;
        std::vector<events::EngineEvent> rows;
        for (const KvEventBatch& batch : decoded(kEvents)) {
            direct.apply(batch);
            SourceBatch source_batch;
            source_batch.batch = batch;
            append_typed_events(0, source_batch, rows);
        }
        AttachedState state;
        for (const events::EngineEvent& row : rows) {
            QVERIFY(state.apply(row));
        }
        const ResidentBlocks& rebuilt = state.source(0)->blocks;
        QCOMPARE(state.source(0)->bad_rows, std::int64_t{0});
        QCOMPARE(rebuilt.counts(), direct.counts());
        for (const auto& [key, tier] : direct.tiers()) {
            for (const auto& [hash, block] : tier.blocks) {
                const ResidentBlock* other = rebuilt.find(key, hash);
                QVERIFY(other != nullptr);
                QVERIFY(*other == block);
            }
        }
    }

    void removalFindsTheTierThatHoldsIt() {
        ResidentBlocks blocks;
        blocks.apply(StoredBlocks{{BlockHash::from_uint(1)}, std::nullopt, {}, 2, {}, "CPU"}, 0,
                     0.0);
        blocks.apply(RemovedBlocks{{BlockHash::from_uint(1), BlockHash::from_uint(2)}, "", {}}, 0,
                     0.0);
        QCOMPARE(blocks.size(), std::size_t{0});
        QCOMPARE(blocks.counts().removed, std::int64_t{1});
        QCOMPARE(blocks.counts().unknown_removed, std::int64_t{1});
    }

    void leniencyAndErrors_data() {
        QTest::addColumn<QString>("text");
        QTest::addColumn<int>("batches");
        QTest::addColumn<int>("malformed");
        QTest::addColumn<int>("unknown_types");
        QTest::addColumn<int>("unknown_fields");
        QTest::addColumn<bool>("rejected");
        QTest::newRow("not json") << "[{" << 0 << 0 << 0 << 0 << true;
        QTest::newRow("one event, not a list")
            << R"({"event_id": 1, "data": {"type": "removed", "block_hashes": [3]}})" << 1 << 0 << 0
            << 0 << false;
        QTest::newRow("empty entries skipped") << R"([{}, null])" << 0 << 0 << 0 << 0 << false;
        QTest::newRow("unknown type counted")
            << R"([{"event_id": 1, "data": {"type": "migrated"}}])" << 1 << 0 << 1 << 0 << false;
        QTest::newRow("unknown fields counted")
            << R"([{"event_id": 1, "new": 1, "data": {"type": "removed", "block_hashes": [], "why": 2}}])"
            << 1 << 0 << 0 << 2 << false;
        QTest::newRow("hash a string")
            << R"([{"event_id": 1, "data": {"type": "removed", "block_hashes": ["x"]}}])" << 0 << 1
            << 0 << 0 << false;
        QTest::newRow("no event id") << R"([{"data": {"type": "removed", "block_hashes": []}}])"
                                     << 0 << 1 << 0 << 0 << false;
        QTest::newRow("token without id")
            << R"([{"event_id": 2, "data": {"type": "stored", "parent_hash": null, "blocks": [{"block_hash": 1, "tokens": [{"type": "unique_token"}]}]}}])"
            << 0 << 1 << 0 << 0 << false;
        QTest::newRow("bad event kept apart from good")
            << R"([{"event_id": 1, "data": 5}, {"event_id": 2, "data": {"type": "removed", "block_hashes": [1]}}])"
            << 1 << 1 << 0 << 0 << false;
        QTest::newRow("hash above 2^63")
            << R"([{"event_id": 1, "data": {"type": "removed", "block_hashes": [18446744073709551615]}}])"
            << 1 << 0 << 0 << 0 << false;
    }
    void leniencyAndErrors() {
        QFETCH(QString, text);
        QFETCH(int, batches);
        QFETCH(int, malformed);
        QFETCH(int, unknown_types);
        QFETCH(int, unknown_fields);
        QFETCH(bool, rejected);
        const TrtllmDecodeResult result = decode_trtllm_events(text.toStdString(), 0);
        QCOMPARE(static_cast<int>(result.batches.size()), batches);
        QCOMPARE(result.counts.malformed_events, std::int64_t{malformed});
        QCOMPARE(result.counts.unknown_event_types, std::int64_t{unknown_types});
        QCOMPARE(result.counts.unknown_fields, std::int64_t{unknown_fields});
        QCOMPARE(result.counts.rejected_messages, std::int64_t{rejected ? 1 : 0});
        QCOMPARE(result.error.empty(), malformed == 0 && !rejected);
    }
};

QTEST_GUILESS_MAIN(TestTrtllmEvents)
#include "tst_trtllm_events.moc"
