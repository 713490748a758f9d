// RunStore beyond what the engine soak checks: recordings from before
// block_unshared, damaged block ids, text and lanes read back from a file,
// a speculative step's rolled-back slots.
#include "engine/events/typed_events.h"
#include "profiler/attach/kv_event_source.h"
#include "profiler/recording/recorder.h"
#include "profiler/recording/recording_reader.h"
#include "profiler/store/run_store.h"
#include "tests/support/engine_events.h"

#include <algorithm>
#include <random>
#include <sqlite3.h>

#include <QElapsedTimer>
#include <QTemporaryDir>
#include <QTest>

using kvscope::events::EngineEvent;
using kvscope::events::EventKind;
using kvscope::profiler::BlockUse;
using kvscope::profiler::RunStore;
using kvscope::test::engine_event;

namespace {

// Two requests share block 0 (cached by the first), then both end.
std::vector<EngineEvent> shared_block_run(bool with_unshared) {
    std::vector<EngineEvent> events{
        engine_event(1, EventKind::run_config, -1, -1, 4, 2),
        engine_event(2, EventKind::request_arrived, 0, -1, 3),
        engine_event(3, EventKind::block_allocated, 0, 0),
        engine_event(4, EventKind::block_cached, 0, 0, 0x1234, 0),
        engine_event(5, EventKind::request_arrived, 1, -1, 3),
        engine_event(6, EventKind::block_shared, 1, 0),
    };
    if (with_unshared) {
        events.push_back(engine_event(7, EventKind::block_unshared, 0, 0, 1));
    }
    events.push_back(engine_event(8, EventKind::block_freed, 1, 0, 1));
    return events;
}

// Every resident block of every source, as "source rank medium hash" lines.
std::vector<std::string> resident_lines(const kvscope::attach::AttachedState& state) {
    std::vector<std::string> out;
    for (const auto& [id, source] : state.sources()) {
        for (const auto& [key, tier] : source.blocks.tiers()) {
            for (const auto& [hash, block] : tier.blocks) {
                out.push_back(std::to_string(id) + " " + std::to_string(key.rank) + " " +
                              key.medium + " " + hash.hex());
            }
        }
    }
    std::sort(out.begin(), out.end());
    return out;
}

} // namespace

class TestRunStore : public QObject {
    Q_OBJECT

private slots:
    void freed_block_has_no_owner_data();
    void freed_block_has_no_owner();
    void damaged_block_id_is_refused();
    void cached_block_naming_another_group_finds_its_parent();
    void recording_reads_back_text_and_lanes();
    void recording_past_the_replay_budget_is_refused();
    void attached_history_is_bounded_and_scrubs_exactly();
    void following_snapshots_shows_what_the_rows_say();
    void rolled_back_slots_mark_the_blocks_they_are_in();
    void offload_tier_marks_blocks_and_counts_its_own();
};

void TestRunStore::offload_tier_marks_blocks_and_counts_its_own() {
    namespace ev = kvscope::events;
    const auto at = [](std::int64_t t, EngineEvent e) {
        e.time_ns = t;
        return e;
    };
    RunStore store;
    store.append(at(1, ev::to_event(ev::RunConfig{
                           .blocks = 8,
                           .block_size = 4,
                           .settings = "{\"offload_tier\":\"file\",\"offload_blocks\":32}"})));
    QCOMPARE(store.tier_capacity(), std::int64_t{32});
    QCOMPARE(store.tier_medium(), std::string("file"));
    store.append(engine_event(2, EventKind::block_allocated, 0, 3));
    store.append(engine_event(3, EventKind::block_cached, 0, 3, 0x77, 0));
    // Write-through: cached and saved at once; then request 1 loads a block
    // back into block 5.
    store.append(
        at(4, ev::to_event(ev::BlockOffloaded{
                  .block = 3, .request = 0, .hash = 0x77, .bytes = 64, .tier_blocks = 1})));
    store.append(engine_event(5, EventKind::block_allocated, 1, 5));
    store.append(
        at(6, ev::to_event(ev::BlockReloaded{
                  .block = 5, .request = 1, .hash = 0x99, .bytes = 64, .tier_blocks = 1})));
    using Tier = kvscope::profiler::BlockState::Tier;
    QVERIFY(store.block_map_now().blocks().at(3).tier == Tier::saved);
    QVERIFY(store.block_map_now().blocks().at(5).tier == Tier::loaded);
    QCOMPARE(store.block_map_now().tier_blocks(), std::int64_t{1});
    QVERIFY(store.block_map_at(5).blocks().at(5).tier == Tier::none); // scrubbed back
    // A block reused for something else no longer holds what the tier does.
    store.append(engine_event(7, EventKind::block_freed, 1, 5, 0));
    store.append(engine_event(8, EventKind::block_allocated, 2, 5));
    QVERIFY(store.block_map_now().blocks().at(5).tier == Tier::none);
    const kvscope::profiler::CounterTrack& tier =
        store.counter(kvscope::profiler::Counter::tier_blocks);
    QCOMPARE(tier.values.size(), std::size_t{2});
    QCOMPARE(tier.t_ns.front(), std::int64_t{4});
    // Settings without a tier, or not JSON at all, show none.
    RunStore plain;
    plain.append(
        at(1, ev::to_event(ev::RunConfig{
                  .blocks = 8, .block_size = 4, .settings = "{\"offload_blocks\":\"lots\"}"})));
    QCOMPARE(plain.tier_capacity(), std::int64_t{0});
    RunStore foreign;
    foreign.append(at(1, ev::to_event(ev::RunConfig{
                             .blocks = 8, .block_size = 4, .settings = "not json at all"})));
    QCOMPARE(foreign.tier_capacity(), std::int64_t{0});
    // The full tier lets block 3's content go: its mark goes, the tier shrinks.
    store.append(at(9, ev::to_event(ev::TierDropped{.hash = 0x77, .tier_blocks = 0})));
    QVERIFY(store.block_map_now().blocks().at(3).tier == Tier::none);
    QCOMPARE(store.block_map_now().tier_blocks(), std::int64_t{0});
    QVERIFY(store.block_map_at(8).blocks().at(3).tier == Tier::saved); // scrubbed back
    QCOMPARE(tier.values.back(), 0.0);

    // Scrubbing across checkpoints (one every 2048 block events): a block
    // saved, many events, then its hash dropped; moments on either side.
    store.append(engine_event(10, EventKind::block_allocated, 3, 6));
    store.append(engine_event(11, EventKind::block_cached, 3, 6, 0x88, 0));
    store.append(
        at(12, ev::to_event(ev::BlockOffloaded{
                   .block = 6, .request = 3, .hash = 0x88, .bytes = 64, .tier_blocks = 1})));
    std::int64_t t = 13;
    for (int i = 0; i < 2100; ++i) {
        store.append(engine_event(t++, EventKind::block_allocated, 4, 7));
        store.append(engine_event(t++, EventKind::block_freed, 4, 7, 0));
    }
    const std::int64_t before_drop = t - 1;
    store.append(at(t, ev::to_event(ev::TierDropped{.hash = 0x88, .tier_blocks = 0})));
    QVERIFY(store.block_map_at(before_drop).blocks().at(6).tier == Tier::saved);
    QVERIFY(store.block_map_at(t).blocks().at(6).tier == Tier::none);
    QVERIFY(store.block_map_now().blocks().at(6).tier == Tier::none);
    // Evicted from the pool, a block's content is no longer what the tier
    // holds: its mark goes.
    store.append(
        at(t + 1, ev::to_event(ev::BlockOffloaded{
                      .block = 6, .request = 3, .hash = 0x88, .bytes = 64, .tier_blocks = 1})));
    QVERIFY(store.block_map_now().blocks().at(6).tier == Tier::saved);
    store.append(engine_event(t + 2, EventKind::block_evicted, 3, 6));
    QVERIFY(store.block_map_now().blocks().at(6).tier == Tier::none);
}

void TestRunStore::rolled_back_slots_mark_the_blocks_they_are_in() {
    // Request 0 with blocks 2 and 5 (4 slots each). A step drafted 4 tokens
    // after entry 4 and kept 1: entries 6..8 rolled back; 6 and 7 sit in
    // block 5, entry 8 was in a third block the rollback already freed.
    RunStore store;
    store.append(engine_event(1, EventKind::run_config, -1, -1, 8, 4));
    store.append(engine_event(2, EventKind::block_allocated, 0, 2));
    store.append(engine_event(3, EventKind::block_allocated, 0, 5));
    store.append(engine_event(4, EventKind::step_begin, -1, -1, 7, 5, 1, 2));
    store.append(engine_event(5, EventKind::block_allocated, 0, 6));
    store.append(engine_event(6, EventKind::block_freed, 0, 6, 0));
    // draft_verified: drafted 4 (a), accepted 1 (b), 1 block released (c), 6 entries (d).
    store.append(engine_event(7, EventKind::draft_verified, 0, -1, 4, 1, 1, 6));
    store.append(engine_event(8, EventKind::step_end, -1, -1, 7, 0, 2));
    const auto& blocks = store.block_map_now().blocks();
    QCOMPARE(blocks.at(2).rolled_back, 0);
    QCOMPARE(blocks.at(5).rolled_back, 2);
    QCOMPARE(blocks.at(6).rolled_back, 0);
    QCOMPARE(store.steps().size(), std::size_t{1});
    QCOMPARE(store.steps()[0].drafted, 4);
    QCOMPARE(store.steps()[0].accepted, 1);
    // Replayed: not before the verify; the next verify replaces the marks.
    QCOMPARE(store.block_map_at(6).blocks().at(5).rolled_back, 0);
    QCOMPARE(store.block_map_at(7).blocks().at(5).rolled_back, 2);
    store.append(engine_event(9, EventKind::draft_verified, 0, -1, 2, 2, 0, 9));
    QCOMPARE(store.block_map_now().blocks().at(5).rolled_back, 0);
    QCOMPARE(store.block_map_at(8).blocks().at(5).rolled_back, 2);
    // A freed block carries no marks.
    store.append(engine_event(10, EventKind::draft_verified, 0, -1, 3, 0, 0, 5));
    QCOMPARE(store.block_map_now().blocks().at(5).rolled_back, 3);
    store.append(engine_event(11, EventKind::block_freed, 0, 5, 0));
    QCOMPARE(store.block_map_now().blocks().at(5).rolled_back, 0);
}

void TestRunStore::freed_block_has_no_owner_data() {
    QTest::addColumn<bool>("with_unshared");
    QTest::newRow("current events") << true;
    QTest::newRow("recorded before block_unshared") << false;
}

void TestRunStore::freed_block_has_no_owner() {
    QFETCH(bool, with_unshared);
    RunStore store;
    for (const EngineEvent& e : shared_block_run(with_unshared)) {
        store.append(e);
    }
    const auto& block = store.block_map_now().blocks().at(0);
    QCOMPARE(block.use(), BlockUse::cached); // its hash stays: reusable
    QCOMPARE(block.ref_count(), 0);
    QVERIFY(store.block_map_now().block_table(0).empty());
    QVERIFY(store.block_map_now().block_table(1).empty());
    // Before the end both held it.
    QCOMPARE(store.block_map_at(6).blocks().at(0).ref_count(), 2);
    QCOMPARE(store.prefix_nodes().size(), std::size_t{1});
    QCOMPARE(store.prefix_nodes()[0].reuses, std::int64_t{1});
}

void TestRunStore::cached_block_naming_another_group_finds_its_parent() {
    // A prefix node's parent is the block before it in its request's table
    // of the block's own KV group, whatever group a (damaged) block_cached
    // names: fuzz_recording_rows found one naming a group with no table,
    // which read past that table's end.
    namespace ev = kvscope::events;
    const auto at = [](std::int64_t t, auto typed) {
        EngineEvent event = ev::to_event(typed);
        event.time_ns = t;
        return event;
    };
    RunStore store;
    store.append(engine_event(1, EventKind::run_config, -1, -1, 8, 2));
    store.append(at(2, ev::BlockAllocated{.block = 6, .request = 0, .group = 1}));
    store.append(at(3, ev::BlockAllocated{.block = 7, .request = 0, .group = 1}));
    store.append(at(4, ev::BlockCached{.block = 6, .request = 0, .hash = 11, .group = 1}));
    store.append(at(5, ev::BlockCached{.block = 7, .request = 0, .hash = 12, .group = 3}));
    QCOMPARE(store.prefix_nodes().size(), std::size_t{2});
    QCOMPARE(store.prefix_nodes()[0].block, 6);
    QCOMPARE(store.prefix_nodes()[0].parent, -1);
    QCOMPARE(store.prefix_nodes()[1].parent, 0); // block 6's node
    QCOMPARE(store.block_map_now().block_before(0, 7), 6);
    QCOMPARE(store.block_map_now().block_before(0, 6), -1); // first in its table
    QCOMPARE(store.block_map_now().block_before(1, 7), -1); // not that request's
}

void TestRunStore::damaged_block_id_is_refused() {
    // In memory: a negative id is ignored, not indexed.
    RunStore store;
    store.append(engine_event(1, EventKind::run_config, -1, -1, 4, 2));
    EngineEvent bad = engine_event(2, EventKind::block_cached, 0, -7, 1, 0);
    store.append(bad);
    QCOMPARE(store.block_map_now().blocks().size(), std::size_t{4});
    QVERIFY(store.prefix_nodes().empty());

    // In a file: a damaged id is a clear error, not a huge allocation.
    QTemporaryDir dir;
    const std::string path = dir.filePath("damaged.sqlite").toStdString();
    {
        kvscope::profiler::Recorder recorder(path, {});
        for (const EngineEvent& e : shared_block_run(true)) {
            recorder.on_event(e);
        }
        recorder.close();
    }
    sqlite3* db = nullptr;
    QCOMPARE(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    QCOMPARE(sqlite3_exec(db, "UPDATE KVSCOPE_EVENTS SET block = 4000000000 WHERE block = 0",
                          nullptr, nullptr, nullptr),
             SQLITE_OK);
    sqlite3_close(db);
    RunStore loaded;
    try {
        kvscope::profiler::load_recording(path, loaded);
        QFAIL("a damaged block id was accepted");
    } catch (const kvscope::profiler::RecordingError& e) {
        QVERIFY2(std::string(e.what()).find("damaged") != std::string::npos, e.what());
    }
}

// A replay holds every event, so it takes at most a budget of them (half the
// machine's memory): a recording whose row ids say more is refused before
// anything is read (a billion rows take no time to refuse), and one whose ids
// understate its rows is stopped once reading passes the budget.
void TestRunStore::recording_past_the_replay_budget_is_refused() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("big.sqlite").toStdString();
    const std::vector<EngineEvent> events = shared_block_run(true);
    {
        kvscope::profiler::Recorder recorder(path, {});
        for (const EngineEvent& e : events) {
            recorder.on_event(e);
        }
        recorder.close();
    }
    const auto refusal = [&](std::int64_t max_events) -> std::string {
        RunStore store;
        try {
            kvscope::profiler::load_recording(path, store, {}, max_events);
        } catch (const kvscope::profiler::RecordingError& e) {
            if (store.event_count() > max_events) {
                return "held " + std::to_string(store.event_count()) + " events";
            }
            return e.what();
        }
        return {};
    };
    const auto size = static_cast<std::int64_t>(events.size());
    QCOMPARE(refusal(size), std::string()); // exactly the budget: read
    std::string why = refusal(size - 1);
    QVERIFY2(why.find(path + " holds " + std::to_string(size) + " events or more") !=
                     std::string::npos &&
                 why.find("kvscope stats") != std::string::npos,
             why.c_str());

    // Ids that understate the rows (a damaged or hostile file): the rows are
    // counted as they are read.
    sqlite3* db = nullptr;
    QCOMPARE(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    QCOMPARE(sqlite3_exec(db, "UPDATE KVSCOPE_EVENTS SET id = -id", nullptr, nullptr, nullptr),
             SQLITE_OK);
    sqlite3_close(db);
    why = refusal(size - 1);
    QVERIFY2(why.find(" events or more") != std::string::npos, why.c_str());

    // A trillion rows, as the ids say (past any machine's budget): refused at
    // once, naming the count.
    QCOMPARE(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    QCOMPARE(sqlite3_exec(db, "UPDATE KVSCOPE_EVENTS SET id = 1000000000000 WHERE id = -1", nullptr,
                          nullptr, nullptr),
             SQLITE_OK);
    sqlite3_close(db);
    QElapsedTimer took;
    took.start();
    why = refusal(kvscope::profiler::replay_event_budget());
    QVERIFY2(why.find("holds 1000000000000 events or more") != std::string::npos, why.c_str());
    QVERIFY(took.elapsed() < 5000);
}

void TestRunStore::recording_reads_back_text_and_lanes() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("text.sqlite").toStdString();
    std::vector<EngineEvent> events = shared_block_run(true);
    events[1].text = kvscope::events::encode_pieces({"Hel", "lo", " \xc3"});
    events.push_back(engine_event(9, EventKind::request_admitted, 0, -1, 0, 3));
    events.push_back(engine_event(10, EventKind::first_token, 0));
    EngineEvent token = engine_event(10, EventKind::token_sampled, 0, -1, 42, 1);
    token.text = "\xa9!"; // completes the character the prompt's last piece began
    events.push_back(token);
    events.push_back(engine_event(12, EventKind::request_preempted, 0, -1, 1));
    EngineEvent done = engine_event(20, EventKind::request_finished, 0, -1, 1);
    done.text = "token limit";
    events.push_back(done);
    {
        kvscope::profiler::Recorder recorder(path, {});
        for (const EngineEvent& e : events) {
            recorder.on_event(e);
        }
        recorder.close();
    }
    RunStore store;
    double last_progress = -1;
    kvscope::profiler::load_recording(path, store, [&](double share) {
        last_progress = share;
        return true;
    });
    QCOMPARE(last_progress, 1.0);
    const kvscope::profiler::RequestRecord* r = store.request(0);
    QVERIFY(r != nullptr);
    QCOMPARE(r->text(0, 4), std::string("Hello \xc3\xa9!"));
    QCOMPARE(r->output_text(10), std::string("\xa9!"));
    QCOMPARE(r->output_text(9), std::string());
    QCOMPARE(r->state_at(5), std::string("waiting"));
    QCOMPARE(r->state_at(9), std::string("prefill"));
    QCOMPARE(r->state_at(11), std::string("decode"));
    QCOMPARE(r->state_at(15), std::string("preempted"));
    QCOMPARE(r->state_at(25), std::string("finished"));
    QCOMPARE(r->reason, std::string("token limit"));
    QCOMPARE(r->ttft_ms(), 8e-6);
}

// An attach left running holds a bounded history: checkpoints every few rows,
// the newest few kept with the rows since the oldest; scrubbing to any moment
// they cover gives exactly what every row up to it gives, and a moment
// before them the oldest state kept.
void TestRunStore::attached_history_is_bounded_and_scrubs_exactly() {
    using namespace kvscope::attach;
    std::mt19937_64 rng(5);
    std::vector<EngineEvent> rows;
    std::vector<std::int64_t> times;
    for (std::int64_t t = 1000; t < 1400; ++t) {
        SourceBatch batch;
        batch.batch.ts = 1.7e9;
        const int events = 1 + static_cast<int>(rng() % 3);
        for (int e = 0; e < events; ++e) {
            const auto hash = BlockHash::from_uint(rng() % 40);
            if (rng() % 3 == 0) {
                batch.batch.events.emplace_back(RemovedBlocks{{hash}, "GPU", {}});
            } else {
                batch.batch.events.emplace_back(
                    StoredBlocks{{hash}, {}, {1, 2}, 2, {}, rng() % 4 == 0 ? "CPU" : "GPU", {}});
            }
        }
        const std::size_t first = rows.size();
        append_typed_events(static_cast<std::int64_t>(rng() % 2), batch, rows);
        for (std::size_t r = first; r < rows.size(); ++r) {
            rows[r].time_ns = t; // a poll's rows share one time
        }
        times.push_back(t);
    }
    RunStore everything;
    everything.attached().set_limits(std::size_t{1} << 30, 1);
    RunStore bounded;
    bounded.attached().set_limits(25, 3);
    RunStore whole; // a recording's replay: thinned checkpoints, every row
    whole.attached().set_limits(25, 3);
    whole.attached().keep_whole();
    for (const EngineEvent& row : rows) {
        everything.append(row);
        bounded.append(row);
        whole.append(row);
        // The rows since the oldest of 3 checkpoints (at most 4 x 25), and
        // those it no longer needs going two per row appended.
        QVERIFY(bounded.attached().rows_kept() <= 5 * 25);
    }
    QCOMPARE(whole.attached().rows_kept(), rows.size());
    QCOMPARE(whole.attached().start_ns(), everything.attached().start_ns());
    for (const std::int64_t t : times) {
        QCOMPARE(resident_lines(*whole.attached().state_at(t)),
                 resident_lines(*everything.attached().state_at(t)));
    }
    QCOMPARE(everything.attached().rows_kept(), rows.size());
    const std::int64_t start = bounded.attached().start_ns();
    QVERIFY(start > times.front() && start < times.back());
    QCOMPARE(resident_lines(bounded.attached().state()),
             resident_lines(everything.attached().state()));
    for (const std::int64_t t : times) {
        QCOMPARE(resident_lines(*bounded.attached().state_at(t)),
                 resident_lines(*everything.attached().state_at(std::max(t, start))));
    }
}

// A live attach's window follows the attach's own state (snapshots) instead
// of reading every row back: once a snapshot's rows are all in, it shows
// what a store reading the rows shows at that row, whether the snapshot
// came before its rows or after; the final state is the rows' state; and
// scrubbing from snapshot checkpoints gives what the rows give.
void TestRunStore::following_snapshots_shows_what_the_rows_say() {
    using namespace kvscope::attach;
    std::mt19937_64 rng(11);
    AttachedState session; // the attach's own state, applied batch by batch
    std::vector<EngineEvent> rows;
    struct Snapshot {
        std::uint64_t rows;
        std::shared_ptr<const AttachedState> state;
    };
    std::vector<Snapshot> snapshots;
    for (std::int64_t t = 1000; t < 1600; ++t) {
        SourceBatch batch;
        batch.batch.ts = 1.7e9;
        const int events = 1 + static_cast<int>(rng() % 3);
        for (int e = 0; e < events; ++e) {
            const auto hash = BlockHash::from_uint(rng() % 50);
            if (rng() % 3 == 0) {
                batch.batch.events.emplace_back(RemovedBlocks{{hash}, "GPU", {}});
            } else {
                batch.batch.events.emplace_back(
                    StoredBlocks{{hash}, {}, {1, 2}, 2, {}, rng() % 4 == 0 ? "CPU" : "GPU", {}});
            }
        }
        const std::int64_t source = static_cast<std::int64_t>(rng() % 2);
        const std::size_t first = rows.size();
        append_typed_events(source, batch, rows);
        for (std::size_t r = first; r < rows.size(); ++r) {
            rows[r].time_ns = t;
        }
        session.apply(source, batch, t);
        if (rng() % 7 == 0) {
            snapshots.push_back({rows.size(), std::make_shared<const AttachedState>(session)});
        }
    }
    snapshots.push_back({rows.size(), std::make_shared<const AttachedState>(session)});

    for (const bool snapshots_late : {false, true}) {
        RunStore reading; // reads every row
        reading.attached().set_limits(std::size_t{1} << 30, 1);
        RunStore following;
        following.attached().follow_snapshots();
        following.attached().set_limits(40, 3);
        std::size_t next = 0;
        for (std::size_t r = 0; r < rows.size(); ++r) {
            // Early: handed over before their rows are in (the window is
            // behind); late: after.
            while (!snapshots_late && next < snapshots.size() && snapshots[next].rows <= r + 5) {
                following.attached().add_snapshot(snapshots[next].rows, snapshots[next].state);
                ++next;
            }
            reading.append(rows[r]);
            following.append(rows[r]);
            while (snapshots_late && next < snapshots.size() && snapshots[next].rows <= r + 1) {
                following.attached().add_snapshot(snapshots[next].rows, snapshots[next].state);
                QCOMPARE(resident_lines(following.attached().state()),
                         resident_lines(reading.attached().state()));
                ++next;
            }
        }
        QCOMPARE(next, snapshots.size());
        QCOMPARE(resident_lines(following.attached().state()),
                 resident_lines(reading.attached().state()));
        QCOMPARE(following.attached().shared_state().get(), &following.attached().state());
        QVERIFY(following.attached().rows_kept() < rows.size()); // bounded
        const std::int64_t start = following.attached().start_ns();
        for (std::int64_t t = 1000; t < 1600; t += 7) {
            QCOMPARE(resident_lines(*following.attached().state_at(t)),
                     resident_lines(*reading.attached().state_at(std::max(t, start))));
        }
        // The residency track ends on the last snapshot, however it came.
        const auto& resident = following.counter(kvscope::profiler::Counter::attached_resident);
        QVERIFY(!resident.values.empty());
        QCOMPARE(resident.values.back(),
                 static_cast<double>(reading.attached().state().resident_blocks()));
        // The churn is counted from the rows' kinds alone.
        const auto& stored = reading.counter(kvscope::profiler::Counter::attached_stored);
        QCOMPARE(following.counter(kvscope::profiler::Counter::attached_stored).values,
                 stored.values);
    }
}

QTEST_GUILESS_MAIN(TestRunStore)
#include "tst_run_store.moc"
