// `kvscope gate BASE NEW -- RECORD_OPTIONS`: a regression gate for a shared
// CI machine. Two builds of kvscope record the same workload round after
// round into OUT/base and OUT/new: by default both at once on one CPU, taking
// the engine's steps in turns (app/cli/step_turns.h), so whatever slows the
// machine slows both alike; or (--interleave runs) one whole run after the
// other. Base goes first in odd rounds, new in even ones. Then the two sets
// are compared as `kvscope compare OUT/base OUT/new` would, each round a
// pair. Exit status 1 when NEW regressed.
#include "app/cli/command.h"
#include "app/cli/comparison_report.h"
#include "app/cli/step_turns.h"
#include "app/cli/stop_request.h"
#include "engine/util/host_clock.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sched.h>
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
    int rounds = 0; // 0: 10 in step, 25 by runs (docs/regression-gates.md says why)
    std::string interleave = "steps"; // steps: both builds at once, a step each in turn; runs
    std::string cpu = "auto";         // where both builds run: auto, none or a CPU's number
    cpu_set_t cpus{};                 // resolved from `cpu`; empty: not pinned
    std::string out = "kvscope-gate";
    ComparisonFlags flags;
};

// Starts `program record ARGS --out recording`, its output into `log` (on the
// gate's CPUs: it inherits them); with `turns`, the record takes its steps
// when the gate hands them over.
pid_t start_record(const std::string& program, const std::vector<std::string>& args,
                   const fs::path& recording, const fs::path& log, const TurnGiver* turns) {
    std::vector<std::string> argv = {program, "record"};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.insert(argv.end(), {"--out", recording.string(), "--force"});
    if (turns != nullptr) {
        argv.insert(argv.end(), {"--step-turns", kChildTurnsOption});
    }
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
    if (turns != nullptr) {
        posix_spawn_file_actions_adddup2(&actions, turns->child_end(), kChildTurns);
    }
    pid_t child = 0;
    const int spawned =
        posix_spawnp(&child, program.c_str(), &actions, nullptr, pointers.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (spawned != 0) {
        throw std::runtime_error("cannot run " + program + ": " + std::strerror(spawned));
    }
    return child;
}

// Waits for a record to end. Throws, naming its log, when it failed (unless
// the gate was asked to stop: a record that saved marked its run interrupted).
void finish_record(pid_t child, const std::string& program, const fs::path& log) {
    int status = 0;
    while (waitpid(child, &status, 0) < 0) {
        if (errno != EINTR) {
            throw std::runtime_error(std::string("waiting for ") + program + ": " +
                                     std::strerror(errno));
        }
    }
    if (StopRequest::requested()) {
        if (WIFSIGNALED(status)) {
            std::fprintf(stderr,
                         "kvscope gate: %s record ended by signal %d before it could "
                         "save (its output: %s)\n",
                         program.c_str(), WTERMSIG(status), log.c_str());
        }
        return;
    }
    if (WIFSIGNALED(status)) {
        throw std::runtime_error(program + " record was stopped by signal " +
                                 std::to_string(WTERMSIG(status)) +
                                 " (its output: " + log.string() + ")");
    }
    if (WEXITSTATUS(status) != 0) {
        std::string hint;
        std::ifstream output(log);
        const std::string text((std::istreambuf_iterator<char>(output)),
                               std::istreambuf_iterator<char>());
        if (text.find("--step-turns") != std::string::npos &&
            text.find("not expected") != std::string::npos) { // CLI11's words
            hint = "; a build from before --interleave steps: gate it with --interleave runs";
        }
        throw std::runtime_error(program + " record failed with status " +
                                 std::to_string(WEXITSTATUS(status)) +
                                 " (its output: " + log.string() + ")" + hint);
    }
}

// A stop of the gate asks the records it runs to stop and save too, while
// they run.
class ForwardStops {
public:
    explicit ForwardStops(pid_t child, pid_t other_child = 0) {
        StopRequest::forward_to(child, other_child);
    }
    ~ForwardStops() { StopRequest::forward_to(0); }
    ForwardStops(const ForwardStops&) = delete;
    ForwardStops& operator=(const ForwardStops&) = delete;
};

// Waits until a record has ended, leaving it unreaped: until it is reaped its
// pid cannot be another process's, so a stop forwarded meanwhile is safe.
// How it ended.
siginfo_t wait_until_ended(pid_t child) {
    siginfo_t ended{};
    while (waitid(P_PID, static_cast<id_t>(child), &ended, WEXITED | WNOWAIT) < 0 &&
           errno == EINTR) {
    }
    return ended;
}

// A record whose turns ended without its saying the run was over: failed,
// unless it exited with status 0 (a build from before records said so).
bool went_away_failing(pid_t child) {
    const siginfo_t ended = wait_until_ended(child);
    return !(ended.si_code == CLD_EXITED && ended.si_status == 0);
}

// Waits for a record the gate forwards stops to, then reaps it (throwing as
// finish_record does).
void finish_forwarded(pid_t child, const std::string& program, const fs::path& log) {
    wait_until_ended(child);
    StopRequest::forget(child);
    finish_record(child, program, log);
}

double seconds_since(std::int64_t start_ns) {
    return static_cast<double>(host_now_ns() - start_ns) * 1e-9;
}

// One record on its own; the seconds it took.
double record_alone(const std::string& program, const std::vector<std::string>& args,
                    const fs::path& recording, const fs::path& log) {
    const std::int64_t start = host_now_ns();
    const pid_t child = start_record(program, args, recording, log, nullptr);
    const ForwardStops forward(child);
    finish_forwarded(child, program, log);
    return seconds_since(start);
}

struct RecordJob {
    const std::string& program;
    fs::path recording;
    fs::path log;
};

// Both records at once, in step: each step of `first`, then the same step of
// `second`, until both have ended; the seconds it took.
double record_in_step(const std::vector<std::string>& args, const RecordJob& first,
                      const RecordJob& second) {
    const std::int64_t start = host_now_ns();
    TurnGiver first_turns;
    TurnGiver second_turns;
    const pid_t first_pid =
        start_record(first.program, args, first.recording, first.log, &first_turns);
    first_turns.close_child_end();
    pid_t second_pid = 0;
    try {
        second_pid =
            start_record(second.program, args, second.recording, second.log, &second_turns);
    } catch (...) {
        kill(first_pid, SIGINT);
        first_turns.release();
        waitpid(first_pid, nullptr, 0);
        throw;
    }
    second_turns.close_child_end();
    {
        const ForwardStops forward(first_pid, second_pid);
        // A record that ended takes no more turns; the other goes on. One
        // that went away without ending its run failed: the round stops
        // there rather than run the other build on unpaired.
        bool first_gone = false;
        bool second_gone = false;
        while (!StopRequest::requested() && (first_turns.stepping() || second_turns.stepping())) {
            // The other record waits for its turn meanwhile: nothing runs
            // unpaired while the gate looks at how one went away.
            first_gone = first_turns.step() == Turn::gone && went_away_failing(first_pid);
            if (first_gone || StopRequest::requested()) {
                break;
            }
            second_gone = second_turns.step() == Turn::gone && went_away_failing(second_pid);
            if (second_gone) {
                break;
            }
        }
        // Both done, stopping or one failed: let go; a record still running
        // stops at its next step (when stopping, it was asked to by signal
        // too) and saves.
        first_turns.release();
        second_turns.release();
        std::exception_ptr first_failure;
        std::exception_ptr second_failure;
        try {
            finish_forwarded(first_pid, first.program, first.log);
        } catch (...) {
            first_failure = std::current_exception();
        }
        try {
            finish_forwarded(second_pid, second.program, second.log);
        } catch (...) {
            second_failure = std::current_exception();
        }
        // The one that went away is the cause; the other only stopped with it.
        if (second_gone && second_failure) {
            std::rethrow_exception(second_failure);
        }
        if (first_failure) {
            std::rethrow_exception(first_failure);
        }
        if (second_failure) {
            std::rethrow_exception(second_failure);
        }
    }
    return seconds_since(start);
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
        const RecordJob base{args.base, base_folder / (std::string(name) + ".sqlite"),
                             base_folder / (std::string(name) + ".log")};
        const RecordJob now{args.now, new_folder / (std::string(name) + ".sqlite"),
                            new_folder / (std::string(name) + ".log")};
        // Base first in odd rounds, new first in even ones.
        const RecordJob& first = round % 2 == 1 ? base : now;
        const RecordJob& second = round % 2 == 1 ? now : base;
        if (args.interleave == "steps") {
            const double seconds = record_in_step(args.record_args, first, second);
            if (StopRequest::requested()) {
                return;
            }
            std::fprintf(stderr, "kvscope gate: round %d/%d: both in step, %.1f s\n", round,
                         args.rounds, seconds);
            continue;
        }
        const double first_s =
            record_alone(first.program, args.record_args, first.recording, first.log);
        const double second_s =
            StopRequest::requested()
                ? 0
                : record_alone(second.program, args.record_args, second.recording, second.log);
        if (StopRequest::requested()) {
            return;
        }
        const double base_s = round % 2 == 1 ? first_s : second_s;
        const double new_s = round % 2 == 1 ? second_s : first_s;
        std::fprintf(stderr, "kvscope gate: round %d/%d: base %.1f s, new %.1f s\n", round,
                     args.rounds, base_s, new_s);
    }
}

// The engine threads the record options ask for; 0 when they leave it to the
// machine (all its CPUs).
int engine_threads(const std::vector<std::string>& record_args) {
    int threads = 0;
    for (std::size_t i = 0; i < record_args.size(); ++i) {
        const std::string& a = record_args[i];
        std::string value;
        if ((a == "--threads" || a == "-t") && i + 1 < record_args.size()) {
            value = record_args[i + 1];
        } else if (a.starts_with("--threads=")) {
            value = a.substr(10);
        } else if (a.starts_with("-t") && a.size() > 2 && a[2] != '-') {
            value = a.substr(2);
        }
        if (!value.empty()) {
            threads = std::atoi(value.c_str());
        }
    }
    return threads;
}

// `--cpu`: auto is the last CPU the gate may use (the first tends to take
// the machine's interrupts). A virtual machine's CPUs run at different
// paces from moment to moment; two builds on one CPU meet the same one.
std::string resolve_cpus(GateArgs& args) {
    CPU_ZERO(&args.cpus);
    if (args.cpu == "none") {
        return {};
    }
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
        return std::string("cannot read which CPUs the gate may use: ") + std::strerror(errno);
    }
    int cpu = -1;
    if (args.cpu == "auto") {
        for (int c = 0; c < CPU_SETSIZE; ++c) {
            cpu = CPU_ISSET(c, &allowed) ? c : cpu;
        }
    } else {
        const auto [end, error] =
            std::from_chars(args.cpu.data(), args.cpu.data() + args.cpu.size(), cpu);
        if (error != std::errc() || end != args.cpu.data() + args.cpu.size() || cpu < 0 ||
            cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &allowed)) {
            return "--cpu " + args.cpu +
                   ": not a CPU this gate may use (auto, none, or one of "
                   "the CPUs `taskset -p` lists)";
        }
    }
    if (cpu >= 0) {
        CPU_SET(cpu, &args.cpus);
        // The gate itself, so that every record (and every thread of it) is
        // born there; the gate only waits.
        if (sched_setaffinity(0, sizeof args.cpus, &args.cpus) != 0) {
            return "cannot keep the builds on CPU " + std::to_string(cpu) + ": " +
                   std::strerror(errno) + " (--cpu none runs them where the system puts them)";
        }
    }
    return {};
}

int run_gate(GateArgs& args) {
    if (args.rounds == 0) {
        args.rounds = args.interleave == "steps" ? 10 : 25;
    }
    if (const std::string problem = resolve_cpus(args); !problem.empty()) {
        std::fprintf(stderr, "kvscope gate: %s\n", problem.c_str());
        return exit_usage;
    }
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
    if (args.interleave == "steps" && args.rounds % 2 == 1) {
        std::fprintf(stderr, "kvscope gate: note: with an odd number of rounds the base build "
                             "takes the first turn once more than the new one; an even number "
                             "balances them\n");
    }
    if (CPU_COUNT(&args.cpus) == 1 && engine_threads(args.record_args) != 1) {
        std::fprintf(stderr,
                     "kvscope gate: note: both builds run on one CPU, but the record options "
                     "do not ask for one engine thread: add --threads 1 to them, or give the "
                     "gate --cpu none\n");
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
                     "Runs of each build (default: 10 in step, 25 by runs; at least 7 at the "
                     "default alpha of 0.01)")
        ->check(CLI::Range(2, 1000));
    parser
        ->add_option("--interleave", args->interleave,
                     "steps: both builds run at once and take the engine's steps in turns, so "
                     "a change in the machine's pace falls on both (both builds need this "
                     "option's support); runs: one build's whole run, then the other's")
        ->check(CLI::IsMember({"steps", "runs"}))
        ->capture_default_str();
    parser
        ->add_option("--cpu", args->cpu,
                     "Where both builds run: auto (the last CPU the gate may use), none (where "
                     "the system puts them), or a CPU's number. One CPU for both means one pace "
                     "for both; a workload with --threads N wants none")
        ->capture_default_str();
    parser->add_option("--out", args->out, "Folder for the recordings (OUT/base, OUT/new)")
        ->capture_default_str();
    add_comparison_flags(*parser, args->flags);
    parser->footer("Example:\n  kvscope gate old/kvscope new/kvscope -- --workload shared-prefix "
                   "--requests 1 --max-tokens 24 --max-num-batched-tokens 32 --all-at-once "
                   "--threads 1");
    return {parser, [args] {
                return run_gate(*args);
            }};
}

} // namespace kvscope::cli
