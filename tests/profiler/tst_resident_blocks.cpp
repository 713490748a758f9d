// ResidentBlocks against an independent model kept here: a plain map keyed
// by (rank, medium, hash) updated straight from the events as a publisher
// would describe them. Random streams of stores, removals and clears must
// leave both with the same blocks, parents, tokens and children.
#include "profiler/attach/resident_blocks.h"

#include <algorithm>
#include <map>
#include <random>
#include <tuple>

#include <QTest>

using namespace kvscope::attach;

namespace {

BlockHash h(std::uint64_t value) {
    return BlockHash::from_uint(value);
}

StoredBlocks stored(std::vector<std::uint64_t> hashes, std::optional<std::uint64_t> parent,
                    std::int64_t block_size, const std::string& medium = "GPU") {
    StoredBlocks event;
    for (const std::uint64_t value : hashes) {
        event.hashes.push_back(h(value));
    }
    if (parent) {
        event.parent = h(*parent);
    }
    event.block_size = block_size;
    for (std::size_t i = 0; i < hashes.size() * static_cast<std::size_t>(block_size); ++i) {
        event.token_ids.push_back(static_cast<std::int64_t>(1000 + i));
    }
    event.medium = medium;
    return event;
}

RemovedBlocks removed(std::vector<std::uint64_t> hashes, const std::string& medium = "GPU") {
    RemovedBlocks event;
    for (const std::uint64_t value : hashes) {
        event.hashes.push_back(h(value));
    }
    event.medium = medium;
    return event;
}

KvEventBatch batch(std::vector<KvEvent> events, std::optional<std::int64_t> rank = 0,
                   double ts = 1.5) {
    KvEventBatch out;
    out.ts = ts;
    out.rank = rank;
    out.events = std::move(events);
    return out;
}

std::vector<std::uint64_t> low64s(std::vector<BlockHash> hashes) {
    std::vector<std::uint64_t> out;
    for (const BlockHash& hash : hashes) {
        out.push_back(hash.low64());
    }
    std::sort(out.begin(), out.end());
    return out;
}

} // namespace

class TestResidentBlocks : public QObject {
    Q_OBJECT

private slots:
    void storedChainLinksParentsAndSplitsTokens() {
        ResidentBlocks blocks;
        blocks.apply(batch({stored({11, 12, 13}, 10, 4)}, 2, 7.25));
        const TierKey gpu{2, "GPU"};
        QCOMPARE(blocks.size(), std::size_t{3});
        const ResidentBlock* first = blocks.find(gpu, h(11));
        const ResidentBlock* third = blocks.find(gpu, h(13));
        QVERIFY(first != nullptr && third != nullptr);
        QCOMPARE(first->parent, std::optional<BlockHash>(h(10)));
        QCOMPARE(third->parent, std::optional<BlockHash>(h(12)));
        QCOMPARE(third->token_ids, (std::vector<std::int64_t>{1008, 1009, 1010, 1011}));
        QCOMPARE(third->block_size, std::int64_t{4});
        QCOMPARE(third->stored_at, 7.25);
        QCOMPARE(low64s(blocks.children(gpu, h(10))), std::vector<std::uint64_t>{11});
        QCOMPARE(low64s(blocks.children(gpu, h(11))), std::vector<std::uint64_t>{12});
        // Parent 10 was never stored here: 11 roots the visible forest.
        QCOMPARE(low64s(blocks.roots(gpu)), std::vector<std::uint64_t>{11});
        QVERIFY(blocks.find(TierKey{0, "GPU"}, h(11)) == nullptr);
    }

    void shortTokenListGivesWhatItHas() {
        StoredBlocks event = stored({1, 2}, std::nullopt, 4);
        event.token_ids.resize(5);
        ResidentBlocks blocks;
        blocks.apply(batch({event}));
        QCOMPARE(blocks.find({0, "GPU"}, h(1))->token_ids.size(), std::size_t{4});
        QCOMPARE(blocks.find({0, "GPU"}, h(2))->token_ids.size(), std::size_t{1});
    }

    void removingUnknownHashIsCountedNotAnError() {
        ResidentBlocks blocks;
        blocks.apply(
            batch({stored({1, 2}, std::nullopt, 1), removed({2, 99}), removed({1}, "CPU")}));
        QCOMPARE(blocks.size(), std::size_t{1});
        QCOMPARE(blocks.counts().removed, std::int64_t{1});
        QCOMPARE(blocks.counts().unknown_removed, std::int64_t{2});
        QVERIFY(blocks.children({0, "GPU"}, h(1)).empty());
    }

    void tiersAreSeparateAndClearEmptiesAll() {
        ResidentBlocks blocks;
        blocks.apply(
            batch({stored({1}, std::nullopt, 1, "GPU"), stored({1}, std::nullopt, 1, "CPU")}));
        blocks.apply(batch({stored({1}, std::nullopt, 1)}, std::nullopt)); // no rank: rank 0
        blocks.apply(batch({stored({1}, std::nullopt, 1)}, 1));
        QCOMPARE(blocks.size(), std::size_t{3});
        QCOMPARE(blocks.counts().restored, std::int64_t{1});
        blocks.apply(batch({AllCleared{}}));
        QCOMPARE(blocks.size(), std::size_t{0});
        QCOMPARE(blocks.counts().clears, std::int64_t{1});
        blocks.apply(batch({stored({5}, std::nullopt, 1)}));
        blocks.clear();
        QCOMPARE(blocks.size(), std::size_t{0});
        QCOMPARE(blocks.counts().resets, std::int64_t{1});
    }

    void restoreMovesBlockToNewParent() {
        ResidentBlocks blocks;
        blocks.apply(batch({stored({2}, 1, 1), stored({2}, 7, 1)}));
        QVERIFY(blocks.children({0, "GPU"}, h(1)).empty());
        QCOMPARE(low64s(blocks.children({0, "GPU"}, h(7))), std::vector<std::uint64_t>{2});
    }

    // The model: what a publisher sent, applied the obvious way.
    void randomStreamsMatchIndependentModel() {
        struct Entry {
            std::optional<std::uint64_t> parent;
            std::vector<std::int64_t> tokens;
        };
        using Key = std::tuple<std::int64_t, std::string, std::uint64_t>;
        const std::vector<std::string> media = {"GPU", "CPU"};
        for (unsigned seed = 1; seed <= 20; ++seed) {
            std::mt19937_64 rng(seed);
            std::map<Key, Entry> model;
            ResidentBlocks blocks;
            auto pick = [&](std::uint64_t n) {
                return rng() % n;
            };
            for (int step = 0; step < 400; ++step) {
                const auto rank = static_cast<std::int64_t>(pick(3));
                const std::string& medium = media[pick(2)];
                const std::uint64_t kind = pick(100);
                if (kind < 60) {
                    const std::size_t n = 1 + pick(4);
                    std::vector<std::uint64_t> hashes;
                    for (std::size_t i = 0; i < n; ++i) {
                        hashes.push_back(pick(48) + (pick(2) ? 0x8000000000000000ull : 0));
                    }
                    std::optional<std::uint64_t> parent;
                    if (pick(3) != 0) {
                        parent = pick(48);
                    }
                    const StoredBlocks event = stored(hashes, parent, 2, medium);
                    blocks.apply(batch({event}, rank));
                    for (std::size_t i = 0; i < n; ++i) {
                        model[{rank, medium, hashes[i]}] =
                            Entry{i == 0 ? parent : std::optional(hashes[i - 1]),
                                  {event.token_ids[2 * i], event.token_ids[2 * i + 1]}};
                    }
                } else if (kind < 97) {
                    std::vector<std::uint64_t> hashes;
                    for (std::uint64_t i = 0, n = 1 + pick(3); i < n; ++i) {
                        hashes.push_back(pick(48) + (pick(2) ? 0x8000000000000000ull : 0));
                    }
                    blocks.apply(batch({removed(hashes, medium)}, rank));
                    for (const std::uint64_t value : hashes) {
                        model.erase({rank, medium, value});
                    }
                } else {
                    blocks.apply(batch({AllCleared{}}, rank));
                    model.clear();
                }
            }
            QCOMPARE(blocks.size(), model.size());
            for (const auto& [key, entry] : model) {
                const auto& [rank, medium, value] = key;
                const ResidentBlock* block = blocks.find({rank, medium}, h(value));
                QVERIFY2(block != nullptr, qPrintable(QString::number(value)));
                QCOMPARE(block->parent ? std::optional(block->parent->low64()) : std::nullopt,
                         entry.parent);
                QCOMPARE(block->token_ids, entry.tokens);
                std::vector<std::uint64_t> children;
                for (const auto& [other, other_entry] : model) {
                    if (std::get<0>(other) == rank && std::get<1>(other) == medium &&
                        other_entry.parent == value) {
                        children.push_back(std::get<2>(other));
                    }
                }
                std::sort(children.begin(), children.end());
                QCOMPARE(low64s(blocks.children({rank, medium}, h(value))), children);
            }
        }
    }
};

QTEST_GUILESS_MAIN(TestResidentBlocks)
#include "tst_resident_blocks.moc"
