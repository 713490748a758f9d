// Live UI frames: the desktop app running its default live demo (kvscope-ui
// --demo: the engine on this machine's CPU, every view following it),
// rendered offscreen at 1440x900, optionally beside N busy processes that
// spin on a core each, as a browser or a build would. What it measures is
// how long the window's event loop stays busy at a stretch
// (bench/event_loop_probe.h): issue 42 asks for a p99 of 16 ms or less with
// one busy process. Prints a Markdown table.
//
//   kvscope-bench-live-ui [--busy 1] [--duration 20]
#include "app/ui/main_window.h"
#include "app/ui/run/engine_controller.h"
#include "bench/event_loop_probe.h"
#include "profiler/store/run_store.h"

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include <QApplication>
#include <QTimer>

namespace {

using namespace kvscope;

struct Options {
    int busy = 0;
    double duration_s = 20;
    double warmup_s = 2; // the model loading and the first frames: not counted
};

// `count` child processes spinning on a core each until killed.
std::vector<pid_t> start_busy(int count) {
    std::vector<pid_t> children;
    for (int i = 0; i < count; ++i) {
        const pid_t pid = fork();
        if (pid == 0) {
            volatile unsigned long spins = 0;
            for (;;) {
                spins = spins + 1;
            }
        }
        if (pid > 0) {
            children.push_back(pid);
        }
    }
    return children;
}

void stop_busy(const std::vector<pid_t>& children) {
    for (const pid_t pid : children) {
        kill(pid, SIGKILL);
    }
    for (const pid_t pid : children) {
        waitpid(pid, nullptr, 0);
    }
}

int run(const Options& o, int argc, char** argv) {
    if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) {
        qputenv("QT_QPA_PLATFORM", "offscreen");
    }
    // Before the application's threads start: a forked child holds none.
    const std::vector<pid_t> busy = start_busy(o.busy);
    QApplication app(argc, argv);
    QApplication::setApplicationName("kvscope-bench-live-ui"); // its own QSettings

    ui::MainWindow window;
    window.resize(1440, 900);
    window.show();
    window.start_demo();

    bench::EventLoopProbe probe(o.warmup_s);
    QTimer::singleShot(static_cast<int>((o.warmup_s + o.duration_s) * 1000), [&] {
        probe.stop();
        window.engine()->stop();
    });
    // Waiting for events, not spinning: the window's thread's CPU time is
    // then the window's work.
    while (probe.active() || window.engine()->running()) {
        QApplication::processEvents(QEventLoop::AllEvents | QEventLoop::WaitForMoreEvents);
    }
    QApplication::processEvents(); // the finished() signal and the last events
    stop_busy(busy);

    const profiler::RunStore* store = window.store();
    std::printf("| what | value |\n| --- | ---: |\n");
    std::printf("| busy processes beside the app (one core each) | %d of %ld cores |\n", o.busy,
                sysconf(_SC_NPROCESSORS_ONLN));
    std::printf("| watched (s, after %.0f s of warm-up) | %.0f |\n", o.warmup_s, o.duration_s);
    probe.print_rows(o.duration_s);
    std::printf("| engine events the window applied | %lld |\n",
                static_cast<long long>(store != nullptr ? store->event_count() : 0));
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    Options o;
    CLI::App cli("kvscope live UI frames: the app running its live demo, beside busy processes");
    cli.add_option("--busy", o.busy, "processes spinning on a core each beside the app")
        ->check(CLI::Range(0, 256));
    cli.add_option("--duration", o.duration_s, "seconds watched")->check(CLI::PositiveNumber);
    CLI11_PARSE(cli, argc, argv);
    try {
        return run(o, argc, argv);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "kvscope-bench-live-ui: %s\n", e.what());
        return 1;
    }
}
