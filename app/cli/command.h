// How a `kvscope` subcommand plugs into the parser: it declares its options on
// a CLI11 sub-app and hands back the function that runs it once parsing is done.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace kvscope::cli {

// Exit statuses shared by every subcommand.
inline constexpr int exit_ok = 0;
inline constexpr int exit_failure = 1; // the work failed (or, for compare, a metric regressed)
inline constexpr int exit_usage = 2;   // bad command line: unknown subcommand, option or value

struct Command {
    CLI::App* parser = nullptr;
    std::function<int()> run;
};

Command add_info_command(CLI::App& app);
Command add_generate_command(CLI::App& app);
Command add_bench_command(CLI::App& app);
Command add_run_command(CLI::App& app);
Command add_record_command(CLI::App& app);
Command add_stats_command(CLI::App& app);
Command add_compare_command(CLI::App& app);
Command add_gate_command(CLI::App& app);
Command add_export_command(CLI::App& app);
Command add_eval_command(CLI::App& app);
Command add_attach_command(CLI::App& app);
Command add_simulate_command(CLI::App& app);
Command add_size_command(CLI::App& app);

} // namespace kvscope::cli
