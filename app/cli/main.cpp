// kvscope: the headless command (record, compare, export, bench, ...). Qt-free,
// so it runs on GPU servers with no display.
#include "app/cli/command.h"
#include "kvscope/build_info.h"

#include <exception>
#include <iostream>
#include <string>
#include <vector>

namespace {

using kvscope::cli::Command;

std::string known_names(const std::vector<Command>& commands) {
    std::string names;
    for (const Command& command : commands) {
        names += (names.empty() ? "" : ", ") + command.parser->get_name();
    }
    return names;
}

} // namespace

int main(int argc, char** argv) {
    using namespace kvscope::cli;

    CLI::App app{"kvscope: see how LLM inference uses its KV cache.\n"
                 "Records, compares, exports and benchmarks without a display.",
                 "kvscope"};
    app.set_version_flag("--version", std::string("kvscope ") + kvscope::build_info::version);
    app.require_subcommand(0, 1);
    app.footer("Run 'kvscope SUBCOMMAND --help' for a subcommand's options.\n"
               "Model: KVSCOPE_MODEL=/path/file.gguf overrides the default "
               "~/.cache/kvscope/models/SmolLM2-135M-Instruct.Q4_1.gguf.");

    std::vector<Command> commands;
    commands.push_back(add_info_command(app));
    commands.push_back(add_generate_command(app));
    commands.push_back(add_bench_command(app));
    commands.push_back(add_run_command(app));
    commands.push_back(add_record_command(app));
    commands.push_back(add_stats_command(app));
    commands.push_back(add_compare_command(app));
    commands.push_back(add_gate_command(app));
    commands.push_back(add_export_command(app));
    commands.push_back(add_eval_command(app));
    commands.push_back(add_attach_command(app));
    commands.push_back(add_simulate_command(app));
    commands.push_back(add_size_command(app));

    // A first word that is neither an option nor a subcommand gets a clearer
    // message than CLI11's generic "arguments were not expected".
    if (argc > 1 && argv[1][0] != '-') {
        const std::string word = argv[1];
        bool known = false;
        for (const Command& command : commands) {
            known = known || command.parser->check_name(word);
        }
        if (!known) {
            std::cerr << "kvscope: unknown subcommand '" << word
                      << "' (known: " << known_names(commands)
                      << ")\nRun 'kvscope --help' for usage.\n";
            return exit_usage;
        }
    }

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& error) {
        // --help and --version land here with exit code 0; every real parse
        // error is a usage error, whatever CLI11's own code for it.
        const int code = app.exit(error);
        return code == 0 ? exit_ok : exit_usage;
    }

    for (const Command& command : commands) {
        if (command.parser->parsed()) {
            try {
                return command.run();
            } catch (const std::exception& error) {
                std::cerr << "kvscope " << command.parser->get_name() << ": error: " << error.what()
                          << "\n";
                return exit_failure;
            }
        }
    }
    std::cerr << app.help() << "\nkvscope: a subcommand is required.\n";
    return exit_usage;
}
