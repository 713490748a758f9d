// Attach UI frames: the desktop app attached (File > Attach to engine, as
// MainWindow::start_attach) to N paced vLLM-style publishers, every view
// live, rendered offscreen at 1440x900. What it measures is how long the
// window's event loop stays busy at a stretch: a 1 ms timer's lateness is
// the time input and paints waited, so a stretch under 16 ms is a frame
// kept at 60 Hz. Beside it: how much of the stream the window applied, what
// the attach let the publishers drop (counted lost), and the app's RSS.
// Prints a Markdown table.
//
//   kvscope-bench-attach-ui [--publishers 8] [--rate 100000] [--duration 30]
//
// The publishers are kvscope-bench-attach's (that binary, next to this one,
// run with --publish in a child process): the same workload and pacing as
// the throughput benchmark.
#include "app/ui/main_window.h"
#include "app/ui/run/attach_controller.h"
#include "bench/process_stats.h"
#include "bench/publisher_process.h"
#include "profiler/run_store.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <sys/wait.h>
#include <vector>

#include <QApplication>
#include <QElapsedTimer>
#include <QTimer>

namespace {

using namespace kvscope;

struct Options {
    int publishers = 8;
    double rate = 100'000;
    double duration_s = 30;
    double warmup_s = 2; // connecting and the first frames: not counted
    std::size_t resident = 20'000;
};

double percentile(std::vector<double> values, double p) {
    if (values.empty()) {
        return 0;
    }
    std::sort(values.begin(), values.end());
    const auto index = static_cast<std::size_t>(p * static_cast<double>(values.size() - 1));
    return values[index];
}

int run(const Options& o, int argc, char** argv) {
    if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) {
        qputenv("QT_QPA_PLATFORM", "offscreen");
    }
    QApplication app(argc, argv);
    QApplication::setApplicationName("kvscope-bench-attach-ui"); // its own QSettings

    const std::filesystem::path publisher =
        std::filesystem::read_symlink("/proc/self/exe").parent_path() / "kvscope-bench-attach";
    // A little longer than we watch: the window is stopped while they still publish.
    const double publish_s = o.warmup_s + o.duration_s + 5;
    bench::PublisherProcess child = bench::start_publisher_process(
        publisher.string(),
        {"kvscope-bench-attach", "--publish", "--publishers", std::to_string(o.publishers),
         "--rate", std::to_string(o.rate), "--duration", std::to_string(publish_s), "--resident",
         std::to_string(o.resident)});
    ui::AttachSettings settings;
    for (int i = 0; i < o.publishers; ++i) {
        const std::string endpoint = bench::read_line(child.out);
        if (endpoint.empty()) {
            std::fprintf(stderr, "kvscope-bench-attach-ui: no endpoint from %s\n",
                         publisher.c_str());
            close(child.in);
            waitpid(child.pid, nullptr, 0);
            return 1;
        }
        settings.endpoints << QString::fromStdString(endpoint);
    }
    settings.num_blocks = static_cast<qint64>(o.resident);

    ui::MainWindow window;
    window.resize(1440, 900);
    window.show();
    window.start_attach(settings);

    // The probe: how late each 1 ms tick comes is how long the loop was busy
    // (or waiting for a core: the publishers, the attach and the window share
    // this machine's); the window thread's CPU time between two ticks is the
    // work it did at a stretch.
    std::vector<double> stalls_ms;
    std::vector<double> work_ms;
    double worst_at_s = 0;
    double worst_ms = 0;
    const auto thread_cpu_ns = [] {
        return static_cast<qint64>(std::llround(bench::thread_cpu_seconds() * 1e9));
    };
    qint64 last_cpu_ns = thread_cpu_ns();
    // The thread's time waiting for a core (the kernel's schedstat).
    const auto runqueue_wait_ns = [] {
        std::ifstream in("/proc/thread-self/schedstat");
        long long on_cpu = 0;
        long long waiting = 0;
        in >> on_cpu >> waiting;
        return static_cast<qint64>(waiting);
    };
    qint64 last_wait_ns = runqueue_wait_ns();
    double late_ms = 0;         // over all stretches later than 16 ms:
    double late_work_ms = 0;    // the window's work in them
    double late_waiting_ms = 0; // and its waiting for a core
    std::vector<std::int64_t> rss;
    QElapsedTimer clock;
    clock.start();
    qint64 last_ns = clock.nsecsElapsed();
    qint64 next_rss_ns = 0;
    QTimer probe;
    probe.setTimerType(Qt::PreciseTimer);
    probe.setInterval(1);
    QObject::connect(&probe, &QTimer::timeout, [&] {
        const qint64 now = clock.nsecsElapsed();
        const qint64 cpu = thread_cpu_ns();
        const qint64 wait = runqueue_wait_ns();
        if (static_cast<double>(now) > o.warmup_s * 1e9) {
            const double stall = static_cast<double>(now - last_ns) / 1e6;
            stalls_ms.push_back(stall);
            work_ms.push_back(static_cast<double>(cpu - last_cpu_ns) / 1e6);
            if (stall > 16) {
                late_ms += stall;
                late_work_ms += work_ms.back();
                late_waiting_ms += static_cast<double>(wait - last_wait_ns) / 1e6;
            }
            if (stall > worst_ms) {
                worst_ms = stall;
                worst_at_s = static_cast<double>(now) / 1e9;
            }
        }
        last_cpu_ns = cpu;
        last_wait_ns = wait;
        if (now >= next_rss_ns) {
            rss.push_back(bench::rss_kib());
            next_rss_ns = now + 1'000'000'000;
        }
        last_ns = now;
    });
    probe.start();
    QTimer::singleShot(static_cast<int>((o.warmup_s + o.duration_s) * 1000), [&] {
        probe.stop();
        window.attacher()->stop();
    });
    // Waiting for events, not spinning: the window's thread's CPU time is
    // then the window's work.
    while (probe.isActive() || window.attacher()->running()) {
        QApplication::processEvents(QEventLoop::AllEvents | QEventLoop::WaitForMoreEvents);
    }
    QApplication::processEvents(); // the finished() signal and the last events

    close(child.in);
    int status = 0;
    waitpid(child.pid, &status, 0);
    std::fclose(child.out);

    const profiler::RunStore* store = window.store();
    std::int64_t received = 0;
    std::int64_t lost = 0;
    std::int64_t resident = 0;
    if (store != nullptr) {
        for (const auto& [id, source] : store->attached().sources()) {
            received += source.status.events;
            lost += source.status.lost;
            resident += static_cast<std::int64_t>(source.blocks.size());
        }
    }
    const double over_16 = static_cast<double>(std::count_if(stalls_ms.begin(), stalls_ms.end(),
                                                             [](double s) { return s > 16; })) /
                           static_cast<double>(std::max<std::size_t>(stalls_ms.size(), 1));
    std::int64_t max_rss = 0;
    for (const std::int64_t kib : rss) {
        max_rss = std::max(max_rss, kib);
    }
    std::printf("| what | value |\n| --- | ---: |\n");
    std::printf("| publishers x target rate | %d x %.0f ev/s = %.0f ev/s |\n", o.publishers,
                o.rate / o.publishers, o.rate);
    std::printf("| watched (s, after %.0f s of warm-up) | %.0f |\n", o.warmup_s, o.duration_s);
    std::printf("| event loop busy at a stretch, ms: median / p99 / p99.9 / max | %.2f / %.2f / "
                "%.2f / %.2f |\n",
                percentile(stalls_ms, 0.5), percentile(stalls_ms, 0.99),
                percentile(stalls_ms, 0.999), percentile(stalls_ms, 1.0));
    std::printf("| the longest, at (s from the start) | %.1f |\n", worst_at_s);
    double work_total_ms = 0;
    for (const double w : work_ms) {
        work_total_ms += w;
    }
    std::printf("| stretches over 16 ms: the window's work / waiting for a core / the rest | "
                "%.0f%% / %.0f%% / %.0f%% |\n",
                100.0 * late_work_ms / std::max(late_ms, 1e-9),
                100.0 * late_waiting_ms / std::max(late_ms, 1e-9),
                100.0 * (late_ms - late_work_ms - late_waiting_ms) / std::max(late_ms, 1e-9));
    std::printf("| window thread's share of a core while watched | %.0f%% |\n",
                100.0 * work_total_ms / (o.duration_s * 1e3));
    std::printf("| window thread's CPU time at a stretch, ms: median / p99 / p99.9 / max | %.2f / "
                "%.2f / %.2f / %.2f |\n",
                percentile(work_ms, 0.5), percentile(work_ms, 0.99), percentile(work_ms, 0.999),
                percentile(work_ms, 1.0));
    const double work_over_16 =
        static_cast<double>(
            std::count_if(work_ms.begin(), work_ms.end(), [](double s) { return s > 16; })) /
        static_cast<double>(std::max<std::size_t>(work_ms.size(), 1));
    std::printf("| share of 1 ms probes later than 16 ms / with over 16 ms of work | %.3f%% / "
                "%.3f%% |\n",
                100.0 * over_16, 100.0 * work_over_16);
    std::printf("| rows the window applied | %lld (%.0f/s) |\n",
                static_cast<long long>(store != nullptr ? store->event_count() : 0),
                store != nullptr
                    ? static_cast<double>(store->event_count()) / (o.warmup_s + o.duration_s)
                    : 0.0);
    std::printf("| KV events the attach received / messages lost at the publishers | %lld / "
                "%lld |\n",
                static_cast<long long>(received), static_cast<long long>(lost));
    std::printf("| resident blocks shown at the end | %lld |\n", static_cast<long long>(resident));
    std::printf("| attached rows kept for scrubbing | %zu |\n",
                store != nullptr ? store->attached_rows_kept() : std::size_t{0});
    std::printf("| app RSS MiB: last / max | %.1f / %.1f |\n",
                rss.empty() ? 0.0 : static_cast<double>(rss.back()) / 1024.0,
                static_cast<double>(max_rss) / 1024.0);
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    Options o;
    CLI::App cli("kvscope attach UI frames: the app attached to N publishers");
    cli.add_option("--publishers", o.publishers, "publishers (one process, one socket each)")
        ->check(CLI::Range(1, 64));
    cli.add_option("--rate", o.rate, "KV events a second over all publishers")
        ->check(CLI::PositiveNumber);
    cli.add_option("--duration", o.duration_s, "seconds watched")->check(CLI::PositiveNumber);
    cli.add_option("--resident", o.resident, "blocks each publisher keeps resident (LRU)");
    CLI11_PARSE(cli, argc, argv);
    std::signal(SIGPIPE, SIG_IGN);
    try {
        return run(o, argc, argv);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "kvscope-bench-attach-ui: %s\n", e.what());
        return 1;
    }
}
