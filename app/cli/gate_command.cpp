// `kvscope gate BASE NEW -- RECORD_OPTIONS`: a regression gate for a shared
// CI machine. Two builds of kvscope record the same workload in turns, round
// after round (base then new, then new then base, so a drift in the
// machine's load falls on both alike), into OUT/base and OUT/new; then the
// two sets are compared as `kvscope compare OUT/base OUT/new` would, each run
// one sample. Exit status 1 when NEW regressed.
#include "app/cli/command.h"
#include "app/cli/comparison_report.h"
#include "app/cli/stop_request.h"
#include "engine/util/host_clock.h"

#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <spawn.h>
#include <stdexcept>
#include <sys/wait.h>

extern char** environ;

namespace kvscope::cli {
namespace {

namespace fs = std::filesystem;

struct GateArgs {
    std::string base;
    std::string now;
    std::vector<std::string> record_args;
    int rounds = 25; // see docs/regression-gates.md: enough for a machine that slows in spells
    std::string out = "kvscope-gate";
    ComparisonFlags flags;
};

// Runs `program record ARGS --out recording`, its output into `log`; the
// seconds it took. Throws with the log's name when it fails.
double record_once(const std::string& program, const std::vector<std::string>& args,
                   const fs::path& recording, const fs::path& log) {
    std::vector<std::string> argv = {program, "record"};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.insert(argv.end(), {"--out", recording.string(), "--force"});
    std::vector<char*> pointers;
    for (std::string& a : argv) {
        pointers.push_back(a.data());
    }
    pointers.push_back(nullptr);

    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
    const std::int64_t start = host_now_ns();
    pid_t child = 0;
    const int spawned =
        posix_spawnp(&child, program.c_str(), &actions, nullptr, pointers.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (spawned != 0) {
        throw std::runtime_error("cannot run " + program + ": " + std::strerror(spawned));
    }
    // A stop of the gate asks the record to stop and save too.
    StopRequest::forward_to(child);
    int status = 0;
    while (waitpid(child, &status, 0) < 0) {
        if (errno != EINTR) {
            StopRequest::forward_to(0);
            throw std::runtime_error(std::string("waiting for ") + program + ": " +
                                     std::strerror(errno));
        }
    }
    StopRequest::forward_to(0);
    if (StopRequest::requested()) {
        if (WIFSIGNALED(status)) {
            std::fprintf(stderr,
                         "kvscope gate: %s record ended by signal %d before it could "
                         "save (its output: %s)\n",
                         program.c_str(), WTERMSIG(status), log.c_str());
        }
        return 0; // the gate stops; a record that saved marked its run interrupted
    }
    const double seconds = static_cast<double>(host_now_ns() - start) * 1e-9;
    if (WIFSIGNALED(status)) {
        throw std::runtime_error(program + " record was stopped by signal " +
                                 std::to_string(WTERMSIG(status)) +
                                 " (its output: " + log.string() + ")");
    }
    if (WEXITSTATUS(status) != 0) {
        throw std::runtime_error(program + " record failed with status " +
                                 std::to_string(WEXITSTATUS(status)) +
                                 " (its output: " + log.string() + ")");
    }
    return seconds;
}

// A side's folder, emptied of the rounds an earlier gate left (and nothing
// else).
fs::path side_folder(const fs::path& out, const char* side) {
    const fs::path folder = out / side;
    fs::create_directories(folder);
    for (const auto& entry : fs::directory_iterator(folder)) {
        if (entry.path().filename().string().starts_with("round-")) {
            fs::remove(entry.path());
        }
    }
    return folder;
}

// Records the rounds, base and new in turns, until done or asked to stop.
void record_rounds(const GateArgs& args, const fs::path& base_folder, const fs::path& new_folder) {
    for (int round = 1; round <= args.rounds; ++round) {
        char name[32];
        std::snprintf(name, sizeof name, "round-%03d", round);
        const auto run = [&](const std::string& program, const fs::path& folder) {
            return record_once(program, args.record_args, folder / (std::string(name) + ".sqlite"),
                               folder / (std::string(name) + ".log"));
        };
        // Base first in odd rounds, new first in even ones.
        double base_s = 0;
        double new_s = 0;
        if (round % 2 == 1) {
            base_s = run(args.base, base_folder);
            new_s = StopRequest::requested() ? 0 : run(args.now, new_folder);
        } else {
            new_s = run(args.now, new_folder);
            base_s = StopRequest::requested() ? 0 : run(args.base, base_folder);
        }
        if (StopRequest::requested()) {
            return;
        }
        std::fprintf(stderr, "kvscope gate: round %d/%d: base %.1f s, new %.1f s\n", round,
                     args.rounds, base_s, new_s);
    }
}

int run_gate(GateArgs& args) {
    // A one-sided signed-rank test over R rounds can reach no p below 2^-R.
    if (std::ldexp(1.0, -args.rounds) >= args.flags.options.alpha) {
        std::fprintf(stderr,
                     "kvscope gate: %d rounds cannot show a regression at alpha %g (the "
                     "smallest p-value %d rounds can give is %g): use more rounds\n",
                     args.rounds, args.flags.options.alpha, args.rounds,
                     std::ldexp(1.0, -args.rounds));
        return exit_usage;
    }
    for (const std::string& a : args.record_args) {
        if (a == "--out" || a.starts_with("--out=") || a.starts_with("-o")) {
            std::fprintf(stderr, "kvscope gate: the recordings' paths are the gate's (--out DIR "
                                 "before --): leave --out out of the record options\n");
            return exit_usage;
        }
    }
    const fs::path out(args.out);
    const fs::path base_folder = side_folder(out, "base");
    const fs::path new_folder = side_folder(out, "new");
    int stopped_by = 0;
    {
        const StopRequest stop; // only while recording: the report runs as any command
        record_rounds(args, base_folder, new_folder);
        stopped_by = StopRequest::signal();
    }
    if (stopped_by != 0) {
        std::fprintf(stderr,
                     "kvscope gate: stopped by signal %d; the recordings so far are in %s\n",
                     stopped_by, out.string().c_str());
        std::signal(stopped_by, SIG_DFL);
        std::raise(stopped_by); // end as the signal asked, as a shell expects
        return 128 + stopped_by;
    }
    return report_comparison(args.base, base_folder, args.now, new_folder, args.flags);
}

} // namespace

Command add_gate_command(CLI::App& app) {
    auto args = std::make_shared<GateArgs>();
    CLI::App* parser = app.add_subcommand(
        "gate", "Record a workload with two builds in turns and compare them, each run one "
                "sample: a regression gate that holds on a shared machine (exit 1 when NEW "
                "regressed)");
    parser->add_option("base", args->base, "The baseline build's kvscope")->required();
    parser->add_option("new", args->now, "The kvscope to judge")->required();
    parser->add_option("record_options", args->record_args,
                       "After --: what both run as `kvscope record` options (a workload; "
                       "--all-at-once keeps the schedule the same on every run)");
    parser
        ->add_option("--rounds", args->rounds,
                     "Runs of each build (at least 7 at the default alpha of 0.01)")
        ->check(CLI::Range(2, 1000))
        ->capture_default_str();
    parser->add_option("--out", args->out, "Folder for the recordings (OUT/base, OUT/new)")
        ->capture_default_str();
    add_comparison_flags(*parser, args->flags);
    parser->footer("Example:\n  kvscope gate old/kvscope new/kvscope --rounds 25 -- --workload "
                   "shared-prefix --requests 4 --max-tokens 16 --all-at-once --threads 1");
    return {parser, [args] {
                return run_gate(*args);
            }};
}

} // namespace kvscope::cli
