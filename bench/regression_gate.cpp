// Does the regression gate hold on a shared machine? `kvscope gate` run many
// times while a competing process keeps a core busy: pairs of the same build
// must give no false alarm, and a build with a planted 5% slowdown
// (`--slow-down 5`, a wrapper script that adds it to every record) must be
// caught. Same-build and slowed trials alternate, so drift falls on both. For
// comparison, the single-run form (`kvscope compare` of one recording a side,
// each trial's first round) is judged on the same recordings.
//
//   kvscope-bench-gate --kvscope PATH [--trials N] [--rounds R] [--slowdown P]
//                      [--interleave steps|runs] [--busy N] [--dir DIR]
//                      [-- RECORD_OPTIONS]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace {

namespace fs = std::filesystem;

struct Options {
    std::string kvscope;
    int trials = 20;
    int rounds = 0;                   // 0: kvscope gate's default
    std::string interleave = "steps"; // kvscope gate's default
    double slowdown = 5;
    int busy = 1;
    fs::path dir = fs::temp_directory_path() / "kvscope-bench-gate";
    // The prompt in chunks of 32 tokens: steps of like size, each one paired
    // with the other build's in step (docs/regression-gates.md).
    std::vector<std::string> record = {
        "--requests", "1", "--max-tokens",  "24",
        "--threads",  "1", "--all-at-once", "--max-num-batched-tokens",
        "32"};
};

std::string shell_word(const std::string& word) {
    std::string out = "'";
    for (const char c : word) {
        out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    }
    return out + "'";
}

// Runs a shell command, returns its standard output and exit status.
std::pair<std::string, int> run(const std::string& command) {
    std::string out;
    FILE* pipe = popen(command.c_str(), "r");
    if (pipe == nullptr) {
        return {out, -1};
    }
    char buffer[4096];
    while (const std::size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) {
        out.append(buffer, n);
    }
    const int status = pclose(pipe);
    return {out, WIFEXITED(status) ? WEXITSTATUS(status) : -1};
}

// Busy processes: each spins on a core until killed.
std::vector<pid_t> start_busy(int count) {
    std::vector<pid_t> children;
    for (int i = 0; i < count; ++i) {
        const pid_t child = fork();
        if (child == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL); // never outlives the bench
            if (getppid() == 1) {
                _exit(0); // the bench ended before the line above
            }
            volatile unsigned long x = 1;
            for (;;) {
                x = x * 6364136223846793005UL + 1;
            }
        }
        children.push_back(child);
    }
    return children;
}

struct MetricTally {
    int flagged = 0;
    int not_compared = 0; // request spans of builds in step
    std::vector<double> changes;
    std::vector<double> widths; // interval high - low
};

struct Tally {
    int trials = 0;
    int gate_failed = 0;
    std::map<std::string, MetricTally> metrics;
    int single_run_flagged = 0; // the one-recording-a-side form
};

const std::vector<std::string> kMetrics = {
    "engine CPU time",     "engine CPU time, run totals", "step time",
    "time to first token", "time per output token",       "instructions"};

// One trial's line: the gate's verdict and the carrying metric's figures.
void print_trial(int trial, bool slow, const nlohmann::json& report, int status) {
    std::fprintf(stderr, "trial %2d %-8s gate %s", trial, slow ? "slowed" : "same",
                 status == 1 ? "REGRESSED" : "passed   ");
    for (const auto& m : report["metrics"]) {
        if (m["metric"] == "engine CPU time" && m["change"].is_number()) {
            std::fprintf(stderr, "  engine CPU time %+.1f%%", 100 * m["change"].get<double>());
            if (m.contains("interval") && m["interval"]["high"].is_number()) {
                std::fprintf(stderr, " [%+.1f%%, %+.1f%%]",
                             100 * (m["interval"]["low"].get<double>() - 1),
                             100 * (m["interval"]["high"].get<double>() - 1));
            }
            if (m["p_value"].is_number()) {
                std::fprintf(stderr, " p %.4f", m["p_value"].get<double>());
            }
        }
    }
    std::fprintf(stderr, "\n");
}

void judge(const nlohmann::json& report, int status, Tally& tally) {
    ++tally.trials;
    tally.gate_failed += status == 1;
    for (const auto& m : report["metrics"]) {
        const std::string name = m["metric"].get<std::string>();
        if (std::find(kMetrics.begin(), kMetrics.end(), name) == kMetrics.end()) {
            continue;
        }
        MetricTally& t = tally.metrics[name];
        t.flagged += m["verdict"] == "REGRESSED";
        t.not_compared += m["verdict"] == "not compared";
        if (m["verdict"] != "not measured" && m["verdict"] != "not compared") {
            t.changes.push_back(m["change"].get<double>());
        }
        if (m.contains("interval") && m["interval"]["high"].is_number()) {
            t.widths.push_back(m["interval"]["high"].get<double>() -
                               m["interval"]["low"].get<double>());
        }
    }
}

double median(std::vector<double> v) {
    if (v.empty()) {
        return 0;
    }
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

} // namespace

int main(int argc, char** argv) {
    Options o;
    CLI::App app{"kvscope gate under a competing busy process: false alarms and catches"};
    app.add_option("--kvscope", o.kvscope, "The kvscope command to gate")->required();
    app.add_option("--trials", o.trials, "Same-build trials, and as many slowed ones")
        ->capture_default_str();
    app.add_option("--rounds", o.rounds, "kvscope gate's rounds per trial (0: the gate's default)")
        ->capture_default_str();
    app.add_option("--interleave", o.interleave, "kvscope gate's --interleave (steps or runs)")
        ->capture_default_str();
    app.add_option("--slowdown", o.slowdown, "The planted slowdown, percent")
        ->capture_default_str();
    app.add_option("--busy", o.busy, "Competing processes spinning on a core each")
        ->capture_default_str();
    app.add_option("--dir", o.dir, "Scratch folder")->capture_default_str();
    std::vector<std::string> record;
    app.add_option("record", record, "After --: the record options of every run");
    CLI11_PARSE(app, argc, argv);
    if (!record.empty()) {
        o.record = record;
    }

    fs::create_directories(o.dir);
    // The slowed build: the same kvscope with --slow-down on every record.
    const fs::path slower = o.dir / "slower-kvscope";
    {
        std::ofstream script(slower);
        script << "#!/bin/sh\nexec " << shell_word(o.kvscope) << " \"$@\" --slow-down "
               << o.slowdown << "\n";
    }
    fs::permissions(slower, fs::perms::owner_all, fs::perm_options::add);
    std::string record_words;
    for (const std::string& word : o.record) {
        record_words += " " + shell_word(word);
    }

    const std::string rounds_option =
        o.rounds > 0 ? " --rounds " + std::to_string(o.rounds) : std::string();
    const std::vector<pid_t> busy = start_busy(o.busy);
    Tally same;
    Tally slowed;
    for (int trial = 1; trial <= o.trials; ++trial) {
        for (const bool slow : {false, true}) {
            // Every trial's recordings are kept, to look into a miss.
            char name[32];
            std::snprintf(name, sizeof name, "trial-%02d-%s", trial, slow ? "slowed" : "same");
            const fs::path out = o.dir / name;
            const std::string command = shell_word(o.kvscope) + " gate " + shell_word(o.kvscope) +
                                        " " + shell_word(slow ? slower.string() : o.kvscope) +
                                        rounds_option + " --interleave " + o.interleave +
                                        " --out " + shell_word(out.string()) + " --json --" +
                                        record_words + " 2>/dev/null";
            const auto [text, status] = run(command);
            const nlohmann::json report = nlohmann::json::parse(text, nullptr, false);
            if (status > 1 || report.is_discarded()) {
                std::fprintf(stderr, "trial %d: kvscope gate failed (status %d)\n", trial, status);
                continue;
            }
            judge(report, status, slow ? slowed : same);
            print_trial(trial, slow, report, status);
            // The single-run form on the first round's two recordings.
            const auto single =
                run(shell_word(o.kvscope) + " compare " +
                    shell_word((out / "base" / "round-001.sqlite").string()) + " " +
                    shell_word((out / "new" / "round-001.sqlite").string()) + " > /dev/null 2>&1");
            (slow ? slowed : same).single_run_flagged += single.second == 1;
        }
        std::fprintf(stderr, "trial %d/%d: false alarms %d, caught %d\n", trial, o.trials,
                     same.gate_failed, slowed.gate_failed);
    }
    for (const pid_t child : busy) {
        kill(child, SIGKILL);
        waitpid(child, nullptr, 0);
    }

    std::printf("kvscope gate --interleave %s, %s rounds a trial, %d busy process(es), planted "
                "slowdown %.1f%%\n",
                o.interleave.c_str(),
                o.rounds > 0 ? std::to_string(o.rounds).c_str() : "the gate's default", o.busy,
                o.slowdown);
    std::printf("record options:%s\n\n", record_words.c_str());
    std::printf("| judged by | same build: false alarms | %.0f%% slower: caught | median change "
                "(slower) | median interval width (slower) |\n",
                o.slowdown);
    std::printf("| --- | --- | --- | --- | --- |\n");
    std::printf("| gate verdict (any metric) | %d / %d | %d / %d | | |\n", same.gate_failed,
                same.trials, slowed.gate_failed, slowed.trials);
    for (const std::string& name : kMetrics) {
        const MetricTally& a = same.metrics[name];
        const MetricTally& b = slowed.metrics[name];
        if (a.changes.empty() && b.changes.empty()) {
            const char* why = a.not_compared + b.not_compared > 0 ? "not compared" : "not measured";
            std::printf("| %s | %s | %s | | |\n", name.c_str(), why, why);
            continue;
        }
        std::printf("| %s | %d / %d | %d / %d | %+.1f%% | %.3f |\n", name.c_str(), a.flagged,
                    same.trials, b.flagged, slowed.trials, 100 * median(b.changes),
                    median(b.widths));
    }
    std::printf("| single run a side (compare, round 1) | %d / %d | %d / %d | | |\n",
                same.single_run_flagged, same.trials, slowed.single_run_flagged, slowed.trials);
    return 0;
}
