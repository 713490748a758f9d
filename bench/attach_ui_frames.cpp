// Attach UI frames: the desktop app attached (File > Attach to engine, as
// MainWindow::start_attach) to N paced vLLM-style publishers, every view
// live, rendered offscreen at 1440x900. What it measures is how long the
// window's event loop stays busy at a stretch (bench/event_loop_probe.h).
// Beside it: how much of the stream the window applied, what the attach let
// the publishers drop (counted lost), and the app's RSS.
// Prints a Markdown table.
//
//   kvscope-bench-attach-ui [--publishers 8] [--rate 100000] [--duration 30]
//
// The publishers are kvscope-bench-attach's (that binary, next to this one,
// run with --publish in a child process): the same workload and pacing as
// the throughput benchmark.
#include "app/ui/main_window.h"
#include "app/ui/run/attach_controller.h"
#include "bench/event_loop_probe.h"
#include "bench/publisher_process.h"
#include "profiler/store/run_store.h"

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
    // this machine's).
    bench::EventLoopProbe probe(o.warmup_s);
    QTimer::singleShot(static_cast<int>((o.warmup_s + o.duration_s) * 1000), [&] {
        probe.stop();
        window.attacher()->stop();
    });
    // Waiting for events, not spinning: the window's thread's CPU time is
    // then the window's work.
    while (probe.active() || window.attacher()->running()) {
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
        for (const auto& [id, source] : store->attached().state().sources()) {
            received += source.status.events;
            lost += source.status.lost;
            resident += static_cast<std::int64_t>(source.blocks.size());
        }
    }
    std::printf("| what | value |\n| --- | ---: |\n");
    std::printf("| publishers x target rate | %d x %.0f ev/s = %.0f ev/s |\n", o.publishers,
                o.rate / o.publishers, o.rate);
    std::printf("| watched (s, after %.0f s of warm-up) | %.0f |\n", o.warmup_s, o.duration_s);
    probe.print_rows(o.duration_s);
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
                store != nullptr ? store->attached().rows_kept() : std::size_t{0});
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
