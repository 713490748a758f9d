// Recorder throughput: how many rows a second the recorder writes to SQLite
// (target: at least 1M), what queuing an event costs the engine's thread, and
// the bytes each kind of event takes in the file. Prints a Markdown table.
//
//   kvscope-bench-recorder [--events N] [--dir DIR]
#include "profiler/recording/recorder.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

using namespace kvscope;

namespace {

using Clock = std::chrono::steady_clock;

struct Result {
    std::string what;
    std::int64_t rows = 0;
    double seconds = 0;       // first row queued -> last row committed
    double close_seconds = 0; // building the indexes, folding the WAL in
    double queue_ns = 0;      // per row, on the producing thread
    double bytes_per_row = 0; // file size / rows
};

// A mix like a CPU recording's: mostly op slices (30 layers x 9 ops a step),
// the rest steps, block and request events.
events::EngineEvent engine_event(std::int64_t i, const char* mix) {
    static const char* const kOps[] = {"attn_norm", "qkv",      "rope",    "kv_write", "attention",
                                       "attn_out",  "ffn_norm", "gate_up", "down"};
    events::EngineEvent e;
    e.time_ns = 1'000'000 + i * 1000;
    const bool op =
        std::strcmp(mix, "op_slice") == 0 || (std::strcmp(mix, "mixed") == 0 && i % 10 < 8);
    if (op) {
        e.kind = events::EventKind::op_slice;
        e.a = e.time_ns + 700;
        e.b = (i / 9) % 30;
        e.c = i / 270;
        e.text = kOps[i % 9];
    } else if (std::strcmp(mix, "step") == 0 || i % 10 == 8) {
        e.kind = i % 2 ? events::EventKind::step_end : events::EventKind::step_begin;
        e.a = i / 2;
        e.b = 16;
        e.c = 16;
    } else {
        e.kind = events::EventKind::block_allocated;
        e.request = i % 64;
        e.block = static_cast<std::int32_t>(i % 4096);
    }
    return e;
}

// Times `feed` queuing `rows` rows into a fresh recording at `path`, then
// the writer catching up, then close().
template <typename Feed>
Result measure(const std::filesystem::path& path, std::int64_t rows, std::string what, Feed feed) {
    std::filesystem::remove(path);
    // No queue limit: this measures the writer against a producer that
    // queues everything at once, not the back-pressure that limit applies.
    profiler::Recorder recorder(path, {{"bench", "recorder throughput"}}, false,
                                static_cast<std::size_t>(rows));
    const auto start = Clock::now();
    feed(recorder);
    const auto queued = Clock::now();
    while (recorder.stats().events + recorder.stats().gpu_records < rows) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    const auto written = Clock::now();
    recorder.close();
    const auto closed = Clock::now();
    Result r;
    r.what = std::move(what);
    r.rows = rows;
    r.seconds = std::chrono::duration<double>(written - start).count();
    r.close_seconds = std::chrono::duration<double>(closed - written).count();
    r.queue_ns = std::chrono::duration<double, std::nano>(queued - start).count() /
                 static_cast<double>(rows);
    r.bytes_per_row =
        static_cast<double>(std::filesystem::file_size(path)) / static_cast<double>(rows);
    return r;
}

Result run_events(const std::filesystem::path& path, std::int64_t rows, const char* mix) {
    std::vector<events::EngineEvent> prepared;
    prepared.reserve(static_cast<std::size_t>(rows));
    for (std::int64_t i = 0; i < rows; ++i) {
        prepared.push_back(engine_event(i, mix));
    }
    return measure(path, rows, std::string("engine events (") + mix + ")",
                   [&prepared](profiler::Recorder& recorder) {
                       for (const events::EngineEvent& e : prepared) {
                           recorder.on_event(e);
                       }
                   });
}

Result run_kernels(const std::filesystem::path& path, std::int64_t rows) {
    static const char* const kNames[] = {
        "_ZN7kvscope7kernels12_GLOBAL__N_115rms_norm_kernelILi4EEEvPKfS4_Pfif",
        "_Z10add_kerneliPfS_", "ampere_sgemm_128x64_tn", "_Z16paged_attentionPKfS0_Pfi"};
    constexpr std::int64_t kBatch = 4096; // CUPTI hands over buffers of thousands
    std::vector<profiler::GpuActivityBatch> batches;
    for (std::int64_t i = 0; i < rows; i += kBatch) {
        profiler::GpuActivityBatch batch;
        for (std::int64_t j = i; j < std::min(rows, i + kBatch); ++j) {
            profiler::GpuKernel k;
            k.start_ns = 1'000'000 + j * 2000;
            k.end_ns = k.start_ns + 1500;
            k.place = {0, 1, 7, static_cast<std::uint32_t>(j)};
            k.name = kNames[j % 4];
            k.grid[0] = 132;
            k.block[0] = 256;
            batch.kernels.push_back(std::move(k));
        }
        batches.push_back(std::move(batch));
    }
    return measure(path, rows, "GPU kernel records", [&batches](profiler::Recorder& recorder) {
        for (profiler::GpuActivityBatch& batch : batches) {
            recorder.on_gpu_activity(std::move(batch));
        }
    });
}

} // namespace

int main(int argc, char** argv) {
    std::int64_t rows = 2'000'000;
    std::filesystem::path dir = std::filesystem::temp_directory_path();
    for (int i = 1; i + 1 < argc; i += 2) {
        if (std::strcmp(argv[i], "--events") == 0) {
            rows = std::stoll(argv[i + 1]);
        } else if (std::strcmp(argv[i], "--dir") == 0) {
            dir = argv[i + 1];
        }
    }
    if (argc % 2 == 0 || rows <= 0) {
        std::fprintf(stderr, "usage: %s [--events N] [--dir DIR]\n", argv[0]);
        return 2;
    }
    const std::filesystem::path path = dir / "kvscope-bench-recorder.sqlite";
    std::vector<Result> results;
    for (const char* mix : {"mixed", "op_slice", "step", "block"}) {
        std::fprintf(stderr, "writing %lld %s events...\n", static_cast<long long>(rows), mix);
        results.push_back(run_events(path, rows, mix));
    }
    std::fprintf(stderr, "writing %lld kernel records...\n", static_cast<long long>(rows));
    results.push_back(run_kernels(path, rows));
    std::filesystem::remove(path);

    std::printf("| rows | kind | rows/s written (queued -> committed) | queue cost on the "
                "engine thread (ns/row) | close: indexes + WAL (s) | rows/s including close | "
                "bytes/row |\n");
    std::printf("| ---: | --- | ---: | ---: | ---: | ---: | ---: |\n");
    for (const Result& r : results) {
        std::printf("| %lld | %s | %.0f | %.0f | %.2f | %.0f | %.1f |\n",
                    static_cast<long long>(r.rows), r.what.c_str(),
                    static_cast<double>(r.rows) / r.seconds, r.queue_ns, r.close_seconds,
                    static_cast<double>(r.rows) / (r.seconds + r.close_seconds), r.bytes_per_row);
    }
    return 0;
}
