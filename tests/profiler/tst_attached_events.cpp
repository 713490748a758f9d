// What attached batches become in typed events and what those rows give back:
// the rows a batch makes, read into an AttachedState, must leave the same
// resident blocks as applying the batch itself (random streams), and rows
// that do not parse are counted, never trusted or fatal.
#include "engine/gguf/gguf_file.h"
#include "profiler/attach/attached_events.h"
#include "profiler/attach/kv_event_source.h"
#include "profiler/attach/token_text.h"
#include "tests/support/tiny_model.h"

#include <array>
#include <nlohmann/json.hpp>
#include <random>

#include <QTest>

using namespace kvscope;
using namespace kvscope::attach;

namespace {

BlockHash bytes_hash(std::uint8_t seed, std::size_t size = 32) {
    std::vector<std::uint8_t> bytes(size);
    for (std::size_t i = 0; i < size; ++i) {
        bytes[i] = static_cast<std::uint8_t>(seed * 31 + i);
    }
    BlockHash hash;
    [[maybe_unused]] const bool ok = BlockHash::from_bytes(bytes, hash);
    return hash;
}

SourceBatch batch_of(std::vector<KvEvent> events, std::int64_t rank = 0, double ts = 12.5) {
    SourceBatch b;
    b.batch.ts = ts;
    b.batch.rank = rank;
    b.batch.events = std::move(events);
    return b;
}

AttachedState state_from_rows(const std::vector<events::EngineEvent>& rows) {
    AttachedState state;
    for (const events::EngineEvent& row : rows) {
        [[maybe_unused]] const bool applied = state.apply(row);
    }
    return state;
}

// A random stream over a small hash space per tier: chains stored with
// parents, removals of resident and unknown hashes, now and then a clear.
std::vector<SourceBatch> random_stream(std::mt19937_64& rng, int batches) {
    std::vector<SourceBatch> out;
    const std::vector<std::string> media = {"GPU", "CPU", "DISK"};
    for (int b = 0; b < batches; ++b) {
        SourceBatch batch = batch_of({}, static_cast<std::int64_t>(rng() % 3),
                                     1.7e9 + static_cast<double>(b) * 0.01);
        const int events = 1 + static_cast<int>(rng() % 4);
        for (int e = 0; e < events; ++e) {
            const std::uint64_t roll = rng() % 100;
            const std::string medium = media[rng() % media.size()];
            if (roll < 60) {
                StoredBlocks stored;
                stored.block_size = 4;
                stored.medium = medium;
                // Now and then no block at all (no row, and no tier either).
                const int n = rng() % 15 == 0 ? 0 : 1 + static_cast<int>(rng() % 5);
                for (int i = 0; i < n; ++i) {
                    stored.hashes.push_back(
                        (rng() % 3 == 0)
                            ? bytes_hash(static_cast<std::uint8_t>(rng() % 40))
                            : BlockHash::from_uint(0xF000000000000000ull + rng() % 60));
                }
                if (rng() % 2 == 0) {
                    stored.parent = BlockHash::from_uint(0xF000000000000000ull + rng() % 60);
                }
                // Sometimes fewer token ids than blocks * block_size.
                const std::size_t tokens =
                    rng() % 4 == 0 ? rng() % 7 : static_cast<std::size_t>(n) * 4;
                for (std::size_t t = 0; t < tokens; ++t) {
                    stored.token_ids.push_back(static_cast<std::int64_t>(rng() % 50000));
                }
                if (rng() % 5 == 0) {
                    stored.lora_id = 3;
                }
                if (rng() % 5 == 0) {
                    stored.group_idx = 1;
                }
                batch.batch.events.emplace_back(std::move(stored));
            } else if (roll < 70) {
                MovedBlocks moved;
                moved.from_medium = medium;
                moved.to_medium = media[rng() % media.size()];
                moved.hashes.push_back(BlockHash::from_uint(0xF000000000000000ull + rng() % 60));
                batch.batch.events.emplace_back(std::move(moved));
            } else if (roll < 97) {
                RemovedBlocks removed;
                removed.medium = medium;
                const int n = 1 + static_cast<int>(rng() % 4);
                for (int i = 0; i < n; ++i) {
                    removed.hashes.push_back(
                        BlockHash::from_uint(0xF000000000000000ull + rng() % 60));
                }
                batch.batch.events.emplace_back(std::move(removed));
            } else {
                batch.batch.events.emplace_back(AllCleared{});
            }
        }
        batch.restarted = rng() % 50 == 0;
        batch.after_loss = rng() % 40 == 0;
        out.push_back(std::move(batch));
    }
    return out;
}

// `got` holds the blocks, links and counts of `want`, tier by tier.
void same_blocks(const ResidentBlocks& got, const ResidentBlocks& want) {
    QCOMPARE(got.tiers().size(), want.tiers().size());
    for (const auto& [key, tier] : want.tiers()) {
        const ResidentBlocks::Tier* other = got.tier(key);
        QVERIFY(other != nullptr);
        QCOMPARE(other->blocks.size(), tier.blocks.size());
        for (const auto& [hash, block] : tier.blocks) {
            const auto it = other->blocks.find(hash);
            QVERIFY(it != other->blocks.end());
            QCOMPARE(it->second.token_ids, block.token_ids);
            QVERIFY(it->second.parent == block.parent);
            QCOMPARE(it->second.lora_id, block.lora_id);
            QCOMPARE(it->second.group_idx, block.group_idx);
            QCOMPARE(it->second.stored_at, block.stored_at);
        }
    }
    QCOMPARE(got.counts().stored, want.counts().stored);
    QCOMPARE(got.counts().removed, want.counts().removed);
    QCOMPARE(got.counts().unknown_removed, want.counts().unknown_removed);
    QCOMPARE(got.counts().clears, want.counts().clears);
    QCOMPARE(got.counts().resets, want.counts().resets);
}

} // namespace

class TestAttachedEvents : public QObject {
    Q_OBJECT

private slots:
    // A store following an attach's snapshots keeps exactly the rows
    // AttachedState::apply() takes, told apart by kind alone.
    void attachedKindsAreTheKindsApplied() {
        for (int k = 0; k < events::kEventKindCount; ++k) {
            events::EngineEvent row;
            row.kind = static_cast<events::EventKind>(k);
            row.text = "{}";
            AttachedState state;
            QCOMPARE(state.apply(row), is_attached_kind(row.kind));
        }
    }

    void hashTextRoundTrips() {
        for (const BlockHash& hash :
             {BlockHash::from_uint(0xFEDCBA9876543210ull), BlockHash::from_int(-5), bytes_hash(7),
              bytes_hash(9, 1), bytes_hash(3, 0)}) {
            const std::optional<BlockHash> back = parse_block_hash(hash.hex());
            QVERIFY2(back.has_value(), hash.hex().c_str());
            QVERIFY(*back == hash);
        }
        // An integer hash and the same eight bytes as raw bytes stay apart.
        const auto integer = parse_block_hash("0x0102030405060708");
        const auto raw = parse_block_hash("0102030405060708");
        QVERIFY(integer && raw && !(*integer == *raw));
        for (const char* bad :
             {"0x123", "0xzz00000000000000", "abc", "0x", "xyz0",
              "00000000000000000000000000000000000000000000000000000000000000000000"}) {
            QVERIFY2(!parse_block_hash(bad), bad);
        }
    }

    void storedEventBecomesOneRowPerBlock() {
        StoredBlocks stored;
        stored.hashes = {BlockHash::from_uint(0xA000000000000001ull),
                         BlockHash::from_uint(0xA000000000000002ull)};
        stored.parent = BlockHash::from_uint(0xA000000000000000ull);
        stored.token_ids = {1, 2, 3, 4, 5, 6};
        stored.block_size = 3;
        stored.medium = "CPU";
        stored.lora_id = 7;
        std::vector<events::EngineEvent> rows;
        append_typed_events(4, batch_of({stored}, 2, 1.5), rows);
        QCOMPARE(rows.size(), std::size_t{2});
        const auto first = events::as<events::AttachedBlockStored>(rows[0]);
        QCOMPARE(first.source, std::int64_t{4});
        QCOMPARE(first.rank, std::int64_t{2});
        QCOMPARE(first.block_size, std::int64_t{3});
        QCOMPARE(first.published_us, std::int64_t{1'500'000});
        QCOMPARE(rows[0].request, std::int64_t{-1}); // no owner: events do not say
        QCOMPARE(rows[0].block, -1);                 // no physical block either
        const auto second = stored_block_of(events::as<events::AttachedBlockStored>(rows[1]));
        QVERIFY(second.has_value());
        QVERIFY(second->hashes.at(0) == stored.hashes[1]);
        QVERIFY(second->parent && *second->parent == stored.hashes[0]); // chained
        QCOMPARE(second->token_ids, (std::vector<std::int64_t>{4, 5, 6}));
        QCOMPARE(second->medium, std::string("CPU"));
        QCOMPARE(second->lora_id, std::optional<std::int64_t>(7));
    }

    // The details are put together without nlohmann's DOM (it was the
    // attach thread's main cost): the bytes must be what nlohmann writes,
    // and read back (by nlohmann) give what was written, in any spacing.
    void detailsAreWhatNlohmannWrites() {
        StoredBlocks stored;
        stored.hashes = {BlockHash::from_uint(0xFFFFFFFFFFFFFFFFull), bytes_hash(9, 32)};
        stored.parent = bytes_hash(3, 5);
        stored.token_ids = {0, -7, 151935, 123456789012345678};
        stored.block_size = 2;
        stored.medium = "CPU_PINNED";
        stored.lora_id = -3;
        stored.group_idx = 2;
        RemovedBlocks removed{{BlockHash::from_uint(42)}, "DISK", 1};
        RemovedBlocks removed_plain{{bytes_hash(1, 8)}, "GPU", {}};
        std::vector<events::EngineEvent> rows;
        append_typed_events(0, batch_of({stored, removed, removed_plain}), rows);
        QCOMPARE(rows.size(), std::size_t{4});

        const nlohmann::json first{{"hash", stored.hashes[0].hex()},
                                   {"parent", stored.parent->hex()},
                                   {"medium", "CPU_PINNED"},
                                   {"tokens", {0, -7}},
                                   {"lora_id", -3},
                                   {"group", 2}};
        const nlohmann::json second{{"hash", stored.hashes[1].hex()},
                                    {"parent", stored.hashes[0].hex()},
                                    {"medium", "CPU_PINNED"},
                                    {"tokens", {151935, 123456789012345678}},
                                    {"lora_id", -3},
                                    {"group", 2}};
        const nlohmann::json third{
            {"hash", "0x000000000000002a"}, {"medium", "DISK"}, {"group", 1}};
        const nlohmann::json fourth{{"hash", bytes_hash(1, 8).hex()}, {"medium", "GPU"}};
        QCOMPARE(rows[0].text, first.dump());
        QCOMPARE(rows[1].text, second.dump());
        QCOMPARE(rows[2].text, third.dump());
        QCOMPARE(rows[3].text, fourth.dump());

        for (int i = 0; i < 2; ++i) {
            auto row = events::as<events::AttachedBlockStored>(rows[static_cast<std::size_t>(i)]);
            const std::optional<StoredBlocks> by_hand = stored_block_of(row);
            row.detail = nlohmann::json::parse(row.detail).dump(1);
            const std::optional<StoredBlocks> by_nlohmann = stored_block_of(row);
            QVERIFY(by_hand.has_value() && by_nlohmann.has_value());
            QVERIFY(*by_hand == *by_nlohmann);
            QCOMPARE(by_hand->token_ids.size(), std::size_t{2});
        }
        for (int i = 2; i < 4; ++i) {
            auto row = events::as<events::AttachedBlockRemoved>(rows[static_cast<std::size_t>(i)]);
            const std::optional<RemovedBlocks> by_hand = removed_block_of(row);
            row.detail = nlohmann::json::parse(row.detail).dump(1);
            const std::optional<RemovedBlocks> by_nlohmann = removed_block_of(row);
            QVERIFY(by_hand.has_value() && by_nlohmann.has_value());
            QVERIFY(*by_hand == *by_nlohmann);
        }
        QVERIFY(*removed_block_of(events::as<events::AttachedBlockRemoved>(rows[2])) == removed);

        // A medium that needs escaping still makes valid JSON (nlohmann's),
        // and one that is not UTF-8 is replaced as nlohmann replaces it.
        stored.medium = "a\"b\\c\n";
        stored.hashes.resize(1);
        rows.clear();
        append_typed_events(0, batch_of({stored}), rows);
        const auto back = stored_block_of(events::as<events::AttachedBlockStored>(rows.at(0)));
        QVERIFY(back.has_value());
        QCOMPARE(back->medium, stored.medium);
        stored.medium = "GPU\xff";
        rows.clear();
        append_typed_events(0, batch_of({stored, MovedBlocks{{stored.hashes[0]}, "\xfe", "x"}}),
                            rows);
        nlohmann::json replaced = nlohmann::json::parse(rows.at(0).text);
        QCOMPARE(replaced.at("medium").get<std::string>(), std::string("GPU\xef\xbf\xbd"));
        const nlohmann::json moved{{"hash", stored.hashes[0].hex()}, {"from", "\xfe"}, {"to", "x"}};
        QCOMPARE(rows.at(1).text,
                 moved.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    }

    // Lost events may have held removals: once a status row says more were
    // lost, the source's blocks go (rather than phantoms piling up), and
    // what is stored afterwards is kept.
    void lostEventsClearTheSource() {
        AttachedState state;
        const auto stored = [](std::uint64_t hash) {
            std::vector<events::EngineEvent> rows;
            append_typed_events(0,
                                batch_of({StoredBlocks{
                                    {BlockHash::from_uint(hash)}, {}, {1, 2}, 2, {}, "GPU", {}}}),
                                rows);
            return rows.at(0);
        };
        const auto lost = [] {
            events::AttachedCleared row;
            row.cause = events::ClearCause::events_lost;
            return events::to_event(row);
        };
        QVERIFY(state.apply(stored(1)));
        QVERIFY(state.apply(stored(2)));
        QVERIFY(state.apply(events::to_event(events::AttachedStatus{})));
        QCOMPARE(state.source(0)->blocks.size(), std::size_t{2});
        QCOMPARE(state.source(0)->loss_clears, std::int64_t{0});
        QVERIFY(state.apply(lost()));
        QCOMPARE(state.source(0)->blocks.size(), std::size_t{0});
        QCOMPARE(state.source(0)->loss_clears, std::int64_t{1});
        QVERIFY(state.apply(stored(3)));
        QCOMPARE(state.source(0)->blocks.size(), std::size_t{1});
        QVERIFY(state.apply(lost()));
        QCOMPARE(state.source(0)->blocks.size(), std::size_t{0});
        QCOMPARE(state.source(0)->loss_clears, std::int64_t{2});
    }

    void restartClearsBeforeTheBatch() {
        SourceBatch batch =
            batch_of({RemovedBlocks{{BlockHash::from_uint(1)}, "GPU", {}}, AllCleared{}});
        batch.restarted = true;
        std::vector<events::EngineEvent> rows;
        append_typed_events(0, batch, rows);
        QCOMPARE(rows.size(), std::size_t{3});
        QCOMPARE(events::as<events::AttachedCleared>(rows[0]).cause,
                 events::ClearCause::publisher_restarted);
        QCOMPARE(rows[1].kind, events::EventKind::attached_block_removed);
        QCOMPARE(events::as<events::AttachedCleared>(rows[2]).cause,
                 events::ClearCause::all_blocks_cleared);
    }

    void rowsRebuildTheStateTheBatchesImply_data() {
        QTest::addColumn<int>("seed");
        for (int seed = 1; seed <= 6; ++seed) {
            QTest::addRow("seed %d", seed) << seed;
        }
    }
    void rowsRebuildTheStateTheBatchesImply() {
        QFETCH(int, seed);
        std::mt19937_64 rng(static_cast<std::uint64_t>(seed));
        const std::vector<SourceBatch> stream = random_stream(rng, 300);
        ResidentBlocks direct;
        std::vector<events::EngineEvent> rows;
        for (const SourceBatch& batch : stream) {
            if (batch.after_loss) {
                direct.clear();
            }
            if (batch.restarted) {
                direct.clear();
            }
            direct.apply(batch.batch);
            append_typed_events(1, batch, rows);
        }
        // Rows read back, and the batches applied as the attach loop does:
        // both must be the state the batches imply.
        AttachedState live;
        for (const SourceBatch& batch : stream) {
            live.apply(1, batch, 0);
        }
        const AttachedState replayed = state_from_rows(rows);
        for (const AttachedState* state : std::array<const AttachedState*, 2>{&replayed, &live}) {
            const AttachedState::Source* source = state->source(1);
            QVERIFY(source != nullptr);
            QCOMPARE(source->bad_rows, std::int64_t{0});
            same_blocks(source->blocks, direct);
            if (QTest::currentTestFailed()) {
                return;
            }
        }
        QCOMPARE(live.source(1)->blocks.counts(), replayed.source(1)->blocks.counts());
    }

    void hostileRowsAreCountedNotTrusted_data() {
        QTest::addColumn<QString>("detail");
        QTest::newRow("not json") << "{\"hash\": ";
        QTest::newRow("not an object") << "[1, 2]";
        QTest::newRow("no hash") << "{\"medium\": \"GPU\"}";
        QTest::newRow("hash a number") << "{\"hash\": 5}";
        QTest::newRow("bad hex") << "{\"hash\": \"0xnothex0000000000\"}";
        QTest::newRow("parent not a hash") << "{\"hash\": \"0x0000000000000001\", \"parent\": 3}";
        QTest::newRow("tokens not an array") << "{\"hash\": \"0x0000000000000001\", \"tokens\": 3}";
        QTest::newRow("token a string")
            << "{\"hash\": \"0x0000000000000001\", \"tokens\": [1, \"x\"]}";
        QTest::newRow("medium a number") << "{\"hash\": \"0x0000000000000001\", \"medium\": 1}";
        QTest::newRow("lora a float") << "{\"hash\": \"0x0000000000000001\", \"lora_id\": 1.5}";
        // Compact, as kvscope writes them (its own reader's path first):
        QTest::newRow("compact: token a string")
            << "{\"hash\":\"0x0000000000000001\",\"medium\":\"GPU\",\"tokens\":[1,\"x\"]}";
        QTest::newRow("compact: token a float")
            << "{\"hash\":\"0x0000000000000001\",\"medium\":\"GPU\",\"tokens\":[1.5]}";
        QTest::newRow("compact: leading zero")
            << "{\"hash\":\"0x0000000000000001\",\"medium\":\"GPU\",\"tokens\":[01]}";
        QTest::newRow("compact: lora a float")
            << "{\"hash\":\"0x0000000000000001\",\"lora_id\":1.5,\"medium\":\"GPU\","
               "\"tokens\":[]}";
        QTest::newRow("compact: trailing bytes")
            << "{\"hash\":\"0x0000000000000001\",\"medium\":\"GPU\",\"tokens\":[1]}x";
        QTest::newRow("compact: bad parent")
            << "{\"hash\":\"0x0000000000000001\",\"medium\":\"GPU\",\"parent\":\"0x12\","
               "\"tokens\":[]}";
        QTest::newRow("compact: unterminated")
            << "{\"hash\":\"0x0000000000000001\",\"medium\":\"GPU\",\"tokens\":[1,";
    }
    void hostileRowsAreCountedNotTrusted() {
        QFETCH(QString, detail);
        events::AttachedBlockStored stored;
        stored.detail = detail.toStdString();
        events::AttachedBlockRemoved removed;
        removed.detail = detail.toStdString();
        AttachedState state;
        QVERIFY(state.apply(events::to_event(stored)));
        const bool removal_parses = removed_block_of(removed).has_value();
        QVERIFY(state.apply(events::to_event(removed)));
        QCOMPARE(state.source(0)->bad_rows, std::int64_t{removal_parses ? 1 : 2});
        QCOMPARE(state.source(0)->blocks.size(), std::size_t{0});
    }

    void otherKindsAreNotApplied() {
        AttachedState state;
        QVERIFY(!state.apply(events::to_event(events::StepBegin{})));
        QVERIFY(state.empty());
    }

    void prefixTreesAndTheirTokens() {
        // root A (tokens 1 2) -> B (3 4) -> C (5 6), and A -> D (7 8); E alone.
        const auto h = [](std::uint64_t v) {
            return BlockHash::from_uint(v);
        };
        ResidentBlocks blocks;
        blocks.apply(StoredBlocks{{h(1), h(2), h(3)}, std::nullopt, {1, 2, 3, 4, 5, 6}, 2}, 0, 0.0);
        blocks.apply(StoredBlocks{{h(4)}, h(1), {7, 8}, 2}, 0, 0.0);
        blocks.apply(StoredBlocks{{h(5)}, h(99), {9, 10}, 2}, 0, 0.0);
        const TierKey key{0, "GPU"};
        const std::vector<PrefixTree> trees = blocks.trees(key);
        QCOMPARE(trees.size(), std::size_t{2});
        QVERIFY(trees[0].root == h(1));
        QCOMPARE(trees[0].blocks, std::int64_t{4});
        QCOMPARE(trees[0].depth, std::int64_t{3});
        QCOMPARE(trees[0].tokens, std::int64_t{8});
        QVERIFY(trees[1].root == h(5));
        QCOMPARE(trees[1].blocks, std::int64_t{1});
        QCOMPARE(blocks.prefix_tokens(key, h(3)), (std::vector<std::int64_t>{1, 2, 3, 4, 5, 6}));
        QCOMPARE(blocks.prefix_tokens(key, h(4)), (std::vector<std::int64_t>{1, 2, 7, 8}));
        // Removing the middle of a chain leaves its child a root of its own.
        blocks.apply(RemovedBlocks{{h(2)}, "GPU", {}}, 0, 0.0);
        QCOMPARE(blocks.trees(key).size(), std::size_t{3});
        QCOMPARE(blocks.prefix_tokens(key, h(3)), (std::vector<std::int64_t>{5, 6}));
    }

    void tokenTextIsAlwaysPrintable() {
        const tokenizer::Tokenizer tokenizer =
            tokenizer::Tokenizer::from_gguf(gguf::GgufFile::open(tiny_model_path()));
        const std::vector<tokenizer::TokenId> ids = tokenizer.encode("Hello\nworld", false);
        std::vector<std::int64_t> wide(ids.begin(), ids.end());
        QCOMPARE(QString::fromStdString(tokens_text(tokenizer, wide)), QString("Hello\\nworld"));
        // Ids the tokenizer does not have (another engine's vocabulary).
        const std::int64_t beyond = static_cast<std::int64_t>(tokenizer.vocab_size()) + 5;
        QCOMPARE(
            QString::fromStdString(tokens_text(tokenizer, std::vector<std::int64_t>{-1, beyond})),
            QString("[-1][%1]").arg(beyond));
        QCOMPARE(QString::fromStdString(tokens_text(tokenizer, wide, 4)), QString("Hell..."));
        QCOMPARE(QString::fromStdString(token_ids_text(std::vector<std::int64_t>{1, 2, 3}, 2)),
                 QString("[1, 2, ...]"));
    }
};

QTEST_GUILESS_MAIN(TestAttachedEvents)
#include "tst_attached_events.moc"
