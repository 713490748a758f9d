// compute_stats on a recording whose answers were worked out by hand: a
// recorder fed hand-made events at chosen times, then every summary checked
// against numbers computed from those times (step-time percentiles by
// Distribution::of's definition, TTFT, TPOT, the prefix hit rate at first
// admission, preemptions, block occupancy).
#include "engine/events/typed_events.h"
#include "profiler/recording/recorder.h"
#include "profiler/recording/recording_stats.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include <QTemporaryDir>
#include <QTest>

using namespace kvscope;
using events::EngineEvent;

namespace {

constexpr std::int64_t kMs = 1'000'000; // ns
constexpr std::int64_t kStart = 5'000 * kMs;
constexpr int kSteps = 61;

// A typed event stamped at `t`: the events are written the way the engine
// writes them (engine/events/typed_events.h).
template <class Typed>
EngineEvent at(std::int64_t t, const Typed& typed) {
    EngineEvent e = events::to_event(typed);
    e.time_ns = t;
    return e;
}

// Step i lasts (37 i mod 61) + 1 ms: the 61 steps take 1, 2, ..., 61 ms in a
// shuffled order, with 1 ms between steps. Step i schedules i + 1 prefill
// and 2 decode tokens.
std::vector<EngineEvent> steps() {
    std::vector<EngineEvent> out;
    std::int64_t t = kStart;
    for (int i = 0; i < kSteps; ++i) {
        const std::int64_t ms = (37 * i) % kSteps + 1;
        out.push_back(at(t, events::StepBegin{.step = i,
                                              .scheduled_tokens = i + 3,
                                              .sequences = 2,
                                              .phase = events::StepPhase::mixed}));
        t += ms * kMs;
        out.push_back(
            at(t, events::StepEnd{.step = i, .prefill_tokens = i + 1, .decode_tokens = 2}));
        t += kMs;
    }
    return out;
}

// Four requests, times in ms after kStart:
//   1: arrives at 10, looks up 32 of 64 prompt tokens, first token at 50
//      (TTFT 40), finishes at 90 with 5 tokens (TPOT 40 / 4 = 10)
//   2: arrives at 20, looks up 0 of 100, is preempted, looks up again on
//      re-admission (96 of 100, not a new hit), first token at 120 (TTFT
//      100), finishes at 130 with 1 token (no TPOT: no second token)
//   3: arrives at 30, looks up 16 of 36, first token at 55 (TTFT 25),
//      finishes at 115 with 9 tokens (TPOT 60 / 8 = 7.5)
//   4: arrives at 40, looks up 0 of 50, is aborted before its first token
std::vector<EngineEvent> requests() {
    const auto ms = [](std::int64_t after) {
        return kStart + after * kMs;
    };
    const auto lookup = [](std::int64_t request, std::int64_t hit, std::int64_t prompt) {
        return events::PrefixLookup{.request = request,
                                    .hit_tokens = hit,
                                    .prompt_tokens = prompt,
                                    .short_of_block_tokens = 0};
    };
    return {
        at(ms(10), events::RequestArrived{.request = 1, .prompt_tokens = 64, .prompt_pieces = {}}),
        at(ms(11), lookup(1, 32, 64)),
        at(ms(11), events::RequestAdmitted{.request = 1,
                                           .cached_tokens = 32,
                                           .computed_tokens = 32,
                                           .blocks_hit = 2,
                                           .blocks_missed = 2}),
        at(ms(20), events::RequestArrived{.request = 2, .prompt_tokens = 100, .prompt_pieces = {}}),
        at(ms(21), lookup(2, 0, 100)),
        at(ms(30), events::RequestArrived{.request = 3, .prompt_tokens = 36, .prompt_pieces = {}}),
        at(ms(31), lookup(3, 16, 36)),
        at(ms(40), events::RequestArrived{.request = 4, .prompt_tokens = 50, .prompt_pieces = {}}),
        at(ms(41), lookup(4, 0, 50)),
        at(ms(45), events::RequestPreempted{.request = 2, .preemptions = 1}),
        at(ms(50), events::FirstToken{.request = 1}),
        at(ms(55), events::FirstToken{.request = 3}),
        at(ms(60), events::RequestAborted{.request = 4}),
        at(ms(90),
           events::RequestFinished{.request = 1, .generated_tokens = 5, .reason = "token limit"}),
        at(ms(100), lookup(2, 96, 100)),
        at(ms(115),
           events::RequestFinished{.request = 3, .generated_tokens = 9, .reason = "token limit"}),
        at(ms(120), events::FirstToken{.request = 2}),
        at(ms(130),
           events::RequestFinished{.request = 2, .generated_tokens = 1, .reason = "token limit"}),
    };
}

// Used blocks 3, 7 and 5 of 16, cached 1, 2 and 6.
std::vector<EngineEvent> memory() {
    const auto sample = [](std::int64_t used, std::int64_t cached, std::int64_t free) {
        return events::MemorySample{
            .used_blocks = used, .cached_blocks = cached, .free_blocks = free, .total_blocks = 16};
    };
    return {
        at(kStart + 12 * kMs, sample(3, 1, 12)),
        at(kStart + 56 * kMs, sample(7, 2, 7)),
        at(kStart + 116 * kMs, sample(5, 6, 5)),
    };
}

} // namespace

class TestRecordingStats : public QObject {
    Q_OBJECT

private slots:
    void distribution_is_nearest_rank();
    void stats_of_a_hand_made_recording();
};

void TestRecordingStats::distribution_is_nearest_rank() {
    // Distribution::of takes sorted[round(q (n - 1))]: no interpolation.
    const auto d = profiler::Distribution::of({4, 1, 3, 2});
    QCOMPARE(d.count, std::int64_t{4});
    QCOMPARE(d.mean, 2.5);
    QCOMPARE(d.p50, 3.0); // 0.5 * 3 = 1.5 rounds up to index 2
    QCOMPARE(d.p90, 4.0); // 2.7 -> 3
    QCOMPARE(d.p99, 4.0);
    QCOMPARE(d.max, 4.0);
    const auto empty = profiler::Distribution::of({});
    QCOMPARE(empty.count, std::int64_t{0});
    QCOMPARE(empty.max, 0.0);
}

void TestRecordingStats::stats_of_a_hand_made_recording() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const std::string path = dir.filePath("hand.sqlite").toStdString();
    std::vector<EngineEvent> all = steps();
    for (auto* part : {requests, memory}) {
        const std::vector<EngineEvent> more = part();
        all.insert(all.end(), more.begin(), more.end());
    }
    // In time order, as an engine would emit them.
    std::stable_sort(all.begin(), all.end(), [](const EngineEvent& a, const EngineEvent& b) {
        return a.time_ns < b.time_ns;
    });
    {
        profiler::Recorder recorder(path, {{"model_name", "hand-made"}});
        for (const EngineEvent& e : all) {
            recorder.on_event(e);
        }
        recorder.close();
    }

    const profiler::RecordingStats s = profiler::compute_stats(path);
    QCOMPARE(s.events, static_cast<std::int64_t>(all.size()));
    QCOMPARE(s.events, std::int64_t{2 * kSteps + 18 + 3});
    // The first event at kStart, the last step_end after 61 steps taking
    // 1 + ... + 61 = 1891 ms with 60 gaps of 1 ms: 1.951 s.
    QCOMPARE(s.duration_s, 1.951);

    // Steps: the sorted durations are 1, 2, ..., 61 ms, so sorted[k] = k + 1.
    // p50: index round(0.5 * 60) = 30 -> 31 ms; p90: round(54) = 54 -> 55;
    // p99: round(59.4) = 59 -> 60 (not the maximum, 61); mean 31.
    QCOMPARE(s.steps, std::int64_t{kSteps});
    QCOMPARE(s.step_ms.count, std::int64_t{kSteps});
    QCOMPARE(s.step_ms.mean, 31.0);
    QCOMPARE(s.step_ms.p50, 31.0);
    QCOMPARE(s.step_ms.p90, 55.0);
    QCOMPARE(s.step_ms.p99, 60.0);
    QCOMPARE(s.step_ms.max, 61.0);
    QCOMPARE(static_cast<int>(s.step_ms_samples.size()), kSteps);
    QCOMPARE(s.step_ms_samples[0], 1.0);  // step 0: 0 mod 61 + 1
    QCOMPARE(s.step_ms_samples[1], 38.0); // step 1: 37 + 1
    QCOMPARE(s.step_ms_samples[2], 14.0); // step 2: 74 mod 61 + 1
    // Prefill tokens 1 + ... + 61 = 1891, decode 2 per step.
    QCOMPARE(s.prefill_tokens, std::int64_t{1891});
    QCOMPARE(s.decode_tokens, std::int64_t{2 * kSteps});

    // Requests: TTFT per request (by id) 40, 100, 25 ms; request 4 never had
    // a first token. Sorted 25, 40, 100: p50 index 1 -> 40, p90 round(1.8) =
    // 2 -> 100, mean 55.
    QCOMPARE(s.requests, std::int64_t{4});
    QCOMPARE(s.finished, std::int64_t{3});
    QCOMPARE(s.aborted, std::int64_t{1});
    QCOMPARE(s.rejected, std::int64_t{0});
    QCOMPARE(s.ttft_ms_samples, (std::vector<double>{40, 100, 25}));
    QCOMPARE(s.ttft_ms.count, std::int64_t{3});
    QCOMPARE(s.ttft_ms.mean, 55.0);
    QCOMPARE(s.ttft_ms.p50, 40.0);
    QCOMPARE(s.ttft_ms.p90, 100.0);
    QCOMPARE(s.ttft_ms.max, 100.0);
    // TPOT: request 1 (90 - 50) / (5 - 1) = 10, request 3 (115 - 55) / 8 =
    // 7.5; request 2 generated one token, so it has none. Sorted 7.5, 10:
    // p50 index round(0.5) = 1 -> 10, mean 8.75.
    QCOMPARE(s.tpot_ms_samples, (std::vector<double>{10, 7.5}));
    QCOMPARE(s.tpot_ms.mean, 8.75);
    QCOMPARE(s.tpot_ms.p50, 10.0);
    QCOMPARE(s.generated_tokens, std::int64_t{15});

    // Prefix cache at first admission: 32 + 0 + 16 + 0 = 48 hit of 64 + 100
    // + 36 + 50 = 250 prompt tokens, 19.2%. Request 2's second lookup (96 of
    // 100, after its preemption) is not counted: with it, 144 / 350.
    QCOMPARE(s.prompt_tokens, std::int64_t{250});
    QCOMPARE(s.prefix_hit_tokens, std::int64_t{48});
    QCOMPARE(s.prefix_hit_rate, 0.192);
    QCOMPARE(s.preemptions, std::int64_t{1});

    // Blocks: used 3, 7, 5 of 16 (peak 7, mean 5), cached 1, 2, 6 (mean 3).
    QCOMPARE(s.total_blocks, std::int64_t{16});
    QCOMPARE(s.peak_used_blocks, std::int64_t{7});
    QCOMPARE(s.mean_used_blocks, 5.0);
    QCOMPARE(s.mean_cached_blocks, 3.0);
}

QTEST_GUILESS_MAIN(TestRecordingStats)
#include "tst_recording_stats.moc"
