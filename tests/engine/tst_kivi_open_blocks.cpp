// The CUDA backend's bookkeeping of KIVI's open blocks (engine/cuda/
// kivi_open_blocks.h), which needs no GPU: random serving workloads (prefill
// chunks, decodes, compaction rewrites of whole blocks, sequences freed)
// drive it step by step against a plain model of which blocks are open, and
// every step checks what the kernels rely on: every written block has a slot,
// no two open blocks share one, slots never move while open, the filled
// blocks are exactly those whose last entry the step writes and read at -1,
// freed slots are reused before the pool grows, and it grows only to the most
// blocks ever open at once.
#include "engine/cuda/kivi_open_blocks.h"

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <stdexcept>
#include <vector>

#include <QTest>

using kvscope::cuda::KiviOpenBlocks;

namespace {

struct Sequence {
    std::vector<std::int32_t> blocks;
    std::int32_t length = 0;
};

// A serving workload's block traffic: sequences take blocks from a free
// list as they grow and give them all back when they end (or are preempted
// because the pool ran dry).
class Workload {
public:
    Workload(int num_blocks, int block_size, std::uint32_t seed)
        : block_size_(block_size)
        , rng_(seed) {
        for (int b = num_blocks - 1; b >= 0; --b) {
            free_.push_back(b);
        }
    }

    // The slots one step writes: some sequences start, some advance by a
    // chunk (1 token: a decode), now and then one rewrites its entries from
    // a block boundary (token-eviction compaction). Blocks of sequences that
    // end or cannot grow are appended to `released`.
    std::vector<std::int32_t> step(int max_sequences, int max_chunk, int rewrite_percent,
                                   std::vector<std::int32_t>& released) {
        std::uniform_int_distribution<int> percent(0, 99);
        if (static_cast<int>(running_.size()) < max_sequences && percent(rng_) < 40) {
            running_.emplace_back();
        }
        std::vector<std::int32_t> mapping;
        for (std::size_t i = 0; i < running_.size();) {
            Sequence& s = running_[i];
            if (s.length > 0 && percent(rng_) < 5) { // finished
                finish(i, released);
                continue;
            }
            if (percent(rng_) < 30) { // not scheduled this step
                ++i;
                continue;
            }
            if (s.length > 0 && percent(rng_) < rewrite_percent) {
                // Compaction: entries from a block boundary to the end again.
                const std::int32_t first =
                    std::uniform_int_distribution<std::int32_t>(0, s.length - 1)(rng_) /
                    block_size_ * block_size_;
                for (std::int32_t e = first; e < s.length; ++e) {
                    mapping.push_back(slot_of(s, e));
                }
                ++i;
                continue;
            }
            const int chunk = std::uniform_int_distribution<int>(1, max_chunk)(rng_);
            if (!grow(s, s.length + chunk)) { // preempted: the pool ran dry
                finish(i, released);
                continue;
            }
            for (std::int32_t e = s.length; e < s.length + chunk; ++e) {
                mapping.push_back(slot_of(s, e));
            }
            s.length += chunk;
            ++i;
        }
        // The order of a batch's tokens must not matter to the bookkeeping.
        std::shuffle(mapping.begin(), mapping.end(), rng_);
        return mapping;
    }

private:
    std::int32_t slot_of(const Sequence& s, std::int32_t entry) const {
        return s.blocks[static_cast<std::size_t>(entry / block_size_)] * block_size_ +
               entry % block_size_;
    }
    bool grow(Sequence& s, std::int32_t length) {
        while (static_cast<std::int32_t>(s.blocks.size()) * block_size_ < length) {
            if (free_.empty()) {
                return false;
            }
            s.blocks.push_back(free_.back());
            free_.pop_back();
        }
        return true;
    }
    void finish(std::size_t i, std::vector<std::int32_t>& released) {
        for (const std::int32_t b : running_[i].blocks) {
            free_.push_back(b);
            released.push_back(b);
        }
        running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(i));
    }

    int block_size_;
    std::mt19937 rng_;
    std::vector<std::int32_t> free_;
    std::vector<Sequence> running_;
};

} // namespace

class TestKiviOpenBlocks : public QObject {
    Q_OBJECT

private slots:
    void random_workloads_keep_the_invariants_data();
    void random_workloads_keep_the_invariants();
    void a_block_filled_in_one_step_is_read_quantised_and_freed();
    void freed_slots_are_reused_before_the_pool_grows();
    void misuse_is_refused();
    void padding_rows_keep_the_spare_block_open();
};

void TestKiviOpenBlocks::random_workloads_keep_the_invariants_data() {
    QTest::addColumn<int>("seed");
    QTest::addColumn<int>("num_blocks");
    QTest::addColumn<int>("block_size");
    QTest::addColumn<int>("max_sequences");
    QTest::addColumn<int>("max_chunk");
    QTest::addColumn<int>("rewrite_percent");
    QTest::addColumn<int>("steps");
    QTest::newRow("decodes, block 16") << 1 << 256 << 16 << 8 << 1 << 0 << 600;
    QTest::newRow("prefill chunks, block 16") << 2 << 512 << 16 << 6 << 48 << 0 << 400;
    QTest::newRow("block size 1: every write fills") << 3 << 64 << 1 << 4 << 5 << 0 << 300;
    QTest::newRow("tight pool, preemptions") << 4 << 24 << 8 << 10 << 20 << 0 << 600;
    QTest::newRow("compaction rewrites, block 4") << 5 << 128 << 4 << 6 << 8 << 15 << 500;
    QTest::newRow("everything, block 32") << 6 << 96 << 32 << 12 << 70 << 10 << 500;
}

void TestKiviOpenBlocks::random_workloads_keep_the_invariants() {
    QFETCH(int, seed);
    QFETCH(int, num_blocks);
    QFETCH(int, block_size);
    QFETCH(int, max_sequences);
    QFETCH(int, max_chunk);
    QFETCH(int, rewrite_percent);
    QFETCH(int, steps);

    KiviOpenBlocks open(num_blocks);
    Workload workload(num_blocks, block_size, static_cast<std::uint32_t>(seed));
    std::map<std::int32_t, std::int32_t> model; // open block -> its slot, as it must be
    int peak_open = 0;
    int filled_total = 0;
    int reopened_total = 0;
    for (int step = 0; step < steps; ++step) {
        std::vector<std::int32_t> released;
        const std::vector<std::int32_t> mapping =
            workload.step(max_sequences, max_chunk, rewrite_percent, released);
        open.release(released);
        for (const std::int32_t b : released) {
            model.erase(b);
        }
        for (std::int32_t b = 0; b < num_blocks; ++b) {
            QCOMPARE(open.current_slots()[static_cast<std::size_t>(b)],
                     model.contains(b) ? model.at(b) : -1);
        }
        QCOMPARE(open.open_count(), static_cast<int>(model.size()));

        std::set<std::int32_t> written;
        std::set<std::int32_t> filled;
        for (const std::int32_t slot : mapping) {
            written.insert(slot / block_size);
            if (slot % block_size == block_size - 1) {
                filled.insert(slot / block_size);
            }
        }
        const int capacity_before = open.capacity();
        const int needed = open.capacity_needed(mapping, block_size);
        const KiviOpenBlocks::Step& plan = open.begin_step(mapping, block_size);
        QCOMPARE(plan.write_slot.size(), std::size_t(num_blocks));
        QCOMPARE(plan.read_slot.size(), std::size_t(num_blocks));

        // Live now: what was open plus what this step writes, each in a slot
        // of its own below the capacity; slots of open blocks do not move.
        std::set<std::int32_t> live_slots;
        int live = 0;
        std::set<std::int32_t> expected_opened;
        for (std::int32_t b = 0; b < num_blocks; ++b) {
            const std::int32_t w = plan.write_slot[static_cast<std::size_t>(b)];
            const bool should_live = model.contains(b) || written.contains(b);
            QVERIFY2((w >= 0) == should_live, qPrintable(QString("block %1").arg(b)));
            if (w < 0) {
                continue;
            }
            ++live;
            QVERIFY2(w < plan.capacity,
                     qPrintable(QString("slot %1 of %2").arg(w).arg(plan.capacity)));
            QVERIFY2(live_slots.insert(w).second,
                     qPrintable(QString("slot %1 is shared (block %2)").arg(w).arg(b)));
            if (model.contains(b)) {
                QCOMPARE(w, model.at(b));
            } else {
                expected_opened.insert(w);
            }
            // Reads see the open copy except where this step fills the block.
            QCOMPARE(plan.read_slot[static_cast<std::size_t>(b)], filled.contains(b) ? -1 : w);
        }
        const std::set<std::int32_t> opened(plan.opened_slots.begin(), plan.opened_slots.end());
        QCOMPARE(plan.opened_slots.size(), opened.size());
        QCOMPARE(opened, expected_opened);
        const std::set<std::int32_t> listed(plan.filled_blocks.begin(), plan.filled_blocks.end());
        QCOMPARE(plan.filled_blocks.size(), listed.size());
        QCOMPARE(listed, filled);
        // The pool grows only when every slot is taken, and only as far as needed.
        peak_open = std::max(peak_open, live);
        QCOMPARE(plan.capacity, std::max(capacity_before, live));
        QCOMPARE(plan.capacity, peak_open);
        QCOMPARE(needed, plan.capacity);
        QCOMPARE(open.capacity(), plan.capacity);

        for (const std::int32_t b : written) {
            if (!model.contains(b)) {
                ++reopened_total;
                model[b] = plan.write_slot[static_cast<std::size_t>(b)];
            }
        }
        const std::vector<std::int32_t> write_slot = plan.write_slot;
        open.end_step();
        // Filled blocks are quantised now: their slots are free.
        for (const std::int32_t b : filled) {
            model.erase(b);
        }
        filled_total += static_cast<int>(filled.size());
        for (std::int32_t b = 0; b < num_blocks; ++b) {
            const std::int32_t now = open.current_slots()[static_cast<std::size_t>(b)];
            QCOMPARE(now, filled.contains(b) ? -1 : write_slot[static_cast<std::size_t>(b)]);
        }
        QCOMPARE(open.open_count(), static_cast<int>(model.size()));
    }
    // The workload did what the row says it exercises.
    QVERIFY(filled_total > 0);
    QVERIFY(reopened_total > 0);
    QVERIFY(peak_open > 0);
    qDebug("%d steps: %d blocks filled, %d slots handed out, pool of %d slots", steps, filled_total,
           reopened_total, open.capacity());
}

void TestKiviOpenBlocks::a_block_filled_in_one_step_is_read_quantised_and_freed() {
    KiviOpenBlocks open(4);
    // Block 1 (slots 4..7) written whole, block 2 (8..11) started: one step.
    const std::vector<std::int32_t> mapping = {4, 5, 6, 7, 8, 9};
    const KiviOpenBlocks::Step& plan = open.begin_step(mapping, 4);
    QCOMPARE(plan.write_slot, (std::vector<std::int32_t>{-1, 0, 1, -1}));
    QCOMPARE(plan.read_slot, (std::vector<std::int32_t>{-1, -1, 1, -1}));
    QCOMPARE(plan.filled_blocks, std::vector<std::int32_t>{1});
    QCOMPARE(plan.opened_slots, (std::vector<std::int32_t>{0, 1}));
    QCOMPARE(plan.capacity, 2);
    open.end_step();
    QCOMPARE(std::vector<std::int32_t>(open.current_slots().begin(), open.current_slots().end()),
             (std::vector<std::int32_t>{-1, -1, 1, -1}));
    QCOMPARE(open.open_count(), 1);
    // Only the last entry of a block: opened and filled in the same step.
    const std::vector<std::int32_t> last = {15};
    const KiviOpenBlocks::Step& next = open.begin_step(last, 4);
    QCOMPARE(next.write_slot[3], 0); // block 1's freed slot, not a new one
    QCOMPARE(next.read_slot[3], -1);
    QCOMPARE(next.filled_blocks, std::vector<std::int32_t>{3});
    QCOMPARE(next.capacity, 2);
    open.end_step();
    QCOMPARE(open.current_slots()[3], -1);
}

void TestKiviOpenBlocks::freed_slots_are_reused_before_the_pool_grows() {
    KiviOpenBlocks open(8);
    const std::vector<std::int32_t> three = {0, 4, 8}; // blocks 0, 1, 2 with block size 4
    open.begin_step(three, 4);
    open.end_step();
    QCOMPARE(open.capacity(), 3);
    const std::vector<kvscope::kv::BlockId> freed = {0, 2, 7}; // 7 was never open
    open.release(freed);
    QCOMPARE(open.open_count(), 1);
    QCOMPARE(open.current_slots()[0], -1);
    QCOMPARE(open.current_slots()[2], -1);
    const std::vector<std::int32_t> two = {12, 16}; // blocks 3 and 4
    QCOMPARE(open.capacity_needed(two, 4), 3);
    const KiviOpenBlocks::Step& plan = open.begin_step(two, 4);
    QCOMPARE(plan.capacity, 3);
    const std::set<std::int32_t> reused = {plan.write_slot[3], plan.write_slot[4]};
    QCOMPARE(reused, (std::set<std::int32_t>{0, 2}));
    open.end_step();
    const std::vector<std::int32_t> one_more = {20}; // block 5: all three slots taken
    QCOMPARE(open.capacity_needed(one_more, 4), 4);
    QCOMPARE(open.begin_step(one_more, 4).capacity, 4);
    open.end_step();
}

// A decode graph's padding rows (cuda::pad_decode_batch) write entry 0 of a
// spare block past the KV manager's pool, which the CUDA backend's
// bookkeeping therefore covers (num_blocks + 1): the spare holds one slot for
// good and never fills, whatever the real rows do; at block size 1 it fills
// every step, listed once however many rows write it.
void TestKiviOpenBlocks::padding_rows_keep_the_spare_block_open() {
    const int num_blocks = 8;
    const int spare = num_blocks;
    for (const int block_size : {4, 1}) {
        KiviOpenBlocks open(num_blocks + 1);
        int spare_slot = -1;
        for (int step = 0; step < 12; ++step) {
            // Two real decodes in blocks 0 and 3, three padding rows.
            std::vector<std::int32_t> mapping{step % block_size,
                                              3 * block_size + step % block_size};
            if (block_size == 1) {
                mapping = {step % 3, 3 + step % 3};
            }
            mapping.insert(mapping.end(), 3, spare * block_size);
            const KiviOpenBlocks::Step& plan = open.begin_step(mapping, block_size);
            QCOMPARE(plan.write_slot.size(), static_cast<std::size_t>(num_blocks + 1));
            const std::int32_t slot = plan.write_slot[static_cast<std::size_t>(spare)];
            QVERIFY(slot >= 0);
            const auto spare_fills =
                std::count(plan.filled_blocks.begin(), plan.filled_blocks.end(), spare);
            if (block_size > 1) {
                QCOMPARE(spare_fills, 0);
                QVERIFY(spare_slot < 0 || slot == spare_slot); // it never moves
                spare_slot = slot;
                QVERIFY(plan.capacity <= 3); // the two real blocks and the spare
            } else {
                QCOMPARE(spare_fills, 1);
            }
            open.end_step();
        }
    }
}

void TestKiviOpenBlocks::misuse_is_refused() {
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, KiviOpenBlocks(0));
    KiviOpenBlocks open(2);
    const std::vector<std::int32_t> outside = {8}; // 2 blocks of 4: slots 0..7
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, open.begin_step(outside, 4));
    const std::vector<std::int32_t> negative = {-1};
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, open.begin_step(negative, 4));
    QCOMPARE(open.capacity(), 0); // a refused step changes nothing
    const std::vector<std::int32_t> inside = {1};
    open.begin_step(inside, 4);
    QVERIFY_THROWS_EXCEPTION(std::logic_error, open.begin_step(inside, 4));
    const std::vector<kvscope::kv::BlockId> block0 = {0};
    QVERIFY_THROWS_EXCEPTION(std::logic_error, open.release(block0));
    open.end_step();
    const std::vector<kvscope::kv::BlockId> block9 = {9};
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, open.release(block9));
    open.release(block0);
    QCOMPARE(open.open_count(), 0);
}

QTEST_GUILESS_MAIN(TestKiviOpenBlocks)
#include "tst_kivi_open_blocks.moc"
