// The scheduler on its own, over a real KvManager and no model: a small
// driver plays the engine's part (K/V computed for each chunk, one token
// sampled when a sequence is caught up, finished at its token limit). Checked:
// the token and sequence budgets on every step of random workloads, how
// chunked prefill splits a prompt, which request each victim policy preempts,
// no admission on a step that preempted, first come first served without
// chunked prefill, and why a request that can never run is rejected.
#include "engine/sched/scheduler.h"

#include <algorithm>
#include <memory>
#include <numeric>
#include <random>

#include <QTest>

using namespace kvscope;
using sched::Request;
using sched::RequestState;
using sched::Scheduler;
using sched::SchedulerConfig;
using sched::ScheduleResult;
using sched::VictimPolicy;

Q_DECLARE_METATYPE(VictimPolicy)

namespace {

// Drives a Scheduler the way LlmEngine::step does, minus the forward pass.
struct Driver {
    kv::KvManager kv;
    Scheduler scheduler;
    std::vector<std::unique_ptr<Request>> requests;

    Driver(int blocks, int block_size, const SchedulerConfig& config, bool prefix_caching = false)
        : kv(blocks, block_size, prefix_caching)
        , scheduler(config, kv) {}

    // A request whose prompt tokens no other request shares (no prefix hits).
    Request* add(int prompt_tokens, int max_tokens) {
        auto r = std::make_unique<Request>();
        r->id = static_cast<std::int64_t>(requests.size());
        r->spec.prompt.resize(static_cast<std::size_t>(prompt_tokens));
        std::iota(r->spec.prompt.begin(), r->spec.prompt.end(),
                  static_cast<std::int32_t>(1000 * (r->id + 1)));
        r->spec.max_tokens = max_tokens;
        r->tokens = r->spec.prompt;
        scheduler.add(r.get());
        requests.push_back(std::move(r));
        return requests.back().get();
    }

    // Schedules one step and applies it as the engine would.
    ScheduleResult step() {
        ScheduleResult plan = scheduler.schedule();
        for (const sched::ScheduledChunk& chunk : plan.chunks) {
            Request& r = *chunk.request;
            r.computed += chunk.tokens;
            r.blocks.length += chunk.tokens;
            kv.cache_full_blocks(r.id, r.blocks, r.tokens, r.blocks.length);
            if (r.computed < static_cast<std::int32_t>(r.tokens.size())) {
                continue; // a prefill chunk: no token yet
            }
            r.tokens.push_back(static_cast<std::int32_t>(7 + r.generated));
            ++r.generated;
            const std::int64_t capacity =
                static_cast<std::int64_t>(kv.total_blocks()) * kv.block_size();
            if (r.generated >= r.spec.max_tokens || r.blocks.length + 2 > capacity) {
                r.state = RequestState::finished;
                scheduler.finish(&r);
                kv.release(r.id, r.blocks);
            }
        }
        return plan;
    }

    std::string check_kv() const {
        std::vector<const kv::SequenceBlocks*> live;
        for (const Request* r : scheduler.running()) {
            live.push_back(&r->blocks);
        }
        return kv.check(live);
    }
};

QList<qint64> ids(const std::vector<Request*>& requests) {
    QList<qint64> out;
    for (const Request* r : requests) {
        out.append(static_cast<qint64>(r->id));
    }
    return out;
}

QList<int> chunk_sizes(const ScheduleResult& plan) {
    QList<int> out;
    for (const sched::ScheduledChunk& chunk : plan.chunks) {
        out.append(chunk.tokens);
    }
    return out;
}

} // namespace

class TestScheduler : public QObject {
    Q_OBJECT

private slots:
    void budgets_hold_on_every_step_data();
    void budgets_hold_on_every_step();
    void chunked_prefill_splits_a_prompt_data();
    void chunked_prefill_splits_a_prompt();
    void decode_and_prefill_share_the_budget();
    void victim_policy_picks_the_right_request_data();
    void victim_policy_picks_the_right_request();
    void first_come_first_served_data();
    void first_come_first_served();
    void rejection_reasons_data();
    void rejection_reasons();
    void rejection_does_not_block_the_queue();
};

void TestScheduler::budgets_hold_on_every_step_data() {
    QTest::addColumn<unsigned>("seed");
    QTest::addColumn<int>("blocks");
    QTest::addColumn<int>("max_num_seqs");
    QTest::addColumn<int>("max_num_batched_tokens");
    QTest::addColumn<bool>("chunked_prefill");
    QTest::addColumn<VictimPolicy>("victim");
    QTest::addColumn<bool>("prefix_caching");

    // Tight caches force preemption; small budgets force chunking.
    QTest::newRow("roomy, chunked") << 1u << 256 << 8 << 64 << true << VictimPolicy::newest << true;
    QTest::newRow("tight, newest") << 2u << 24 << 6 << 48 << true << VictimPolicy::newest << false;
    QTest::newRow("tight, oldest") << 3u << 24 << 6 << 48 << true << VictimPolicy::oldest << true;
    QTest::newRow("tight, largest")
        << 4u << 24 << 6 << 48 << true << VictimPolicy::largest << false;
    QTest::newRow("one sequence") << 5u << 32 << 1 << 32 << true << VictimPolicy::newest << false;
    QTest::newRow("budget of one token")
        << 6u << 32 << 4 << 1 << true << VictimPolicy::newest << false;
    QTest::newRow("unchunked, tight")
        << 7u << 24 << 6 << 96 << false << VictimPolicy::newest << false;
    QTest::newRow("unchunked, largest")
        << 8u << 20 << 3 << 96 << false << VictimPolicy::largest << true;
    // Outputs longer than the budget: a preempted request has more to
    // recompute than one step may take.
    QTest::newRow("unchunked, small budget")
        << 9u << 16 << 4 << 12 << false << VictimPolicy::newest << false;
}

void TestScheduler::budgets_hold_on_every_step() {
    QFETCH(unsigned, seed);
    QFETCH(int, blocks);
    QFETCH(int, max_num_seqs);
    QFETCH(int, max_num_batched_tokens);
    QFETCH(bool, chunked_prefill);
    QFETCH(VictimPolicy, victim);
    QFETCH(bool, prefix_caching);

    SchedulerConfig config;
    config.max_num_seqs = max_num_seqs;
    config.max_num_batched_tokens = max_num_batched_tokens;
    config.chunked_prefill = chunked_prefill;
    config.victim = victim;
    constexpr int kBlockSize = 4;
    Driver d(blocks, kBlockSize, config, prefix_caching);

    std::mt19937 rng(seed);
    // Prompt plus output stays within the cache, so every request can
    // finish, even after preemption; unchunked, the prompt fits the step
    // budget, but what a preempted request must recompute (prompt and output
    // so far) may not, and it catches up in chunks.
    const int longest = blocks * kBlockSize - 2;
    std::uniform_int_distribution<int> prompt_len(
        1, std::min({60, longest - 1, chunked_prefill ? 1 << 30 : max_num_batched_tokens}));
    std::uniform_int_distribution<int> arrivals(0, 3);
    constexpr int kRequests = 40;
    int preempting_steps = 0;
    int steps = 0;
    for (; steps < 5000; ++steps) {
        for (int n = arrivals(rng); n > 0 && static_cast<int>(d.requests.size()) < kRequests; --n) {
            const int prompt = prompt_len(rng);
            std::uniform_int_distribution<int> output(1, std::min(24, longest - prompt));
            d.add(prompt, output(rng));
        }
        std::vector<std::int32_t> remaining_before(d.requests.size());
        for (std::size_t i = 0; i < d.requests.size(); ++i) {
            remaining_before[i] = d.requests[i]->remaining_to_compute();
        }
        const ScheduleResult plan = d.step();

        std::int64_t tokens = 0;
        QSet<qint64> seen;
        for (const sched::ScheduledChunk& chunk : plan.chunks) {
            const auto id = chunk.request->id;
            QVERIFY2(!seen.contains(id), "a request scheduled twice in one step");
            seen.insert(id);
            QVERIFY(chunk.tokens >= 1);
            // Preempted-then-readmitted requests restart from zero: compare
            // with what was left before the step only for the others.
            if (!plan.preempted.empty() && std::find(plan.preempted.begin(), plan.preempted.end(),
                                                     chunk.request) != plan.preempted.end()) {
                QFAIL("a request preempted in a step was also given work in it");
            }
            QVERIFY(chunk.tokens <= remaining_before[static_cast<std::size_t>(id)]);
            if (!chunked_prefill && chunk.request->accounting.preemptions == 0) {
                // The whole remainder (less any prefix hit): a token came out.
                QCOMPARE(chunk.request->remaining_to_compute(), 1);
            }
            tokens += chunk.tokens;
        }
        QVERIFY2(tokens <= max_num_batched_tokens,
                 qPrintable(QString("step %1: %2 tokens").arg(steps).arg(tokens)));
        QVERIFY(static_cast<int>(plan.chunks.size()) <= max_num_seqs);
        QVERIFY(static_cast<int>(d.scheduler.running_count()) <= max_num_seqs);
        if (!plan.preempted.empty()) {
            ++preempting_steps;
            QVERIFY2(plan.admitted.empty(), "admitted on a step that preempted");
        }
        QVERIFY(plan.rejected.empty());
        const std::string problem = d.check_kv();
        QVERIFY2(problem.empty(), problem.c_str());
        // A step with work waiting must do some: no stall.
        if (d.scheduler.running_count() + d.scheduler.waiting_count() > 0 &&
            plan.preempted.empty()) {
            QVERIFY2(!plan.chunks.empty(), qPrintable(QString("step %1 idle").arg(steps)));
        }
        if (static_cast<int>(d.requests.size()) == kRequests &&
            d.scheduler.running_count() + d.scheduler.waiting_count() == 0) {
            break;
        }
    }
    for (const auto& r : d.requests) {
        QCOMPARE(r->state, RequestState::finished);
        QCOMPARE(r->generated, r->spec.max_tokens);
    }
    QCOMPARE(d.kv.stats().used, 0);
    qInfo("%d steps, %d of them preempted", steps, preempting_steps);
    if (QByteArray(QTest::currentDataTag()).startsWith("tight") ||
        QByteArray(QTest::currentDataTag()).startsWith("unchunked")) {
        QVERIFY2(preempting_steps > 0, "the tight rows are meant to preempt");
    }
}

void TestScheduler::chunked_prefill_splits_a_prompt_data() {
    QTest::addColumn<int>("prompt");
    QTest::addColumn<int>("budget");
    QTest::addColumn<QList<int>>("chunks"); // tokens per step until the first token

    QTest::newRow("fits in one step") << 20 << 32 << QList<int>{20};
    QTest::newRow("exactly the budget") << 32 << 32 << QList<int>{32};
    QTest::newRow("one over") << 33 << 32 << QList<int>{32, 1};
    QTest::newRow("three and a bit") << 100 << 32 << QList<int>{32, 32, 32, 4};
    QTest::newRow("budget of one") << 3 << 1 << QList<int>{1, 1, 1};
}

void TestScheduler::chunked_prefill_splits_a_prompt() {
    QFETCH(int, prompt);
    QFETCH(int, budget);
    QFETCH(QList<int>, chunks);

    SchedulerConfig config;
    config.max_num_batched_tokens = budget;
    Driver d(64, 4, config);
    Request* r = d.add(prompt, 3);
    QList<int> seen;
    while (r->generated == 0) {
        const ScheduleResult plan = d.step();
        QCOMPARE(plan.chunks.size(), std::size_t{1});
        seen.append(plan.chunks.front().tokens);
        QVERIFY(seen.size() <= chunks.size());
    }
    QCOMPARE(seen, chunks);
    QCOMPARE(ids(d.step().admitted), QList<qint64>{}); // admitted once, on the first step
    QCOMPARE(chunk_sizes(d.step()), QList<int>{1});    // then one token per decode step
}

void TestScheduler::decode_and_prefill_share_the_budget() {
    // A decoding request takes its one token first; the prompt behind it gets
    // the rest of the budget, then the remainder the next step.
    SchedulerConfig config;
    config.max_num_batched_tokens = 16;
    Driver d(64, 4, config);
    d.add(4, 10);
    QCOMPARE(chunk_sizes(d.step()), (QList<int>{4}));
    d.add(30, 10);
    ScheduleResult plan = d.step();
    QCOMPARE(chunk_sizes(plan), (QList<int>{1, 15}));
    QCOMPARE(ids(plan.admitted), QList<qint64>{1});
    QCOMPARE(chunk_sizes(d.step()), (QList<int>{1, 15}));
    QCOMPARE(chunk_sizes(d.step()), (QList<int>{1, 1}));
}

void TestScheduler::victim_policy_picks_the_right_request_data() {
    QTest::addColumn<VictimPolicy>("victim");
    QTest::addColumn<QList<qint64>>("preempted");
    QTest::addColumn<QList<qint64>>("waiting_after");

    // Running in admission order: A (id 0, one block), B (id 1, three
    // blocks), C (id 2, one block); the cache of five blocks is full and each
    // needs a new block for its next token. A asks first, with every
    // running request a candidate. D (id 3) waits, and would fit.
    // newest: C goes; A grows into its block; B then finds none and, the
    //   only candidate left, goes itself.
    // oldest: A goes (itself); B grows into its block; C, last, goes itself.
    // largest: B goes, freeing three blocks; A and C grow.
    QTest::newRow("newest") << VictimPolicy::newest << QList<qint64>{2, 1}
                            << QList<qint64>{1, 2, 3};
    QTest::newRow("oldest") << VictimPolicy::oldest << QList<qint64>{0, 2}
                            << QList<qint64>{2, 0, 3};
    QTest::newRow("largest") << VictimPolicy::largest << QList<qint64>{1} << QList<qint64>{1, 3};
}

void TestScheduler::victim_policy_picks_the_right_request() {
    QFETCH(VictimPolicy, victim);
    QFETCH(QList<qint64>, preempted);
    QFETCH(QList<qint64>, waiting_after);

    SchedulerConfig config;
    config.victim = victim;
    Driver d(5, 4, config);
    d.add(4, 10);
    d.add(12, 10);
    d.add(4, 10);
    const ScheduleResult first = d.step();
    QCOMPARE(ids(first.admitted), (QList<qint64>{0, 1, 2}));
    QCOMPARE(d.kv.available_blocks(), 0);
    d.add(2, 10);

    const ScheduleResult plan = d.step();
    QCOMPARE(ids(plan.preempted), preempted);
    QVERIFY2(plan.admitted.empty(), "a step that preempted must not admit");
    QList<qint64> waiting;
    for (const Request* r : d.scheduler.waiting()) {
        waiting.append(r->id);
    }
    QCOMPARE(waiting, waiting_after); // the preempted go back to the front
    for (const qint64 id : preempted) {
        const Request& r = *d.requests[static_cast<std::size_t>(id)];
        QCOMPARE(r.state, RequestState::waiting);
        QCOMPARE(r.computed, 0);
        QCOMPARE(r.accounting.preemptions, 1);
        QVERIFY(r.blocks.block_table.empty());
    }
    // Everyone else got its decode token.
    QCOMPARE(plan.chunks.size(), 3 - static_cast<std::size_t>(preempted.size()));
    for (const sched::ScheduledChunk& chunk : plan.chunks) {
        QVERIFY(!preempted.contains(chunk.request->id));
        QCOMPARE(chunk.tokens, 1);
    }
    const std::string problem = d.check_kv();
    QVERIFY2(problem.empty(), problem.c_str());
}

void TestScheduler::first_come_first_served_data() {
    QTest::addColumn<bool>("chunked_prefill");
    QTest::addColumn<QList<qint64>>("admitted");
    QTest::addColumn<QList<int>>("chunks");

    // Budget 16; prompts of 10, 10 and 3 tokens wait. Without chunked
    // prefill the second does not fit the 6 tokens left, and the third,
    // though it would fit, waits behind it.
    QTest::newRow("unchunked") << false << QList<qint64>{0} << QList<int>{10};
    QTest::newRow("chunked") << true << QList<qint64>{0, 1} << QList<int>{10, 6};
}

void TestScheduler::first_come_first_served() {
    QFETCH(bool, chunked_prefill);
    QFETCH(QList<qint64>, admitted);
    QFETCH(QList<int>, chunks);

    SchedulerConfig config;
    config.max_num_batched_tokens = 16;
    config.chunked_prefill = chunked_prefill;
    Driver d(64, 4, config);
    d.add(10, 5);
    d.add(10, 5);
    d.add(3, 5);
    const ScheduleResult plan = d.step();
    QCOMPARE(ids(plan.admitted), admitted);
    QCOMPARE(chunk_sizes(plan), chunks);
    if (!chunked_prefill) {
        // Next step: one decode token, then both in arrival order (1 + 10 + 3).
        const ScheduleResult next = d.step();
        QCOMPARE(ids(next.admitted), (QList<qint64>{1, 2}));
        QCOMPARE(chunk_sizes(next), (QList<int>{1, 10, 3}));
    }
}

void TestScheduler::rejection_reasons_data() {
    QTest::addColumn<int>("blocks");
    QTest::addColumn<int>("max_model_len");
    QTest::addColumn<bool>("chunked_prefill");
    QTest::addColumn<int>("prompt");
    QTest::addColumn<QString>("reason"); // a part of it; empty: runs

    // Blocks of 4 tokens; a budget of 8 tokens per step.
    QTest::newRow("empty prompt") << 8 << 0 << true << 0 << "the prompt is empty";
    QTest::newRow("longer than the cache")
        << 4 << 0 << true << 16
        << "it needs 17 tokens of KV cache, more than the whole cache holds (16)";
    QTest::newRow("just fits the cache") << 4 << 0 << true << 15 << "";
    QTest::newRow("reaches the model length")
        << 64 << 10 << true << 10
        << "its 10 prompt tokens leave no room under the model length of 10 (--max-model-len)";
    QTest::newRow("under the model length") << 64 << 10 << true << 9 << "";
    QTest::newRow("over the budget, unchunked")
        << 64 << 0 << false << 9
        << "its 9 prompt tokens exceed the step budget of 8 and chunked prefill is off";
    QTest::newRow("the budget, unchunked") << 64 << 0 << false << 8 << "";
    QTest::newRow("over the budget, chunked") << 64 << 0 << true << 9 << "";
}

void TestScheduler::rejection_reasons() {
    QFETCH(int, blocks);
    QFETCH(int, max_model_len);
    QFETCH(bool, chunked_prefill);
    QFETCH(int, prompt);
    QFETCH(QString, reason);

    SchedulerConfig config;
    config.max_num_batched_tokens = 8;
    config.max_model_len = max_model_len;
    config.chunked_prefill = chunked_prefill;
    Driver d(blocks, 4, config);
    Request* r = d.add(prompt, 1);
    const QString why = QString::fromStdString(d.scheduler.rejection_reason(*r));
    QVERIFY2(reason.isEmpty() ? why.isEmpty() : why.contains(reason), qPrintable(why));
    const ScheduleResult plan = d.step();
    if (reason.isEmpty()) {
        QVERIFY(plan.rejected.empty());
        QCOMPARE(ids(plan.admitted), QList<qint64>{0});
    } else {
        QCOMPARE(ids(plan.rejected), QList<qint64>{0});
        QCOMPARE(r->state, RequestState::rejected);
        QVERIFY2(QString::fromStdString(r->finish_reason).contains(reason),
                 r->finish_reason.c_str());
        QVERIFY(r->blocks.block_table.empty());
        QCOMPARE(d.kv.stats().used, 0);
    }
}

void TestScheduler::rejection_does_not_block_the_queue() {
    SchedulerConfig config;
    config.max_model_len = 32;
    Driver d(64, 4, config);
    d.add(40, 4);
    d.add(5, 4);
    const ScheduleResult plan = d.step();
    QCOMPARE(ids(plan.rejected), QList<qint64>{0});
    QCOMPARE(ids(plan.admitted), QList<qint64>{1});
}

QTEST_GUILESS_MAIN(TestScheduler)
#include "tst_scheduler.moc"
