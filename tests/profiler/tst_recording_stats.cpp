// compute_stats on a recording whose answers were worked out by hand: a
// recorder fed hand-made events at chosen times, then every summary checked
// against numbers computed from those times (step-time percentiles by
// Distribution::of's definition, TTFT, TPOT, the prefix hit rate at first
// admission, preemptions, block occupancy).
#include "engine/events/engine_event.h"
#include "profiler/recorder.h"
#include "profiler/recording_stats.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include <QTemporaryDir>
#include <QTest>

using namespace kvscope;
using events::EngineEvent;
using events::EventKind;

namespace {

constexpr std::int64_t kMs = 1'000'000; // ns
constexpr std::int64_t kStart = 5'000 * kMs;
constexpr int kSteps = 61;

EngineEvent event(std::int64_t t, EventKind kind, std::int64_t request = -1, std::int64_t a = 0,
                  std::int64_t b = 0, std::int64_t c = 0, std::int64_t d = 0) {
    EngineEvent e;
    e.time_ns = t;
    e.kind = kind;
    e.request = request;
    e.a = a;
    e.b = b;
    e.c = c;
    e.d = d;
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
        out.push_back(event(t, EventKind::step_begin, -1, i, i + 3, 2, 3));
        t += ms * kMs;
        out.push_back(event(t, EventKind::step_end, -1, i, i + 1, 2));
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
    const auto at = [](std::int64_t ms) {
        return kStart + ms * kMs;
    };
    return {
        event(at(10), EventKind::request_arrived, 1, 64),
        event(at(11), EventKind::prefix_lookup, 1, 32, 64),
        event(at(11), EventKind::request_admitted, 1, 32, 32, 2, 2),
        event(at(20), EventKind::request_arrived, 2, 100),
        event(at(21), EventKind::prefix_lookup, 2, 0, 100),
        event(at(30), EventKind::request_arrived, 3, 36),
        event(at(31), EventKind::prefix_lookup, 3, 16, 36),
        event(at(40), EventKind::request_arrived, 4, 50),
        event(at(41), EventKind::prefix_lookup, 4, 0, 50),
        event(at(45), EventKind::request_preempted, 2, 7),
        event(at(50), EventKind::first_token, 1),
        event(at(55), EventKind::first_token, 3),
        event(at(60), EventKind::request_aborted, 4),
        event(at(90), EventKind::request_finished, 1, 5),
        event(at(100), EventKind::prefix_lookup, 2, 96, 100),
        event(at(115), EventKind::request_finished, 3, 9),
        event(at(120), EventKind::first_token, 2),
        event(at(130), EventKind::request_finished, 2, 1),
    };
}

// Used blocks 3, 7 and 5 of 16, cached 1, 2 and 6.
std::vector<EngineEvent> memory() {
    return {
        event(kStart + 12 * kMs, EventKind::memory_sample, -1, 3, 1, 12, 16),
        event(kStart + 56 * kMs, EventKind::memory_sample, -1, 7, 2, 7, 16),
        event(kStart + 116 * kMs, EventKind::memory_sample, -1, 5, 6, 5, 16),
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
